"""`python3 -m omni_sample TEXT...`: the sample's stand-in for `vllm serve --omni`."""

import sys

from omni_sample import OmniModel

if __name__ == "__main__":
    text = " ".join(sys.argv[1:]) or "hello"
    print(OmniModel().caption(text))
