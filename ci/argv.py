"""Arguments after `--`, with their quoting intact.

Invoke joins them into one string (`Context.remainder`), so `-m 'a and b'`
would come back as three words; `sys.argv` has them split right, under `inv`
and `vllm-omni-ci` alike.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def after_dashdash(argv: Sequence[str] | None = None) -> list[str]:
    """Everything after the first `--` (empty when there is none)."""
    args = list(sys.argv if argv is None else argv)
    try:
        return args[args.index("--") + 1 :]
    except ValueError:
        return []
