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
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final

from ci import topology
from ci.amd.suites import split_labels
from ci.diff import BASE_ENV, default_base
from ci.errors import TaskError, UserError
from ci.pipeline.ifexpr import Context
from ci.pipeline.mirror import parse_mirror_hw
from ci.platforms import Platform, platform_option
from ci.refnames import branch_error, revision_error
from ci.target import MAIN, build_env_problems, git, resolve_build, resolve_repo

FORMATS: Final = ("table", "json", "markdown")


@dataclass(frozen=True)
class PlanInputs:
    repo: Path
    worktree: bool = False
    format: str = "table"
    # From here on, in order, the JSON's `inputs` (`as_dict`).
    base: str | None = None
    head: str | None = None
    branch: str = ""
    labels: tuple[str, ...] = ()
    nightly: bool = False
    weekly: bool = False
    non_critical: bool = False
    mirror_hw: str | None = None
    platforms: tuple[Platform, ...] = tuple(Platform)

    def env(self) -> dict[str, str]:
        """The schedule env of the build (what `build.env(...)` and `--scope auto` read)."""
        on = (self.nightly, self.weekly, self.non_critical)
        flags = dict(zip(topology.SCHEDULE_ENV, on, strict=True))
        env = {name: "1" for name, on in flags.items() if on}
        if self.mirror_hw:
            env["MIRROR_HW"] = self.mirror_hw
        return env

    def context(self) -> Context:
        return Context.of(self.branch, self.labels, self.env())

    def as_dict(self) -> dict[str, object]:
        shown = {f.name: getattr(self, f.name) for f in fields(self)[3:]}
        head = "WORKTREE" if self.worktree else (self.head or "HEAD")
        platforms = [p.value for p in self.platforms]
        return {**shown, "head": head, "labels": list(self.labels), "platforms": platforms}


def parse_inputs(
    environ: Mapping[str, str] | None = None,
    *,
    repo: str = "",
    base: str = "",
    head: str = "",
    worktree: bool = False,
    labels: str = "",
    branch: str = "",
    nightly: bool = False,
    weekly: bool = False,
    non_critical: bool = False,
    mirror_hw: str = "",
    platform: Iterable[str] | None = None,
    format: str = "table",
) -> PlanInputs:
    """Check every option (all problems at once), then find the repo and the branch.
    `environ` only fills defaults (module docstring); None reads none."""
    problems: list[str] = []
    if head and worktree:
        problems.append("--head and --worktree are mutually exclusive")
    shown = format.strip().lower() or "table"
    if shown not in FORMATS:
        problems.append(
            f"--format: unknown format {format!r}: allowed values are {', '.join(FORMATS)}"
        )
    chosen: set[Platform] = set()
    for part in (p for value in platform or () for p in re.split(r"[,\s]+", value) if p):
        try:
            chosen.add(platform_option(part))
        except UserError as exc:
            problems += exc.problems
    selector: str | None = None
    try:
        selector = parse_mirror_hw(mirror_hw)
    except TaskError as exc:
        problems += [f"--mirror-hw: {p}" for p in exc.problems]
    source: Mapping[str, str] = {} if environ is None else environ
    # Revisions and the branch as ci.refnames has them; a fork PR's branch is `owner:name`.
    problems += filter(
        None,
        [
            revision_error("--base", base.strip()),
            revision_error("--head", head.strip()),
            branch_error("--branch", branch.strip(), fork_prefix=True),
            *build_env_problems(source),
        ],
    )
    UserError.collect(problems)
    target = resolve_repo(repo or None)
    branch = branch.strip() or _branch(target, source)
    chosen_base = base.strip() or None
    if chosen_base is None and source.get(BASE_ENV) and (branch != MAIN or worktree):
        chosen_base = default_base(target, source)
    return PlanInputs(
        repo=target,
        base=chosen_base,
        head=head.strip() or None,
        worktree=worktree,
        # Commas or newlines, as the AMD selector reads them (duplicates dropped).
        labels=tuple(
            dict.fromkeys(split_labels(labels or source.get("BUILDKITE_PULL_REQUEST_LABELS", "")))
        ),
        branch=branch,
        nightly=nightly,
        weekly=weekly,
        non_critical=non_critical,
        mirror_hw=selector,
        platforms=tuple(p for p in Platform if p in chosen) or tuple(Platform),
        format=shown,
    )


def _branch(repo: Path, environ: Mapping[str, str]) -> str:
    """The build's branch under the local-build rule, else the checkout's (`HEAD` when
    detached); `--repo` must be a git checkout with a commit."""
    found = git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    if not found.ok or not found.stdout.strip():
        raise UserError(f"--repo: {repo} is not a git checkout with a commit; pass --repo PATH")
    return resolve_build(repo, environ, need_commit=False).branch or found.stdout.strip()
