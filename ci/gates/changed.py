"""The files a range changed, for gates that run on the diff only.

In CI, the hooks GitHub Actions skips (check-mark, shellcheck)
run on the diff, as they do locally under pre-commit. The range comes from the
one diff resolver (`ci.diff`), like every other task's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ci.diff import WORKTREE, resolve_diff
from ci.errors import UserError
from ci.pipeline.files import exists


def changed_files(
    repo: Path, from_ref: str, to_ref: str, wanted: Callable[[str], bool]
) -> list[Path]:
    """Existing files of `repo` changed in `from_ref...to_ref` that `wanted` keeps.

    `to_ref` defaults to HEAD; `WORKTREE` includes uncommitted and untracked
    work. Files are read from the working tree (as pre-commit does); deleted
    ones are skipped, unreadable ones are not.
    """
    head = WORKTREE if to_ref.upper() == "WORKTREE" else (to_ref or "HEAD")
    diff = resolve_diff(repo, base=from_ref, head=head)
    if diff.paths is None:
        raise UserError(f"--from-ref {from_ref}: cannot list the changed files ({diff.reason})")
    # Deleted files are skipped; an entry that is there but unreadable (a symlink
    # loop, a FIFO) is kept, so that the gate reports it instead of passing.
    return [
        repo / p for p in diff.paths if wanted(p) and exists(repo / p) and not (repo / p).is_dir()
    ]
