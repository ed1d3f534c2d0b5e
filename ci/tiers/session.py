"""`nox -s ready|merge|nightly|weekly -- [options]` and `vllm-omni-ci tier NAME -- [options]`.

Argument parsing and the one entry point both share (CI pods have no nox).

The session: parse the options; pick the platforms (given, or every platform
whose tier source exists and whose CI image is present locally); read the
steps from the target repo; with `--list` print them and stop; otherwise check
every input (images present, devices) before starting anything, run the jobs,
and report (table, JUnit, Buildkite annotation). Exit status: 0, or 1 when a
blocking step failed; input errors exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ci.errors import Stop, UserError
from ci.platforms import ALLOWED, Platform, parse_platform
from ci.tiers.model import (
    Tier,
    TierStep,
    has_tier,
    load_tier,
    missing,
    parse_tier,
    source_of,
    tier_keys,
)
from ci.tiers.plan import Host, Job, Options, plan_tier
from ci.tiers.rules import RULE

if TYPE_CHECKING:
    from ci.tiers.execute import JobResult

RESULTS = Path("build") / "tiers"


@dataclass(frozen=True)
class Args:
    platform: Platform | None
    repo: str
    image: str
    native: bool
    force: bool
    list: bool
    step: str
    keep_going: bool
    results: str
    labels: tuple[str, ...]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"{message} (see `{self.prog} --help`)")


def parser(tier: Tier, prog: str = "") -> argparse.ArgumentParser:
    """The tier options; `prog` names the entry point in `--help` (default: the nox session)."""
    made = _Parser(
        prog=prog or f"nox -s {tier} --",
        description=f"Run the {tier} tier of a target repo here, as Buildkite would. {RULE} "
        "The hardware is the step's agent_pool (rocm) or the preset the upload resolves "
        "(cuda, npu). Group and step `if`s are evaluated as for a PR carrying the tier's "
        "label, with build.env() reading this environment (e.g. WEEKLY=1); a false one "
        "skips the step. A step whose depends_on names a step of the tier that did not "
        "pass is not run.",
        add_help=True,
    )
    made.add_argument(
        "--platform",
        help=f"one of {ALLOWED}; default: every platform whose "
        "tier exists and whose CI image is present locally",
    )
    made.add_argument(
        "--repo",
        metavar="PATH",
        help="the target checkout (default: the sample under nox, else the git checkout here)",
    )
    made.add_argument("--image", metavar="IMG", help="run every step in this image")
    made.add_argument("--native", action="store_true", help="run here, not in containers")
    made.add_argument(
        "--force",
        action="store_true",
        help="also run steps that need hardware (with the no-GPU pre-flight when its "
        "devices are absent); a false `if` still skips",
    )
    made.add_argument("--list", action="store_true", help="print the steps; run nothing")
    made.add_argument(
        "--step", default="", metavar="TEXT", help="only steps whose label contains TEXT"
    )
    made.add_argument("--keep-going", action="store_true", help="go on after a blocking failure")
    made.add_argument("--results", metavar="DIR", help=f"logs and JUnit (default {RESULTS}/<tier>)")
    made.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra container label (repeatable)",
    )
    return made


def parse_args(tier: Tier, argv: Sequence[str], prog: str = "") -> Args:
    ns = parser(tier, prog).parse_args(list(argv))
    problems: list[str] = []
    for name in ("platform", "repo", "image", "results"):
        value = getattr(ns, name)
        if value is not None and not value.strip():  # an unset variable, not the default
            problems.append(f"--{name}: an empty value; give one, or leave --{name} out")
        setattr(ns, name, value if value and value.strip() else "")
    platform = None
    if ns.platform:
        try:
            platform = parse_platform(ns.platform)
        except UserError as exc:
            problems.extend(f"--platform: {p}" for p in exc.problems)
    if ns.native and ns.image:
        problems.append("--image: applies to container mode; drop it or --native")
    for label in ns.label:
        if "=" not in label or not label.split("=", 1)[0]:
            problems.append(f"--label: {label!r} is not KEY=VALUE")
    UserError.collect(problems)
    return Args(
        platform,
        ns.repo,
        ns.image,
        ns.native,
        ns.force,
        ns.list,
        ns.step,
        ns.keep_going,
        ns.results,
        tuple(ns.label),
    )


# --------------------------------------------------------------------------- host


def image_ref(platform: Platform, commit: str, environ: Mapping[str, str], preset: str = "") -> str:
    """The tag `build-image --platform <platform>` gives the repo's commit."""
    if platform is Platform.ROCM:
        from ci.images import rocm

        return f"{environ.get(rocm.REGISTRY_ENV) or rocm.DEFAULT_REGISTRY}:{commit}"
    if platform is Platform.CUDA:
        from ci.images import cuda

        return f"{cuda.DEFAULT_REGISTRY}:{commit}"
    if platform is Platform.XPU:
        from ci.images import xpu

        return f"{xpu.IMAGE_REPO}:{commit}"
    from ci.images import npu, variants

    row = next((v for v in variants.VARIANTS if preset in v.presets), None)
    row = row or variants.variant(variants.DEFAULT_VARIANT)
    registry = environ.get("IMAGE_REGISTRY") or npu.DEFAULT_IMAGE_REGISTRY
    name = environ.get("IMAGE_NAME") or npu.DEFAULT_IMAGE_NAME
    return f"{registry}/{name}:{row.image_tag(commit)}"


def devices(platform: Platform, dev: Path = Path("/dev")) -> tuple[str, ...]:
    """docker run arguments for the platform's devices that exist on this host (under `dev`)."""
    args: list[str] = []
    if platform is Platform.ROCM:
        for path in (dev / "kfd", dev / "dri"):
            if path.exists():
                args += ["--device", str(path)]
        if args:
            args += ["--group-add", "video"]
    elif platform is Platform.CUDA:
        if (dev / "nvidiactl").exists() or any(dev.glob("nvidia[0-9]*")):
            args += ["--gpus", "all"]
    elif platform is Platform.NPU:
        for path in sorted(dev.glob("davinci*")):
            args += ["--device", str(path)]
    elif (dev / "dri").exists():
        args += ["--device", str(dev / "dri")]
    return tuple(args)


def image_present(docker: str, ref: str) -> bool:
    from ci import door

    result = door.capture([docker, "image", "inspect", "--format", "{{.Id}}", ref])
    if result.code == 127:
        raise UserError(f"{docker} not found: container mode needs a docker client (or --native)")
    return result.ok


def build_hint(platform: Platform, repo: Path) -> str:
    return f"build it with: vllm-omni-ci build-image --platform {platform} --repo {repo} " + (
        "--builder engine --no-push" if platform in (Platform.ROCM, Platform.CUDA) else "--no-push"
    )


# --------------------------------------------------------------------------- listing


def listing(steps: Sequence[TierStep], step_filter: str) -> str:
    from ci.tiers.plan import select

    lines: list[str] = []
    keys = tier_keys(steps)
    for position, step in select(steps, step_filter):
        runs = step.skip_reason or ("runs here (CPU)" if step.runs_on_cpu else step.need)
        lines.append(f"{position:>3}. [{step.platform}] {step.label}")
        if step.group:
            lines.append(f"     group: {step.group}")
        lines.append(f"     hardware: {step.hardware or step.platform.value} — {runs}")
        lines.append(f"     grade: {step.grade_text}")
        for condition in step.conditions:
            lines.append(f"     if: {condition}")
        inside = [d for d in step.depends_on if d.key in keys]
        if inside:
            shown = ", ".join(
                d.key + (" (failure allowed)" if d.allow_failure else "") for d in inside
            )
            lines.append(f"     depends on: {shown}")
        extra = []
        if step.parallelism > 1:
            extra.append(f"parallelism {step.parallelism}")
        if step.timeout_minutes:
            extra.append(f"timeout {step.timeout_minutes}m")
        if extra:
            lines.append(f"     {', '.join(extra)}")
        if step.prologue:
            lines.append("     prepended by the upload:")
            lines.extend(f"       $ {line}" for line in step.prologue)
        lines.append("     commands:")
        for command in step.commands:
            first, *rest = command.splitlines() or [""]
            lines.append(f"       $ {first}")
            lines.extend(f"         {line}" for line in rest)
    return "\n".join(lines) + "\n" if lines else ""


# --------------------------------------------------------------------------- run


def _platforms(
    args: Args, tier: Tier, repo: Path, docker: str, environ: Mapping[str, str]
) -> list[Platform]:
    if args.platform is not None:
        if not has_tier(repo, tier, args.platform):
            raise missing(tier, args.platform)
        return [args.platform]
    found = [p for p in Platform if has_tier(repo, tier, p)]
    if not found:
        raise UserError(f"no {tier} tier for any platform in {repo}")
    if args.list or args.native or args.image:
        if args.native and len(found) > 1:
            raise UserError("--native: give --platform (" + ", ".join(p.value for p in found) + ")")
        return found
    from ci.target import resolve_commit

    commit = resolve_commit(repo)
    present = [p for p in found if image_present(docker, image_ref(p, commit, environ))]
    if not present:
        raise Stop(
            2,
            f"error: no CI image for the {tier} tier is present locally "
            f"({', '.join(image_ref(p, commit, environ) for p in found)}); "
            "build one, or give --platform with --image, or --native:",
            *(f"  {p}: {build_hint(p, repo).removeprefix('build it with: ')}" for p in found),
        )
    return present


def _live() -> bool:
    from ci.target import in_buildkite

    return sys.stderr.isatty() and not in_buildkite() and os.environ.get("CI") != "true"


def _check_images(jobs: Sequence[Job], docker: str, repo: Path) -> None:
    problems: list[str] = []
    seen: set[str] = set()
    for job in jobs:
        if not job.runs or not job.image or job.image in seen:
            continue
        seen.add(job.image)
        if not image_present(docker, job.image):
            problems.append(
                f"image {job.image} ({job.step.platform}) is not present locally; "
                + build_hint(job.step.platform, repo)
                + " (the tag is the repo's commit: BUILDKITE_COMMIT, else git HEAD; "
                "or give --image, or --native)"
            )
    UserError.collect(problems)


def _annotate(markdown: str, style: str, tier: Tier) -> None:
    from ci import door

    result = door.run(
        door.Command(
            ("buildkite-agent", "annotate", "--style", style, "--context", f"vllm-omni-ci-{tier}"),
            description="annotate the build",
            stdin=markdown,
        )
    )
    if not result.ok:
        door.note(f"warning: buildkite-agent annotate failed (exit {result.code})")


def run(tier_name: str, argv: Sequence[str], *, default_repo: str = "", prog: str = "") -> int:
    """The whole session; returns the exit status (UserError / Stop propagate)."""
    from ci import door
    from ci.target import in_buildkite, resolve_commit, resolve_repo
    from ci.tiers import execute, report

    tier = parse_tier(tier_name)
    args = parse_args(tier, argv, prog)
    repo = resolve_repo(args.repo or default_repo or None)
    docker = os.environ.get("VLLM_OMNI_CI_DOCKER") or "docker"
    if not (args.native or args.list):
        from ci.doctor import named_docker

        docker = named_docker() or docker  # a bad $VLLM_OMNI_CI_DOCKER is named, not "no image"
    environ = dict(os.environ)
    platforms = _platforms(args, tier, repo, docker, environ)
    steps: list[TierStep] = []
    for platform in platforms:
        steps.extend(load_tier(repo, tier, platform))
    if args.list:
        for platform in platforms:
            sys.stdout.write(f"# {tier} tier for {platform}: {source_of(repo, tier, platform)}\n")
        sys.stdout.write(listing(steps, args.step))
        sys.stdout.flush()
        return 0

    live = _live()
    commit = resolve_commit(repo)
    results_dir = Path(args.results or RESULTS / tier.value).resolve()
    npu_images = {
        s.hardware: image_ref(Platform.NPU, commit, environ, s.hardware)
        for s in steps
        if s.platform is Platform.NPU
    }
    host = Host(
        repo=repo,
        commit=commit,
        results=results_dir,
        images={p: image_ref(p, commit, environ) for p in platforms},
        npu_images=npu_images,
        devices={p: devices(p) for p in platforms},
        environ=environ,
        docker=docker,
        run_id=f"{os.getpid()}-{int(time.time()) % 100000}",
    )
    options = Options(
        native=args.native,
        force=args.force,
        step=args.step,
        image=args.image,
        labels=args.labels,
        stream=not live,
    )
    jobs = plan_tier(steps, host, options)
    if not jobs:
        raise UserError(f"--step: no {tier} step label contains {args.step!r}")
    if not args.native:
        _check_images(jobs, docker, repo)

    title = f"{tier} tier ({', '.join(p.value for p in platforms)}) — {repo}"
    door.note(f"{title}: {sum(j.runs for j in jobs)} of {len(jobs)} jobs run here; {RULE}")
    if live:
        results = _run_live(jobs, docker, args.keep_going, title)
    else:
        results = execute.run_jobs(jobs, docker=docker, stream=True, keep_going=args.keep_going)
        with door.buildkite_group(f"{tier} tier summary"):
            for line in report.plain_lines(results):
                door.note(line)
    path = report.write_junit(results, f"{tier} tier", results_dir / f"junit-{tier}.xml")
    door.note(f"{report.verdict(results)}; JUnit: {path}")
    if in_buildkite():
        _annotate(report.markdown(results, title), report.annotation_style(results), tier)
    return 1 if execute.blocking_failures(results) else 0


def _run_live(jobs: Sequence[Job], docker: str, keep_going: bool, title: str) -> list[JobResult]:
    from rich.console import Console
    from rich.live import Live

    from ci.tiers import execute, report

    console = Console(stderr=True)
    pending = [
        execute.JobResult(j, execute.Outcome.PENDING)
        if j.runs
        else execute.JobResult(j, execute.Outcome.SKIPPED, note=j.reason)
        for j in jobs
    ]
    with Live(report.table(pending, title), console=console, refresh_per_second=4) as live:

        def progress(results: Sequence[execute.JobResult]) -> None:
            live.update(report.table(results, title))

        return execute.run_jobs(
            jobs, docker=docker, stream=False, keep_going=keep_going, progress=progress
        )


def nox_session(tier: str, posargs: Sequence[str], *, default_repo: str = "") -> None:
    """What each nox tier session calls: errors become `error:` lines; exit with the status."""
    import logging

    from ci.taskkit import report

    # nox logs at INFO on the root logger; plumbum would echo every argv there.
    logging.getLogger("plumbum").setLevel(logging.WARNING)
    try:
        code = run(tier, posargs, default_repo=default_repo)
    except (UserError, Stop) as exc:
        code = report(exc)
    if code:
        raise SystemExit(code)
