"""`vllm-omni-ci tier NAME [options]`, also behind `nox -s ready|merge|nightly|weekly -- [options]`.

The platforms: the given one, else every one with a tier source and a local CI
image. `--list` prints the steps; else every input is checked before anything is
written, then the jobs run and are reported (table, JUnit, annotation). Exit 1
when a blocking step failed or the engine is unreachable, 2 for input errors
(an unwritable results folder too); a log or JUnit not written is a warning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ci import door
from ci.devices import narrowed, probe
from ci.doctor import named_docker
from ci.errors import Failure, Stop, Unavailable, UserError, close_match
from ci.images.cachekey import missing_inputs
from ci.images.refs import ci_image
from ci.platforms import Platform, parse_platform
from ci.redact import Redactor
from ci.target import in_buildkite, live_terminal, resolve_commit, resolve_repo
from ci.tiers import report
from ci.tiers.execute import JobOutcome
from ci.tiers.model import Tier, TierStep, load_tier, source_of
from ci.tiers.plan import Options, placement, plan_tier, select, where
from ci.tiers.rules import RULE
from ci.tiers.terminal import wrap

RESULTS = Path("build") / "tiers"


def parse_args(**given: Any) -> Options:
    """The options checked together: every problem is one `error:` line."""
    args = Options(**given)
    problems: list[str] = []
    try:
        if args.platform:
            parse_platform(args.platform)
    except UserError as exc:
        problems.extend(f"--platform: {p}" for p in exc.problems)
    if args.native and args.image:
        problems.append("--image: applies to container mode; drop it or --native")
    if args.cpu_only and args.exact_sku:
        problems.append("--exact-sku: --cpu-only matches no step to devices; drop one")
    if args.jobs < 0:
        problems.append(f"--jobs: {args.jobs} is not a number of jobs (0 or more; 0: one per CPU)")
    for pair in args.label:
        if "=" not in pair or not pair.split("=", 1)[0]:
            problems.append(f"--label: {pair!r} is not KEY=VALUE")
    UserError.collect(problems)
    return args


# --------------------------------------------------------------------------- host


def image_present(docker: str, ref: str) -> bool:
    """Whether the engine has `ref`; an engine that does not answer is an error, not "absent"."""
    argv = (docker, "image", "inspect", "--format", "{{.Id}}", ref)
    result = door.run(door.Command(argv, timeout=60), output="capture", quiet=True)
    if result.code == 127:
        raise UserError(f"{docker} not found: container mode needs a docker client (or --native)")
    if result.ok:
        return True
    # `image inspect` fails alike for a missing image and an engine that is down; `version`
    # only for the latter (exit 1).
    version = (docker, "version", "--format", "{{.Server.Version}}")
    probe = door.run(door.Command(version, timeout=60), output="capture", quiet=True)
    if probe.ok and probe.stdout.strip():
        return False
    said = " ".join((probe.stderr or probe.stdout).split()) or f"exit {probe.code}"
    if probe.timed_out:
        said = "no answer within 60s"
    where = f" at DOCKER_HOST={host}" if (host := os.environ.get("DOCKER_HOST")) else ""
    raise Failure(
        f"the Docker engine{where} cannot be reached ({said}); start it "
        "(`vllm-omni-ci sandbox up`, or start Docker), or use --native",
    )


def build_command(platform: Platform, repo: Path) -> str:
    """The `build-image` command for the tier's image; when `repo` lacks what that build
    hashes (a checkout of the pipelines alone), also what is missing, since the command
    would only fail on it."""
    builder = "--builder engine " if platform in (Platform.ROCM, Platform.CUDA) else ""
    command = f"vllm-omni-ci build-image --platform {platform} --repo {repo} {builder}--no-push"
    missing = missing_inputs(repo, platform)
    if not missing:
        return command
    return (
        f"{command} (but {repo} lacks what it builds from: {', '.join(missing)}; give --repo"
        " a whole vLLM-Omni checkout)"
    )


# --------------------------------------------------------------------------- listing


def listing(steps: Sequence[TierStep], options: Options) -> str:
    lines: list[str] = []
    # The step and group keys the tier defines (other `depends_on` keys are its build steps).
    keys = {s.key for s in steps if s.key} | {k for s in steps for k in s.group_keys}
    for position, step in select(steps, options.step):
        reason, devices = placement(step, options)
        on = "CPU" if step.runs_on_cpu else where(step, devices) or "--force"
        runs = reason or f"runs here ({on})"
        lines.append(f"{position:>3}. [{step.platform}] {step.label}")
        if step.group:
            lines.append(f"     group: {step.group}")
        lines.append(f"     hardware: {step.hardware or step.platform.value} — {runs}")
        lines.append(f"     grade: {step.grade_text}")
        lines.extend(f"     if: {condition}" for condition in step.conditions)
        inside = [d for d in step.depends_on if d.key in keys]
        if inside:
            shown = ", ".join(
                d.key + (" (failure allowed)" if d.allow_failure else "") for d in inside
            )
            lines.append(f"     depends on: {shown}")
        extra = [f"parallelism {step.parallelism}"] if step.parallelism > 1 else []
        extra += [f"timeout {step.timeout_minutes}m"] if step.timeout_minutes else []
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
    args: Options, tier: Tier, repo: Path, docker: str, environ: Mapping[str, str]
) -> list[Platform]:
    if args.platform:
        return [parse_platform(args.platform)]
    found = [p for p in Platform if source_of(repo, tier, p)]
    if not found:
        raise Unavailable(f"no {tier} tier for any platform in {repo}")
    if args.list or args.native or args.image:
        if args.native and len(found) > 1:
            raise UserError("--native: give --platform (" + ", ".join(p.value for p in found) + ")")
        return found
    commit = resolve_commit(repo)
    present = [p for p in found if image_present(docker, ci_image(p, commit, environ))]
    if not present:
        raise Stop(
            2,
            f"error: no CI image for the {tier} tier is present locally "
            f"({', '.join(ci_image(p, commit, environ) for p in found)}); "
            "build one, or give --platform with --image, or --native:",
            *(f"  {p}: {build_command(p, repo)}" for p in found),
        )
    return present


def parse_tier(name: str) -> Tier:
    """The tier `name` names; else an `error:` line with a guess and the allowed values.

    The line says `tier:`, not `--name:`: the name is almost always given positionally
    (`tier redy`), and the task cannot tell which form was used.
    """
    try:
        return Tier(name.strip().lower())
    except ValueError:
        allowed = [t.value for t in Tier]
        guess = close_match(name.strip().lower(), allowed)
        hint = f"; did you mean {guess!r}?" if guess else ""
        raise UserError(f"tier: unknown tier {name!r}{hint} ({', '.join(allowed)})") from None


def run(name: str, **given: Any) -> int:
    """The whole session (`given`: the `tier` task's options); its exit status."""
    tier = parse_tier(name)
    args = parse_args(**given)
    repo = resolve_repo(args.repo or None)
    docker = os.environ.get("VLLM_OMNI_CI_DOCKER") or "docker"
    if not (args.native or args.list):
        docker = named_docker() or docker  # a bad $VLLM_OMNI_CI_DOCKER is named, not "no image"
    environ = dict(os.environ)
    platforms = _platforms(args, tier, repo, docker, environ)
    steps = [s for platform in platforms for s in load_tier(repo, tier, platform)]
    # What this host has for the GPU steps (--cpu-only: they need --force, so nothing),
    # narrowed by the caller's visibility variables (nvidia-smi ignores them).
    probed = () if args.cpu_only else platforms
    inventory = narrowed(probe(environ, probed), environ, probed)
    args = dataclasses.replace(args, inventory=inventory)
    if args.list:
        width = min(shutil.get_terminal_size().columns, 100)
        sys.stdout.write(
            "".join(f"# {tier} tier for {p}: {source_of(repo, tier, p)}\n" for p in platforms)
            + "".join(f"{line}\n" for line in wrap(RULE, width, "# ", hang=""))
            + listing(steps, args)
        )
        sys.stdout.flush()
        return 0

    live = live_terminal()
    # Each run writes a folder of its own (cwd-relative) and points `latest` at it, unless
    # --results DIR is given. The run id also names the run's containers.
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    kind = "-".join([tier.value, *(p.value for p in platforms)])
    base = None if args.results else (RESULTS / kind).resolve()
    folder = base / run_id if base else Path(args.results).resolve()
    at_once = args.jobs or os.cpu_count() or 1
    args = dataclasses.replace(
        args,
        repo=str(repo),
        results=str(folder),
        jobs=at_once,
        # Streamed only one at a time and off Buildkite (there, each job's group comes whole).
        stream=not live and not in_buildkite() and at_once == 1,
        commit=resolve_commit(repo),
        environ=environ,
        docker=docker,
        run_id=run_id,
    )
    jobs = plan_tier(steps, args)
    if not jobs:
        raise UserError(f"--step: no {tier} step label contains {args.step!r}")
    if not args.native:
        images: dict[str, Platform] = {}
        for job in jobs:
            if job.runs:
                images.setdefault(job.image, job.step.platform)
        UserError.collect(
            f"image {image} ({platform}) is not present locally; build it with: "
            f"{build_command(platform, repo)}"
            " (the tag is the repo's commit: BUILDKITE_COMMIT, else git HEAD; "
            "or give --image, or --native)"
            for image, platform in images.items()
            if not image_present(docker, image)
        )

    warnings = make_results(folder, platforms, base)  # the first write: every check passed
    try:
        scratch: Path | None = Path(tempfile.mkdtemp(prefix="vllm-omni-ci-tier-"))
    except OSError:
        scratch = None  # the jobs' JUnit folders go off the results disk, or nowhere
    if scratch is not None:
        args = dataclasses.replace(args, scratch=scratch)
        jobs = plan_tier(steps, args)
    title = f"{tier} tier ({', '.join(p.value for p in platforms)}) — {repo}"
    console = None
    if live:
        from rich.console import Console

        console = Console(stderr=True)

    def say(text: str) -> None:
        for line in wrap(text, console.width) if console else [text]:
            door.note(line)

    runs = sum(j.runs for j in jobs)
    say(
        f"{title}: {runs} of {len(jobs)} jobs run here (--list says why), up to {at_once} at a time"
    )
    say(f"results: {report.shown_path(folder)}")
    try:
        results = report.watch(jobs, args, title, folder, console)
        if not live:
            with door.buildkite_group(f"{tier} tier summary"):
                for line in report.plain_lines(results):
                    door.note(line)
        junit = folder / f"junit-{tier}.xml"  # merged from the jobs' own, in the scratch
        try:
            report.write_junit(results, f"{tier} tier", junit)
            written = f"JUnit: {report.shown_path(junit)}"
        except OSError as exc:
            warnings.append(f"JUnit not written: {junit}: {exc.strerror or exc}")
            written = "no JUnit (see the warning)"
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    warnings += [f"{r.job.title}: {r.log_problem}" for r in results if r.log_problem]
    say(f"{report.verdict(results)}; {written}")
    for warning in warnings:
        say(f"warning: {warning}")
    if in_buildkite():
        report.upload_artifacts(results, folder)
        style = report.annotation_style(results)
        text = report.markdown(results, title, folder)
        markdown = Redactor.for_env(*(j.env for j in jobs))(text)
        context = f"vllm-omni-ci-{tier}"
        argv = ("buildkite-agent", "annotate", "--style", style, "--context", context)
        done = door.run(door.Command(argv, description="annotate the build", stdin=markdown))
        if not done.ok:
            door.note(f"warning: buildkite-agent annotate failed (exit {done.code})")
    return 1 if any(r.outcome is JobOutcome.FAILED for r in results) else 0


def make_results(folder: Path, platforms: Sequence[Platform], base: Path | None) -> list[str]:
    """Create the run's folders (an `error:` line, exit 2, when it cannot); the warnings.

    `base/latest` (a new link renamed over the old) is a convenience: failing is a warning.
    """
    for made in (folder, *(folder / p.value for p in platforms)):
        try:
            made.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(
                f"cannot write the tier's results to {made}: {exc.strerror or exc}; "
                "give --results DIR on a writable disk",
            ) from None
    if base is None:
        return []
    temporary = base / f".latest-{os.getpid()}"
    try:
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(folder.name)
        os.replace(temporary, base / "latest")
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        return [f"{base / 'latest'} not pointed at this run: {exc.strerror or exc}"]
    return []
