"""`cov-split`: one model's E2E tests, once per entry mode, each with its own coverage report.

Replaces `run_cov_split.sh`; per-mode reports keep offline and online attribution
apart. Only the weekly sweep measures coverage; other runs are the plain combined
pytest with its exact status. The two shapes' exit rules differ (`execute`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ci import door, topology
from ci.errors import Stop, UserError
from ci.runner import run_reporting

SCRIPT = "run_cov_split.sh"
MODES = ("offline", "online")
# A model id names report files in the working directory (and their `rm -f`), so
# it is a name: no `/`, no shell or glob characters, not `.` or `..`.
MODEL_ID = re.compile(r"[A-Za-z0-9._-]+")
MODEL_ID_FORM = "letters, digits, '.', '_' and '-' only, not '.' or '..'"


@dataclass(frozen=True)
class Request:
    model_id: str
    offline: tuple[str, ...] = ()
    online: tuple[str, ...] = ()
    pytest_args: tuple[str, ...] = ()

    def paths(self, mode: str) -> tuple[str, ...]:
        return self.offline if mode == "offline" else self.online


def coverage_gate(env: Mapping[str, str]) -> bool:
    """Only the weekly sweep on main measures coverage (the bootstrap's --e2e gate)."""
    return env.get(topology.WEEKLY_ENV, "") == "1" and env.get("BUILDKITE_BRANCH", "") == "main"


@dataclass(frozen=True)
class CovPlan:
    """What the task will run: without coverage, one combined pytest; with it, the
    removal of stale reports, a pytest and a gzip per mode given paths, and the upload."""

    request: Request
    commands: tuple[door.Command, ...]
    coverage: bool

    def plan(self) -> door.Plan:
        exit_rule = ("exit", "1 if any half, gzip or the upload fails, else 0")
        facts = (
            (("coverage", "on (WEEKLY=1 on main)"), exit_rule)
            if self.coverage
            else (("coverage", "off (needs WEEKLY=1 and BUILDKITE_BRANCH=main)"),)
        )
        return door.Plan(self.commands, facts, f"cov-split {self.request.model_id}")


def make_plan(request: Request, env: Mapping[str, str]) -> CovPlan:
    """Pure: the commands of the script for this request and environment."""
    model, args = request.model_id, request.pytest_args
    if not coverage_gate(env):
        paths = (*request.offline, *request.online)
        combined = door.Command(
            ("pytest", "-s", "-v", *paths, *args), description=f"pytest (no coverage): {model}"
        )
        return CovPlan(request, (combined,), coverage=False)

    # Step id, not job id: a retry overwrites its report instead of adding one.
    suffix = env.get("BUILDKITE_STEP_ID", "") or "local"
    reports = [f"coverage-{model}-{mode}-{suffix}.xml" for mode in MODES]
    # Both modes, not only those that run: the upload glob matches both, and a
    # stale report would be published as if its mode had run this time.
    commands = [
        door.Command(
            ("rm", "-f", *reports, *(f"{r}.gz" for r in reports)),
            description=f"remove stale coverage reports of {model}",
        )
    ]
    for mode, report in zip(MODES, reports, strict=True):
        if paths := request.paths(mode):
            cov = ("--cov=vllm_omni", f"--cov-report=xml:{report}")
            commands += (
                door.Command(
                    ("pytest", "-s", "-v", *paths, *args, *cov),
                    description=f"coverage: {model} {mode}",
                ),
                door.Command(("gzip", "-9", "-f", report), description=f"compress {report}"),
            )
    upload = door.Command(
        ("buildkite-agent", "artifact", "upload", f"coverage-{model}-*-{suffix}.xml.gz"),
        description=f"upload coverage reports of {model}",
    )
    return CovPlan(request, (*commands, upload), coverage=True)


def execute(plan: CovPlan) -> int:
    """Run the plan under the script's exit rules: without coverage, pytest's exact status;
    with it, every half and the upload run whatever failed before, and any failure is 1."""
    if not plan.coverage:
        return run_reporting(plan.commands[0]).code
    clean, *halves, upload = plan.commands
    run_reporting(clean)
    status = 0
    modes = [mode for mode in MODES if plan.request.paths(mode)]
    for mode, pytest, gzip in zip(modes, halves[::2], halves[1::2], strict=True):
        tested = run_reporting(pytest)
        # The script gzips even after a failing run (pytest-cov still writes the report).
        packed = run_reporting(gzip)
        if not tested.ok or not packed.ok:
            codes = f"pytest exit {tested.code}, gzip exit {packed.code}"
            door.note(f"cov-split: {mode} half failed ({codes})")
            status = 1
    if not run_reporting(upload).ok:
        door.note("cov-split: artifact upload failed")
        status = 1
    return status


def run(request: Request, env: Mapping[str, str], *, dry_run: bool = False) -> None:
    """The script's two checks, in its order and words (exit 2), and the id's form (it names
    files written and removed in the working directory: `../../x;y` would reach out); then
    its plan: printed (`dry_run`) or run; exit with its code."""
    model_id = request.model_id
    if not model_id:
        raise UserError(f"{SCRIPT}: missing --model-id")
    if not MODEL_ID.fullmatch(model_id) or model_id in (".", ".."):
        raise UserError(f"--model-id: {model_id!r} is not a model name: use {MODEL_ID_FORM}")
    if not request.offline and not request.online:
        raise UserError(f"{SCRIPT}: need at least one of --offline / --online")
    plan = make_plan(request, env)
    if dry_run:
        door.execute(plan.plan(), dry_run=True)
        return
    if code := execute(plan):
        raise Stop(code)
