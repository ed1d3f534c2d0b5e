"""The repository a task works on (`--repo`), and the build it acts for.

`resolve_build` is the one rule for "what kind of build is this?": explicit env
values win (`BUILDKITE_PULL_REQUEST`, `BUILDKITE_BRANCH`, `..._BASE_BRANCH`,
`BUILDKITE_COMMIT`); inside Buildkite a missing commit is an input error (exit 2),
since a guess would test the wrong revision; outside it, a checkout on a branch
other than `main` is a PR against `main`, one on `main` a push to it, with the
commit `HEAD`, said once on stderr (`local build: …`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from ci import door
from ci.errors import UserError

MAIN: Final = "main"
CHOOSE_HINT: Final = "outside Buildkite; set BUILDKITE_PULL_REQUEST/BUILDKITE_BRANCH to choose"

BuildKind = Literal["pr", "main", "branch"]


def in_buildkite(env: Mapping[str, str] | None = None) -> bool:
    return (os.environ if env is None else env).get("BUILDKITE") == "true"


def git(cwd: Path | str, *args: str) -> door.Result:
    """`git ARGS` in `cwd`, captured; no git on PATH is `error: git: not found`, exit 127."""
    result = door.capture(["git", *args], cwd=str(cwd))
    if result.code == 127 and result.stderr == "error: command not found: git":
        raise UserError("git: not found", code=127)  # the exit-code table's "not found"
    return result


def resolve_repo(repo: str | os.PathLike[str] | None = None) -> Path:
    """`--repo`, or the git top-level of the current directory."""
    if repo:
        path = Path(repo).expanduser().resolve()
        if not path.is_dir():
            raise UserError(f"--repo: {repo} is not a directory")
        return path
    found = git(os.getcwd(), "rev-parse", "--show-toplevel")
    if not found.ok:
        raise UserError(
            "--repo: not given, and the current directory is not inside a git repository"
        )
    return Path(found.stdout.strip())


def _git(repo: Path, *args: str) -> str | None:
    result = git(repo, *args)
    return result.stdout.strip() or None if result.ok else None


def _from_buildkite_or_git(
    repo: Path, name: str, given: str | None, env: Mapping[str, str] | None, *git_args: str,
    message: str, unnamed: str,
) -> str:  # fmt: skip
    """`given`, else $name; inside Buildkite a missing one is an error, outside it git answers."""
    source = os.environ if env is None else env
    if value := given or source.get(name, ""):
        return value
    if in_buildkite(source):
        raise UserError(message)
    found = _git(repo, *git_args)
    if found is None:
        raise UserError(f"{message}, and {unnamed} in {repo}")
    return found


def resolve_commit(
    repo: Path,
    given: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    message: str = "BUILDKITE_COMMIT is not set",
) -> str:
    return _from_buildkite_or_git(
        repo, "BUILDKITE_COMMIT", given, env, "rev-parse", "HEAD",
        message=message, unnamed="`git rev-parse HEAD` failed",
    )  # fmt: skip


def resolve_branch(
    repo: Path, given: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    return _from_buildkite_or_git(
        repo, "BUILDKITE_BRANCH", given, env, "rev-parse", "--abbrev-ref", "HEAD",
        message="BUILDKITE_BRANCH is not set", unnamed="git cannot name the branch",
    )  # fmt: skip


@dataclass(frozen=True)
class Build:
    """The build a task acts for: `kind` "pr", "main" (a push to main) or "branch" (no range,
    normal CI); `local` is the `local build: …` line when the rule defaulted something."""

    kind: BuildKind
    commit: str
    branch: str
    base_branch: str = MAIN
    pull_request: str = ""
    local: str = ""


_ANNOUNCED: set[tuple[str, str]] = set()


def resolve_build(repo: Path, source: Mapping[str, str], *, need_commit: bool = True) -> Build:
    """The one rule for the build a task acts for (module docstring); says `local build: …`.
    `need_commit=False` (plan diffs `--head`) skips the BUILDKITE_COMMIT check."""
    inside = in_buildkite(source)
    pull_request = source.get("BUILDKITE_PULL_REQUEST", "")
    is_pr = pull_request not in ("", "false")  # a PR number; `false` on other builds
    branch = source.get("BUILDKITE_BRANCH", "")
    base_branch = source.get("BUILDKITE_PULL_REQUEST_BASE_BRANCH", "") or MAIN
    commit = source.get("BUILDKITE_COMMIT", "")
    if not commit:
        if inside and need_commit:
            raise UserError(
                "BUILDKITE_COMMIT is not set (BUILDKITE=true: a Buildkite build must name its"
                " commit)"
            )
        commit = "HEAD"
    if inside or is_pr or branch:
        kind: BuildKind = "pr" if is_pr else "main" if branch == MAIN else "branch"
        return Build(kind, commit, branch, base_branch, pull_request)
    # Outside Buildkite, BUILDKITE_BRANCH unset: the checkout's branch; and with
    # BUILDKITE_PULL_REQUEST unset too, a PR against the base unless that branch is main.
    branch = _git(repo, "rev-parse", "--abbrev-ref", "HEAD") or "HEAD"  # detached, or no commit
    if branch == MAIN:
        kind, what = "main", f"push to {MAIN}"
    elif not pull_request:
        shown = "a detached HEAD" if branch == "HEAD" else branch
        kind, what = "pr", f"PR from {shown} against {base_branch}"
    else:
        kind, what = "branch", f"push to {branch} (not PR/main: no diff, normal CI)"
    line = f"local build: {what} ({CHOOSE_HINT})"
    if (str(repo), line) not in _ANNOUNCED:  # said once per process and repo
        _ANNOUNCED.add((str(repo), line))
        door.note(line)
    return Build(kind, commit, branch, base_branch, pull_request, line)
