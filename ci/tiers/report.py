"""What a tier run reports: its progress, the summary table, one JUnit XML file, the
Buildkite annotation.

Progress (`watch`): in a terminal a live board (each job's state and elapsed time),
then the failing jobs' last lines; without one, a line per change of state; in
Buildkite a `--- ` group per job, printed whole with its log when the job ends (no
interleaving; `^^^ +++` opens a failed one). JUnit has a testsuite per job whose pytest
commands wrote JUnit (their testcases, one per test), and per platform one testcase per
other job: a `<failure>`, a `<failure type="soft_fail">` (shown, not failing the build,
as Buildkite does), or `<skipped>` with its reason ("needs mi300_2").
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ci import door
from ci.redact import Redactor
from ci.target import in_buildkite
from ci.tiers import execute
from ci.tiers.execute import JobOutcome, JobResult
from ci.tiers.plan import Job, Options
from ci.tiers.terminal import informative, strip_emoji, widths, wrap

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

COLUMNS = ("step", "shard", "result", "exit", "duration", "log")
_ENDED = (JobOutcome.PASSED, JobOutcome.FAILED, JobOutcome.SOFT)
_ANNOTATION = ((JobOutcome.FAILED, "error"), (JobOutcome.SOFT, "warning"))  # else success
_STYLE = {  # any other outcome is dim
    JobOutcome.PASSED: "green",
    JobOutcome.FAILED: "bold red",
    JobOutcome.SOFT: "yellow",
    JobOutcome.RUNNING: "cyan",
}


def shown_path(path: Path) -> str:
    here = Path.cwd()
    return str(path.relative_to(here)) if path.is_relative_to(here) else str(path)


def ran_on(result: JobResult) -> str:
    """`h100_1 on NVIDIA H200` for a job that ran on devices ("" for any other)."""
    return result.job.where if result.outcome in _ENDED else ""


def row(result: JobResult, where: bool = True) -> tuple[str, str, str, str, str, str]:
    """One summary line: result shows soft failures and skip reasons in words (and, unless
    `where` is false, what the job ran on)."""
    job = result.job
    label = f"[{job.step.platform}] {job.name}"
    ran = result.outcome in _ENDED
    shown = result.outcome.value
    if result.note:
        shown = f"{shown} ({result.note})" if ran else result.note
    if where and ran_on(result):
        shown += f" ({job.where})"
    if result.timed_out:
        shown += f" (timed out after {job.step.timeout_minutes}m)"
    if result.log_problem:
        shown += " (log incomplete)"
    code = "" if result.code is None else str(result.code)
    duration = f"{result.seconds:.1f}s" if ran else ""
    if result.outcome is JobOutcome.RUNNING:
        duration = f"{time.monotonic() - result.started:.0f}s"
    log = shown_path(job.log) if ran and job.log else ""
    return label, job.shard_text, shown, code, duration, log


def plain_lines(results: Sequence[JobResult]) -> list[str]:
    """The summary as plain lines (CI logs): `RESULT  ON  step [shard]  exit N  12.3s  log`,
    ON a column of its own (`h100_1 on NVIDIA H200`) when some job ran on devices."""
    lines = []
    wide = max((len(ran_on(r)) for r in results), default=0)
    for result in results:
        _label, _shard, shown, code, duration, log = row(result, where=False)
        parts = [f"{shown:<14}", *([f"{ran_on(result):<{wide}}"] if wide else [])]
        parts.append(f"[{result.job.step.platform}] {result.job.title}")
        parts += [p for p in (code and f"exit {code}", duration, log) if p]
        lines.append("  ".join(parts))
    return lines


def table(
    results: Sequence[JobResult], title: str, *, width: int = 100, folder: Path | None = None
) -> RenderableType:
    """The live summary for a terminal of `width` columns (`ci.tiers.terminal`'s rules).

    With one platform the title names it and rows drop `[platform]`; logs are
    relative to `folder`; when whole words cannot fit a table, each job is a line.
    """
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    several = len({r.job.step.platform for r in results}) > 1
    rows = []
    for result in results:
        label, shard, shown, code, duration, log = row(result)
        if not several:
            label = label.removeprefix(f"[{result.job.step.platform}] ")
        if log and folder and result.job.log and result.job.log.is_relative_to(folder):
            log = str(result.job.log.relative_to(folder))
        rows.append((strip_emoji(label), shard, shown, code, duration, log))
    keep = informative(COLUMNS, rows, always=("step", "result"), constant=False).keep
    names = [COLUMNS[i] for i in keep]
    cells = [[r[i] for i in keep] for r in rows]
    fitted = widths(names, cells, width)
    if fitted is None and names[-1] == "log":  # long log names: the folder line says where
        if (narrower := widths(names[:-1], [c[:-1] for c in cells], width)) is not None:
            names, cells, fitted = names[:-1], [c[:-1] for c in cells], narrower
    parts: list[RenderableType] = [Text(line, style="bold") for line in wrap(title, width)]
    if folder is not None:
        where = f"logs in {shown_path(folder)}/"
        if "log" not in names:
            where += ": <platform>/<NN>-<step>[-shardN].log, NN the step's place in the tier"
        parts += [Text(line) for line in wrap(where, width)]
    if fitted is None:
        for result, values in zip(results, cells, strict=True):
            text = "  ".join(v for v in values if v)
            style = _STYLE.get(result.outcome, "dim")
            parts += [Text(line, style=style) for line in wrap(text, width, hang="    ")]
        return Group(*parts)
    made = Table()
    for name, size in zip(names, fitted, strict=True):
        made.add_column(
            name, width=size, overflow="fold", justify="right" if name == "exit" else "left"
        )
    for result, values in zip(results, cells, strict=True):
        made.add_row(*(Text(v) for v in values), style=_STYLE.get(result.outcome, "dim"))
    parts.append(made)
    return Group(*parts)


def verdict(results: Sequence[JobResult]) -> str:
    counts = {o: sum(r.outcome is o for r in results) for o in JobOutcome}
    parts = [
        f"{counts[JobOutcome.PASSED]} passed",
        f"{counts[JobOutcome.FAILED]} failed",
        f"{counts[JobOutcome.SOFT]} soft failures",
        f"{counts[JobOutcome.SKIPPED]} not runnable here",
    ]
    if counts[JobOutcome.NOT_RUN]:
        parts.append(f"{counts[JobOutcome.NOT_RUN]} not run")
    return ", ".join(parts)


def markdown(results: Sequence[JobResult], title: str, folder: Path | None = None) -> str:
    """The summary as a Buildkite annotation (markdown table); with `folder`, the logs and
    the JUnit link to the artifacts `upload_artifacts` made of them."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    def link(path: Path) -> str:
        name = str(path.relative_to(folder)) if folder else ""
        return f"[{cell(name)}](artifact://{name})"

    lines = [f"### {cell(title)}", "", f"{verdict(results)}", ""]
    if folder is not None:
        junit = sorted(folder.glob("junit-*.xml"))
        lines[-1:-1] = ["", f"JUnit: {link(junit[0])}"] if junit else []
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for result in results:
        cells = [cell(c) for c in row(result)]
        log = result.job.log
        if folder is not None and cells[-1] and log is not None and log.is_relative_to(folder):
            cells[-1] = link(log)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def upload_artifacts(results: Sequence[JobResult], folder: Path) -> None:
    """`buildkite-agent artifact upload` of the logs and the JUnit, from `folder` (so that
    the artifacts' paths are the annotation's links); a failure is a warning."""
    platforms = dict.fromkeys(r.job.step.platform.value for r in results if r.job.log)
    paths = ";".join([*(f"{p}/*.log" for p in platforms), "junit-*.xml"])
    argv = ("buildkite-agent", "artifact", "upload", paths)
    done = door.run(door.Command(argv, description="upload the logs and JUnit", cwd=str(folder)))
    if not done.ok:
        door.note(f"warning: buildkite-agent artifact upload failed (exit {done.code})")


def annotation_style(results: Sequence[JobResult]) -> str:
    outcomes = {r.outcome for r in results}
    return next((s for o, s in _ANNOTATION if o in outcomes), "success")


def pytest_cases(job: Job) -> list[ET.Element]:
    """The testcases the job's pytest commands wrote (`Job.junit`), in the order they ran;
    a file left unfinished (a pytest cut short) is passed over."""
    cases: list[ET.Element] = []
    found = list(job.junit.glob("junit-*.xml")) if job.junit and job.junit.is_dir() else []
    for path in sorted(found, key=lambda path: path.stat().st_mtime_ns):
        try:
            cases += ET.parse(path).getroot().iter("testcase")
        except (OSError, ET.ParseError):
            continue
    return cases


def job_case(result: JobResult, platform: str, redact: Redactor) -> ET.Element:
    """The job as one testcase: its failure with the log's last 200 lines, or its skip."""
    job = result.job
    group = re.sub(r":[a-z0-9_+-]+:", "", job.step.group).strip()
    case = ET.Element(
        "testcase",
        classname=f"{job.step.tier}.{platform}.{group or job.step.file}",
        name=job.title,
        time=f"{result.seconds:.3f}",
        file=job.step.file,
    )
    if result.outcome in (JobOutcome.FAILED, JobOutcome.SOFT):
        soft = result.outcome is JobOutcome.SOFT
        message = f"exit {result.code}"
        if soft:
            message = f"soft failure: {message} ({job.step.grade_text})"
        kind = "soft_fail" if soft else "failure"
        failure = ET.SubElement(case, "failure", type=kind, message=message)
        if job.log is not None and job.log.is_file():
            with open(job.log, encoding="utf-8", errors="replace") as fh:
                failure.text = redact("".join(fh.readlines()[-200:]))
    elif result.outcome in (JobOutcome.SKIPPED, JobOutcome.NOT_RUN):
        ET.SubElement(case, "skipped", message=redact(result.note or result.outcome.value))
    if job.log is not None and job.runs:
        ET.SubElement(case, "system-out").text = f"log: {job.log}"
    return case


def _suite(root: ET.Element, name: str, cases: Sequence[ET.Element], seconds: float) -> None:
    def count(tag: str) -> str:
        return str(sum(case.find(tag) is not None for case in cases))

    node = ET.SubElement(root, "testsuite", name=name, tests=str(len(cases)))
    node.attrib |= {"failures": count("failure"), "errors": count("error")}
    node.attrib |= {"skipped": count("skipped"), "time": f"{seconds:.3f}"}
    node.extend(cases)


def write_junit(results: Sequence[JobResult], suite: str, path: Path) -> Path:
    """`path`: one <testsuites>; per platform a <testsuite> per job whose pytest commands
    wrote JUnit (its tests; in a soft failure their failures typed `soft_fail`; a failed
    job none of whose tests failed adds itself), then one of the jobs without.

    The text taken from a job (its log's tail, its messages, its tests' output) passes
    the job's redactor (`ci.redact`: secrets of our env and of the job's), as the log did.
    """
    root = ET.Element("testsuites", name=suite)
    for platform in dict.fromkeys(r.job.step.platform for r in results):
        mine = [r for r in results if r.job.step.platform is platform]
        tested = {id(r): pytest_cases(r.job) for r in mine}
        for result in (r for r in mine if tested[id(r)]):
            redact = Redactor.for_env(result.job.env)
            cases = tested[id(result)]
            for element in (e for case in cases for e in case.iter()):
                element.text = element.text and redact(element.text)
                element.attrib = {k: redact(v) for k, v in element.attrib.items()}
                if result.outcome is JobOutcome.SOFT and element.tag in ("failure", "error"):
                    element.set("type", "soft_fail")
            failed = any(
                c.find("failure") is not None or c.find("error") is not None for c in cases
            )
            if result.outcome in (JobOutcome.FAILED, JobOutcome.SOFT) and not failed:
                cases.append(job_case(result, platform, redact))
            name = f"{suite} ({platform}): {result.job.title}"
            _suite(root, name, cases, result.seconds)
        plain = [r for r in mine if not tested[id(r)]]
        if plain:
            cases = [job_case(r, platform, Redactor.for_env(r.job.env)) for r in plain]
            _suite(root, f"{suite} ({platform})", cases, sum(r.seconds for r in plain))
    ET.indent(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


# --------------------------------------------------------------------------- progress

TAIL = 30  # lines of each failing job's log shown at the end of a run
_HEADERS = ("--- ", "+++ ", "~~~ ", "^^^ +++")  # Buildkite's group lines


def where(result: JobResult) -> str:
    """`natively` or `in container IMAGE`, and `on devices 0,1` when it was given some."""
    job = result.job
    text = f"in container {job.image}" if job.container else "natively"
    if job.devices:
        text += f" on devices {','.join(map(str, job.devices))}"
    return text


def state_line(result: JobResult) -> str:
    """`[ready/rocm] Job: running natively`, `…: passed in 3.2 s`, `…: failed (exit 1) in
    2.0 s`, `…: not run: <why>`."""
    job = result.job
    head = f"[{job.step.tier}/{job.step.platform}] {job.title}: "
    if result.outcome is JobOutcome.RUNNING:
        return f"{head}running {where(result)}"
    _label, _shard, shown, code, _duration, _log = row(result)
    if result.outcome not in _ENDED:
        return head + shown
    return f"{head}{shown}{f' (exit {code})' * (code != '0')} in {result.seconds:.1f} s"


def log_lines(job: Job, last: int | None = None) -> list[str]:
    try:
        with open(job.log or "", encoding="utf-8", errors="replace") as fh:
            return fh.read().splitlines()[-last if last else 0 :]
    except OSError as exc:
        return [f"(no log: {exc.strerror or exc})"]


def show_change(result: JobResult, options: Options) -> None:
    """Without a terminal, a job changed state: its line (streaming, its log's path too);
    in Buildkite, when it ended, its group: header, log (its own group lines demoted, so
    that it stays one group), its line, and `^^^ +++` after a failure."""
    job = result.job
    if not in_buildkite():
        door.note(state_line(result))
        if result.outcome is JobOutcome.RUNNING and options.stream and job.log:
            door.note(f"log: {shown_path(job.log)}")
        return
    if result.outcome not in _ENDED or job.log is None:
        return
    lines = [f"--- {job.title} — {where(result)}", f"log: {shown_path(job.log)}"]
    lines += (f" {line}" if line.startswith(_HEADERS) else line for line in log_lines(job))
    lines.append(state_line(result))
    if result.outcome is JobOutcome.FAILED:
        lines.append("^^^ +++")
    door.note("\n".join(lines))


def watch(
    jobs: Sequence[Job],
    options: Options,
    title: str,
    folder: Path,
    console: Console | None,
) -> list[JobResult]:
    """Run the jobs (`execute.run_jobs`) and show their progress: on `console` a live
    board, else `show_change`; then, unless the output was shown as it came, the last
    `TAIL` lines of each failed or soft-failed job's log."""
    if console is None:
        results = execute.run_jobs(jobs, options, lambda now, i: show_change(now[i], options))
    else:
        from rich.live import Live

        latest = execute.initial_results(jobs)

        def view() -> RenderableType:
            return table(latest, title, width=console.width, folder=folder)

        def keep(now: Sequence[JobResult], _i: int) -> None:
            latest[:] = now

        with Live(console=console, get_renderable=view, refresh_per_second=2):
            results = execute.run_jobs(jobs, options, keep)
    if options.stream or in_buildkite():
        return results
    for result in (r for r in results if r.outcome in (JobOutcome.FAILED, JobOutcome.SOFT)):
        log = shown_path(result.job.log) if result.job.log else ""
        door.note(f"== {result.job.title}: {result.outcome.value}, the last {TAIL} lines of {log}")
        door.note("\n".join(log_lines(result.job, TAIL)))
    return results
