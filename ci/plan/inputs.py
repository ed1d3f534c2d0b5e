"""`plan`'s inputs, checked before any work: one `error:` line per problem, exit 2.

The build's environment (`environ`, which tests may leave out) only fills
defaults, as every other task reads it:

* `--branch`: under the local-build rule (`ci.target.resolve_build`),
  `BUILDKITE_BRANCH`, else the checkout's branch;
* `--labels`: `BUILDKITE_PULL_REQUEST_LABELS` (comma-separated);
* a PR's `--base`: `origin/$BUILDKITE_PULL_REQUEST_BASE_BRANCH` (else that
  local branch), as the PR build's diff would use.

Schedule flags (`NIGHTLY`, ...) are never read from the environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypedDict

from ci.amd.suites import split_labels as split
from ci.diff import default_base
from ci.errors import BAD_INPUT, UserError
from ci.pipeline.ifexpr import Context
from ci.pipeline.mirror import parse_mirror_hw
from ci.platforms import Platform, parse_platform
from ci.target import git, resolve_build, resolve_repo

if TYPE_CHECKING:
    from typing_extensions import Unpack

FORMATS: Final = ("table", "json", "markdown")
ORDER: Final = (Platform.ROCM, Platform.CUDA, Platform.NPU, Platform.XPU)
MAIN: Final = "main"
LABELS_ENV: Final = "BUILDKITE_PULL_REQUEST_LABELS"
BASE_ENV: Final = "BUILDKITE_PULL_REQUEST_BASE_BRANCH"


@dataclass(frozen=True)
class PlanInputs:
    repo: Path
    base: str | None = None
    head: str | None = None
    worktree: bool = False
    labels: tuple[str, ...] = ()
    branch: str = ""
    nightly: bool = False
    weekly: bool = False
    non_critical: bool = False
    mirror_hw: str | None = None
    platforms: tuple[Platform, ...] = ORDER
    format: str = "table"

    def env(self) -> dict[str, str]:
        """The schedule env of the build (what `build.env(...)` and `--scope auto` read)."""
        flags = (("NIGHTLY", self.nightly), ("WEEKLY", self.weekly))
        env = {name: "1" for name, on in (*flags, ("NON_CRITICAL", self.non_critical)) if on}
        if self.mirror_hw:
            env["MIRROR_HW"] = self.mirror_hw
        return env

    def context(self) -> Context:
        return Context.of(self.branch, self.labels, self.env())

    def as_dict(self) -> dict[str, object]:
        return {
            "base": self.base,
            "head": "WORKTREE" if self.worktree else (self.head or "HEAD"),
            "branch": self.branch,
            "labels": list(self.labels),
            "nightly": self.nightly,
            "weekly": self.weekly,
            "non_critical": self.non_critical,
            "mirror_hw": self.mirror_hw,
            "platforms": [p.value for p in self.platforms],
        }


def split_labels(labels: str) -> tuple[str, ...]:
    """Commas or newlines, as the AMD selector reads them (duplicates dropped)."""
    return tuple(dict.fromkeys(split(labels)))


def parse_platforms(values: Iterable[str]) -> tuple[tuple[Platform, ...], list[str]]:
    chosen: set[Platform] = set()
    problems: list[str] = []
    for part in (p for value in values for p in re.split(r"[,\s]+", value) if p):
        try:
            chosen.add(parse_platform(part))
        except UserError as exc:
            problems += [f"--platform: {p}" for p in exc.problems]
    return (tuple(p for p in ORDER if p in chosen) or ORDER), problems


class PlanOptions(TypedDict, total=False):
    """The `plan` task's options, as Invoke passes them (all optional)."""

    repo: str
    base: str
    head: str
    worktree: bool
    labels: str
    branch: str
    nightly: bool
    weekly: bool
    non_critical: bool
    mirror_hw: str
    platform: Iterable[str] | None
    format: str


def parse_inputs(
    environ: Mapping[str, str] | None = None, **options: Unpack[PlanOptions]
) -> PlanInputs:
    """Check every option (all problems at once), then find the repo and the branch.
    `environ` only fills defaults (module docstring); None reads none."""
    head = options.get("head", "")
    worktree = options.get("worktree", False)
    format = options.get("format", "table")
    problems: list[str] = []
    if head and worktree:
        problems.append("--head and --worktree are mutually exclusive")
    shown = format.strip().lower() or "table"
    if shown not in FORMATS:
        problems.append(
            f"--format: unknown format {format!r}: allowed values are table, json, markdown"
        )
    chosen, bad = parse_platforms(options.get("platform") or ())
    problems += bad
    selector: str | None = None
    try:
        selector = parse_mirror_hw(options.get("mirror_hw", ""))
    except UserError as exc:
        problems += [f"--mirror-hw: {p}" for p in exc.problems]
    UserError.collect(problems, code=BAD_INPUT)
    source: Mapping[str, str] = {} if environ is None else environ
    target = resolve_repo(options.get("repo") or None)
    labels = options.get("labels", "") or source.get(LABELS_ENV, "")
    branch = options.get("branch", "").strip() or _branch(target, source)
    base = options.get("base", "").strip() or None
    if base is None and source.get(BASE_ENV) and (branch != MAIN or worktree):
        base = default_base(target, {BASE_ENV: source[BASE_ENV]})
    return PlanInputs(
        repo=target,
        base=base,
        head=head.strip() or None,
        worktree=worktree,
        labels=split_labels(labels),
        branch=branch,
        nightly=options.get("nightly", False),
        weekly=options.get("weekly", False),
        non_critical=options.get("non_critical", False),
        mirror_hw=selector,
        platforms=chosen,
        format=shown,
    )


def _branch(repo: Path, environ: Mapping[str, str]) -> str:
    """The build's branch under the local-build rule, else the checkout's (`HEAD` when
    detached); `--repo` must be a git checkout with a commit."""
    found = git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    if not found.ok or not found.stdout.strip():
        raise UserError(f"--repo: {repo} is not a git checkout with a commit; pass --repo PATH")
    return resolve_build(repo, environ, need_commit=False).branch or found.stdout.strip()
