"""`check-marks`: the test files' CI level and hardware markers (ci.gates.marks)."""

from __future__ import annotations

from collections.abc import Sequence

from ci.taskdef import task


@task(
    replaces=("check_test_marks.py (pre-commit hook check-mark)",),
    help={
        "from_ref": "check only the tests/ files changed since this git revision",
    },
)
def check_marks(
    repo: str = "", from_ref: str = "", to_ref: str = "", words: Sequence[str] = ()
) -> None:
    """Every test file has a CI level and a hardware marker, and no direct SKU marker.

    A static scan of the files after `--` (default: every .py under tests/).
    Problems go to stdout, grouped per file; exit 1 on problems, 2 on bad input.
    """
    from ci.gates.marks import check_marks as run

    run(repo, words, from_ref=from_ref, to_ref=to_ref)
