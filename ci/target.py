"""The repository a task works on (`--repo`), and the build it acts for.

`resolve_build` is the one rule for "what kind of build is this?": explicit env
values win (`BUILDKITE_PULL_REQUEST`, `BUILDKITE_BRANCH`, `..._BASE_BRANCH`,
`BUILDKITE_COMMIT`); inside Buildkite a missing commit is an input error (exit 2),
since a guess would test the wrong revision; outside it, a checkout on a branch
other than `main` is a PR against `main`, one on `main` a push to it, with the
commit `HEAD`, said once on stderr (`local build: …`).

Every value it reads is checked first (`build_env_problems`): a PR number is
digits or `false`, branches and the commit follow `ci.refnames`, so none can
reach git as an option. Every git call is bounded in time (`git_timeout`).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from ci import door
from ci.errors import Failure, ProgramMissing, Stop, UserError
from ci.refnames import branch_error, revision_error

MAIN: Final = "main"
CHOOSE_HINT: Final = "outside Buildkite; set BUILDKITE_PULL_REQUEST/BUILDKITE_BRANCH to choose"
NOT_A_PR: Final = "false"  # BUILDKITE_PULL_REQUEST of a build that is no PR
# A local git call that takes longer is stuck (a hung credential helper, a dead NFS
# mount): it ends with `error: git … timed out after Ns`, exit 124. The knob is for
# slow file systems, and lets tests use a short limit.
GIT_TIMEOUT: Final = 120.0
GIT_TIMEOUT_ENV: Final = "VLLM_OMNI_CI_GIT_TIMEOUT"
TIMED_OUT: Final = 124  # the exit-code table's row for a command ended at its time limit

BuildKind = Literal["pr", "main", "branch"]


def in_buildkite(env: Mapping[str, str] | None = None) -> bool:
    return (os.environ if env is None else env).get("BUILDKITE") == "true"


def live_terminal() -> bool:
    """Progress may be a live display: stderr is a terminal, and neither Buildkite nor
    another CI runs us (their logs want plain lines)."""
    return sys.stderr.isatty() and not in_buildkite() and os.environ.get("CI") != "true"


def git_timeout(env: Mapping[str, str] | None = None) -> float:
    """$VLLM_OMNI_CI_GIT_TIMEOUT (seconds, a positive number), else `GIT_TIMEOUT`."""
    text = (os.environ if env is None else env).get(GIT_TIMEOUT_ENV, "").strip()
    if not text:
        return GIT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 86400:  # NaN fails this too
        raise UserError(
            f"{GIT_TIMEOUT_ENV}: {text!r} is not a number of seconds: allowed values are"
            " 0 < N <= 86400"
        )
    return seconds


def git(cwd: Path | str, *args: str, stdin: str | None = None) -> door.Result:
    """`git ARGS` in `cwd`, captured, within `git_timeout()` (`stdin`: fed to it); no git
    on PATH is `error: git: not found`, exit 127; a timeout `error: git … timed out after
    Ns`, exit 124."""
    limit = git_timeout()
    if stdin is None:
        result = door.capture(["git", *args], cwd=str(cwd), timeout=limit)
    else:
        cmd = door.Command(("git", *args), cwd=str(cwd), stdin=stdin, timeout=limit)
        result = door.run(cmd, "capture", quiet=True, leaves_nothing=True)
    if result.code == 127 and result.stderr == "error: command not found: git":
        raise ProgramMissing("git: not found")  # the exit-code table's "not found"
    if result.timed_out:
        shown = " ".join(("git", *args))
        shown = shown if len(shown) <= 200 else shown[:199] + "…"
        raise Stop(TIMED_OUT, f"error: {shown} timed out after {limit:g}s (in {cwd})")
    return result


def require_git() -> None:
    """Every task that reads a checkout needs git, also where this one call would not."""
    if shutil.which("git") is None:
        raise ProgramMissing("git: not found")


def working_directory() -> str:
    """The current directory, or one `error:` line when it was deleted under us."""
    try:
        return os.getcwd()
    except OSError as exc:
        raise UserError(f"the current directory cannot be read: {exc.strerror or exc}") from None


def resolve_repo(repo: str | os.PathLike[str] | None = None) -> Path:
    """`--repo`, or the git top-level of the current directory; git must be on PATH."""
    require_git()
    if repo:
        # os.path's expanduser leaves an unknown `~user` as written, as a shell does, and
        # its isdir answers False (not OSError) for a name the system refuses as too long.
        try:
            path = Path(os.path.expanduser(os.fspath(repo))).resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UserError(f"--repo: {repo} cannot be resolved: {why}") from None
        if not os.path.isdir(path):
            raise UserError(f"--repo: {repo} is not a directory")
        return path
    found = git(working_directory(), "rev-parse", "--show-toplevel")
    top = Path(found.stdout.strip()) if found.ok else None
    if top is None or not top.is_absolute() or not top.is_dir():
        raise UserError(
            "--repo: not given, and the current directory is not inside a git repository"
        )
    return top


def pull_request_error(value: str) -> str | None:
    """The line for a `BUILDKITE_PULL_REQUEST` that is neither ASCII digits nor `false`
    (None: good; empty is unset). It goes into URLs and messages, so nothing else passes."""
    if value in ("", NOT_A_PR) or (value.isascii() and value.isdigit()):
        return None
    return (
        f"BUILDKITE_PULL_REQUEST: {value!r} is not a PR number: allowed values are digits"
        f" or {NOT_A_PR!r} (empty: unset)"
    )


def build_env_problems(source: Mapping[str, str]) -> list[str]:
    """The one rule for the build's own variables, every task alike: one line per bad
    value (module docstring). A fork PR's `BUILDKITE_BRANCH` is `owner:branch`."""
    found = [
        pull_request_error(source.get("BUILDKITE_PULL_REQUEST", "")),
        branch_error("BUILDKITE_BRANCH", source.get("BUILDKITE_BRANCH", ""), fork_prefix=True),
        branch_error(
            "BUILDKITE_PULL_REQUEST_BASE_BRANCH",
            source.get("BUILDKITE_PULL_REQUEST_BASE_BRANCH", ""),
        ),
        revision_error("BUILDKITE_COMMIT", source.get("BUILDKITE_COMMIT", "")),
    ]
    return [line for line in found if line]


def check_build_env(source: Mapping[str, str] | None = None) -> None:
    """Stop (exit 2, a line per problem) on any bad build variable, before any work."""
    UserError.collect(build_env_problems(os.environ if source is None else source))


def _git(repo: Path, *args: str) -> str | None:
    result = git(repo, *args)
    return result.stdout.strip() or None if result.ok else None


def _from_buildkite_or_git(
    repo: Path, name: str, given: str | None, env: Mapping[str, str] | None, *git_args: str,
    message: str, unnamed: str, sane: Callable[[str], bool],
) -> str:  # fmt: skip
    """`given`, else $name; inside Buildkite a missing one is an error, outside it git
    answers, and an answer that is not `sane` is git's fault (exit 1), never used."""
    source = os.environ if env is None else env
    check_build_env(source)
    if value := given or source.get(name, ""):
        return value
    if in_buildkite(source):
        raise UserError(message)
    found = _git(repo, *git_args)
    if found is None:
        raise UserError(f"{message}, and {unnamed} in {repo}")
    if not sane(found):
        shown = " ".join(("git", *git_args))
        raise Failure(f"{message}, and `{shown}` printed {found[:80]!r} in {repo}")
    return found


def is_object_name(text: str) -> bool:
    """A full SHA-1 or SHA-256 object name, as `git rev-parse` prints one."""
    return len(text) in (40, 64) and all(ch in "0123456789abcdef" for ch in text)


def is_branch_answer(text: str) -> bool:
    """What `git rev-parse --abbrev-ref HEAD` prints: a branch name, or `HEAD` (detached)."""
    return text == "HEAD" or branch_error("git", text) is None


def resolve_commit(
    repo: Path,
    given: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    message: str = "BUILDKITE_COMMIT is not set",
) -> str:
    return _from_buildkite_or_git(
        repo, "BUILDKITE_COMMIT", given, env, "rev-parse", "HEAD",
        message=message, unnamed="`git rev-parse HEAD` failed", sane=is_object_name,
    )  # fmt: skip


def resolve_branch(
    repo: Path, given: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    return _from_buildkite_or_git(
        repo, "BUILDKITE_BRANCH", given, env, "rev-parse", "--abbrev-ref", "HEAD",
        message="BUILDKITE_BRANCH is not set", unnamed="git cannot name the branch",
        sane=is_branch_answer,
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
    check_build_env(source)
    inside = in_buildkite(source)
    pull_request = source.get("BUILDKITE_PULL_REQUEST", "")
    is_pr = pull_request not in ("", NOT_A_PR)  # a PR number; `false` on other builds
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
    if not is_branch_answer(branch):
        raise Failure(
            f"`git rev-parse --abbrev-ref HEAD` printed {branch[:80]!r} in {repo}, not a branch",
        )
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
