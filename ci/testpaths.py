"""Which changed paths are test files: a rule skip-ci (`ci.skipci`) and the diff
resolver (`ci.diff.Diff.patch`, which batches exactly these patches) share.
"""

from __future__ import annotations


def is_test_py(path: str) -> bool:
    """A `.py` file whose first path component is `tests`."""
    head, sep, _ = path.partition("/")
    return bool(sep) and head == "tests" and path.endswith(".py")
