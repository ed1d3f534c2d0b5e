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


def _from_buildkite_or_git(
    repo: Path,
    name: str,
    given: str | None,
    env: Mapping[str, str] | None,
    git_args: tuple[str, ...],
    *,
    message: str,
    unnamed: str,
    code: int = USAGE,
) -> str:
    """`given`, else $name; inside Buildkite a missing one is an error, outside it git answers."""
    source = os.environ if env is None else env
    value = given or source.get(name, "")
    if value:
        return value
    if in_buildkite(source):
        raise UserError(message, code=code)
    found = _git(repo, *git_args)
    if found is None:
        raise UserError(f"{message}, and {unnamed} in {repo}", code=code)
    return found


def resolve_commit(
    repo: Path,
    given: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    code: int = USAGE,
    message: str = "BUILDKITE_COMMIT is not set",
) -> str:
    return _from_buildkite_or_git(
        repo,
        "BUILDKITE_COMMIT",
        given,
        env,
        ("rev-parse", "HEAD"),
        message=message,
        unnamed="`git rev-parse HEAD` failed",
        code=code,
    )


def resolve_branch(
    repo: Path, given: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    return _from_buildkite_or_git(
        repo,
        "BUILDKITE_BRANCH",
        given,
        env,
        ("rev-parse", "--abbrev-ref", "HEAD"),
        message="BUILDKITE_BRANCH is not set",
        unnamed="git cannot name the branch",
    )
