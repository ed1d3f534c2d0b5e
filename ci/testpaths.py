"""Which changed paths are test files: a rule two areas share.

skip-ci (`ci.skipci`) buckets a changed `tests/**.py` file as a possible
skip-mark-only edit, and the diff resolver (`ci.diff.Diff.patch`) fetches the
patches of exactly those files in one batch, because they are what skip-ci
reads. Both ask this module, so neither has to import the other for it.
"""

from __future__ import annotations


def is_test_py(path: str) -> bool:
    """A `.py` file whose first path component is `tests`."""
    head, sep, _ = path.partition("/")
    return bool(sep) and head == "tests" and path.endswith(".py")
