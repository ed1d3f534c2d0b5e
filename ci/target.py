"""The repository a task works on (`--repo`) and its commit and branch.

Outside Buildkite, a missing BUILDKITE_COMMIT / BUILDKITE_BRANCH falls back to
git, so tasks work on a laptop; inside Buildkite (BUILDKITE=true) a missing one
is an error, because guessing there would build or test the wrong revision.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ci import door
from ci.errors import USAGE, UserError


def in_buildkite(env: Mapping[str, str] | None = None) -> bool:
    return (os.environ if env is None else env).get("BUILDKITE") == "true"


def resolve_repo(repo: str | os.PathLike[str] | None = None) -> Path:
    """`--repo`, or the git top-level of the current directory."""
    if repo:
        path = Path(repo).expanduser().resolve()
        if not path.is_dir():
            raise UserError(f"--repo: {repo} is not a directory")
        return path
    found = door.capture(["git", "rev-parse", "--show-toplevel"], cwd=os.getcwd())
    if not found.ok:
        raise UserError(
            "--repo: not given, and the current directory is not inside a git repository"
        )
    return Path(found.stdout.strip())


def _git(repo: Path, *args: str) -> str | None:
    result = door.capture(["git", *args], cwd=str(repo))
    return result.stdout.strip() if result.ok and result.stdout.strip() else None


def resolve_commit(
    repo: Path,
    given: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    code: int = USAGE,
    message: str = "BUILDKITE_COMMIT is not set",
) -> str:
    source = os.environ if env is None else env
    value = given or source.get("BUILDKITE_COMMIT", "")
    if value:
        return value
    if in_buildkite(source):
        raise UserError(message, code=code)
    head = _git(repo, "rev-parse", "HEAD")
    if head is None:
        raise UserError(f"{message}, and `git rev-parse HEAD` failed in {repo}", code=code)
    return head


def resolve_branch(
    repo: Path, given: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    source = os.environ if env is None else env
    value = given or source.get("BUILDKITE_BRANCH", "")
    if value:
        return value
    if in_buildkite(source):
        raise UserError("BUILDKITE_BRANCH is not set")
    branch = _git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    if branch is None:
        raise UserError(f"BUILDKITE_BRANCH is not set, and git cannot name the branch in {repo}")
    return branch
