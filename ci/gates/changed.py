"""Which files a gate scans: those named after `--`, or those a range changed.

In CI the hooks GitHub Actions skips (check-mark, shellcheck) run on the diff, as
they do locally under pre-commit; the range comes from the one diff resolver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ci.diff import WORKTREE, resolve_diff
from ci.errors import UserError
from ci.pipeline.files import exists, given
from ci.refnames import revision_error


def chosen_files(
    repo: Path,
    names: Sequence[str],
    from_ref: str,
    to_ref: str,
    *,
    what: str,
    keep: Callable[[str, Path], bool | str],
    changed: Callable[[str], bool],
) -> list[Path] | None:
    """The files named after `--` (relative: to the cwd, else `repo`) that `keep(name, path)`
    keeps (True), skips (False) or refuses (a problem line; all at once, exit 2); else the
    existing files `from_ref...to_ref` changed (default HEAD; `WORKTREE`: uncommitted work
    too) that `changed` keeps, unreadable ones included to be reported; None: neither given."""
    if from_ref and names:
        raise UserError(f"give {what} after `--` or --from-ref, not both")
    if to_ref and not from_ref:
        raise UserError("--to-ref needs --from-ref")
    named = (("--from-ref", from_ref), ("--to-ref", to_ref))
    UserError.collect(filter(None, (revision_error(name, value) for name, value in named)))
    if from_ref:
        head = WORKTREE if to_ref.upper() == "WORKTREE" else (to_ref or "HEAD")
        diff = resolve_diff(repo, base=from_ref, head=head)
        if diff.paths is None:
            raise UserError(f"--from-ref {from_ref}: cannot list the changed files ({diff.reason})")
        found = (repo / p for p in diff.paths if changed(p))
        return [path for path in found if exists(path) and not path.is_dir()]
    if not names:
        return None
    chosen: list[Path] = []
    problems: list[str] = []
    for name in names:
        path = given(name, repo)
        if path is None:
            problems.append(
                f"{name}: no such file (relative paths: to the current directory or --repo)"
            )
        elif (verdict := keep(name, path)) is True:
            chosen.append(path)
        elif isinstance(verdict, str):
            problems.append(verdict)
    UserError.collect(problems)
    return chosen
