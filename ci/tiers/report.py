"""What a tier run reports: the summary table, one JUnit XML file, the Buildkite annotation.

The table is live in a terminal and plain lines in CI. JUnit has a testcase per
step and shard: a `<failure>`, a `<failure type="soft_fail">` (shown, not failing
the build, as Buildkite does), or `<skipped>` with its reason ("needs mi300_2").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ci.redact import Redactor
from ci.tiers.execute import JobOutcome, JobResult
from ci.tiers.terminal import informative, strip_emoji, widths, wrap

if TYPE_CHECKING:
    from rich.console import RenderableType

COLUMNS = ("step", "shard", "result", "exit", "duration", "log")
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


def row(result: JobResult) -> tuple[str, str, str, str, str, str]:
    """One summary line: result shows soft failures and skip reasons in words."""
    job = result.job
    label = f"[{job.step.platform}] {job.name}"
    ran = result.outcome in (JobOutcome.PASSED, JobOutcome.FAILED, JobOutcome.SOFT)
    shown = result.outcome.value
    if result.note:
        shown = f"{shown} ({result.note})" if ran else result.note
    if ran and job.where:
        shown += f" ({job.where})"
    if result.timed_out:
        shown += f" (timed out after {job.step.timeout_minutes}m)"
    if result.log_problem:
        shown += " (log incomplete)"
    code = "" if result.code is None else str(result.code)
    duration = f"{result.seconds:.1f}s" if ran else ""
    log = shown_path(job.log) if ran and job.log else ""
    return label, job.shard_text, shown, code, duration, log


def plain_lines(results: Sequence[JobResult]) -> list[str]:
    """The summary as plain lines (CI logs): `RESULT  step [shard]  exit N  12.3s  log`."""
    lines = []
    for result in results:
        _label, _shard, shown, code, duration, log = row(result)
        parts = [f"{shown:<14}", f"[{result.job.step.platform}] {result.job.title}"]
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


def markdown(results: Sequence[JobResult], title: str) -> str:
    """The summary as a Buildkite annotation (markdown table)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [f"### {cell(title)}", "", f"{verdict(results)}", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for result in results:
        lines.append("| " + " | ".join(cell(c) for c in row(result)) + " |")
    return "\n".join(lines) + "\n"


def annotation_style(results: Sequence[JobResult]) -> str:
    outcomes = {r.outcome for r in results}
    return next((s for o, s in _ANNOTATION if o in outcomes), "success")


def write_junit(results: Sequence[JobResult], suite: str, path: Path) -> Path:
    """`path`: one <testsuites> with a <testsuite> per platform.

    The text taken from a job (its log's tail, its messages) passes the job's
    redactor (`ci.redact`: secrets of our env and of the job's), as the log did.
    """
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name=suite)
    for platform in dict.fromkeys(r.job.step.platform for r in results):
        mine = [r for r in results if r.job.step.platform is platform]
        node = ET.SubElement(
            root,
            "testsuite",
            name=f"{suite} ({platform})",
            tests=str(len(mine)),
            failures=str(sum(r.outcome in (JobOutcome.FAILED, JobOutcome.SOFT) for r in mine)),
            errors="0",
            skipped=str(sum(r.outcome in (JobOutcome.SKIPPED, JobOutcome.NOT_RUN) for r in mine)),
            time=f"{sum(r.seconds for r in mine):.3f}",
        )
        for result in mine:
            job = result.job
            redact = Redactor.for_env(job.env)
            group = re.sub(r":[a-z0-9_+-]+:", "", job.step.group).strip()
            case = ET.SubElement(
                node,
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
                if job.log is not None and job.log.is_file():  # the log's last 200 lines
                    with open(job.log, encoding="utf-8", errors="replace") as fh:
                        failure.text = redact("".join(fh.readlines()[-200:]))
            elif result.outcome in (JobOutcome.SKIPPED, JobOutcome.NOT_RUN):
                ET.SubElement(case, "skipped", message=redact(result.note or result.outcome.value))
            if job.log is not None and job.runs:
                ET.SubElement(case, "system-out").text = f"log: {job.log}"
    ET.indent(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path
