"""Arguments after `--`, with their quoting intact.

Invoke joins everything after `--` into one string (`Context.remainder`), so
`-m 'a and b'` would come back as three words. The shell already split argv
correctly; we take it straight from `sys.argv`, which is the same list under
`inv` and under `vllm-omni-ci`.
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
