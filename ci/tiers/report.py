"""What a tier run reports: the summary table, one JUnit XML file, the Buildkite annotation.

The table (step, shard, result, exit code, duration, log file) is a rich table
in a terminal, kept live while jobs run, and plain lines in CI. The JUnit file
has one testcase per step and shard: a blocking failure is a `<failure>`, a
soft failure a `<failure type="soft_fail">` (Buildkite's soft_fail shows it
but does not fail the build), and a step that did not run is `<skipped>` with
its reason ("needs mi300_2").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci.tiers.execute import JobResult, Outcome

if TYPE_CHECKING:
    from rich.table import Table

COLUMNS = ("step", "shard", "result", "exit", "duration", "log")
_STYLE = {
    Outcome.PASSED: "green",
    Outcome.FAILED: "bold red",
    Outcome.SOFT: "yellow",
    Outcome.SKIPPED: "dim",
    Outcome.NOT_RUN: "dim",
    Outcome.RUNNING: "cyan",
    Outcome.PENDING: "dim",
}


def _shown_log(path: Path | None) -> str:
    if path is None:
        return ""
    here = Path.cwd()
    return str(path.relative_to(here)) if path.is_relative_to(here) else str(path)


def row(result: JobResult) -> tuple[str, str, str, str, str, str]:
    """One summary line: result shows soft failures and skip reasons in words."""
    job = result.job
    label = f"[{job.step.platform}] {job.name}"
    if result.outcome is Outcome.SKIPPED or result.outcome is Outcome.NOT_RUN:
        shown = result.note or result.outcome.value
    elif result.outcome is Outcome.SOFT:
        shown = "soft failure"
    else:
        shown = result.outcome.value
    if result.note and result.outcome in (Outcome.PASSED, Outcome.FAILED, Outcome.SOFT):
        shown += f" ({result.note})"
    if result.timed_out:
        shown += f" (timed out after {job.step.timeout_minutes}m)"
    code = "" if result.code is None else str(result.code)
    ran = result.outcome in (Outcome.PASSED, Outcome.FAILED, Outcome.SOFT)
    duration = f"{result.seconds:.1f}s" if ran else ""
    log = _shown_log(job.log) if ran else ""
    return label, job.shard_text, shown, code, duration, log


def plain_lines(results: Sequence[JobResult]) -> list[str]:
    """The summary as plain lines (CI logs): `RESULT  step [shard]  exit N  12.3s  log`."""
    lines = []
    for result in results:
        _label, _shard, shown, code, duration, log = row(result)
        parts = [f"{shown:<14}", f"[{result.job.step.platform}] {result.job.title}"]
        if code:
            parts.append(f"exit {code}")
        if duration:
            parts.append(duration)
        if log:
            parts.append(log)
        lines.append("  ".join(parts))
    return lines


def table(results: Sequence[JobResult], title: str) -> Table:
    from rich.markup import escape
    from rich.table import Table

    made = Table(title=title, title_justify="left")
    for name in COLUMNS:
        made.add_column(name, overflow="fold", justify="right" if name == "exit" else "left")
    for result in results:
        cells = [escape(c) for c in row(result)]
        made.add_row(*cells, style=_STYLE.get(result.outcome))
    return made


def verdict(results: Sequence[JobResult]) -> str:
    counts = {o: sum(1 for r in results if r.outcome is o) for o in Outcome}
    parts = [
        f"{counts[Outcome.PASSED]} passed",
        f"{counts[Outcome.FAILED]} failed",
        f"{counts[Outcome.SOFT]} soft failures",
        f"{counts[Outcome.SKIPPED]} not runnable here",
    ]
    if counts[Outcome.NOT_RUN]:
        parts.append(f"{counts[Outcome.NOT_RUN]} not run")
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
    if any(r.outcome is Outcome.FAILED for r in results):
        return "error"
    if any(r.outcome is Outcome.SOFT for r in results):
        return "warning"
    return "success"


def _tail(path: Path | None, limit: int = 200) -> str:
    if path is None or not path.is_file():
        return ""
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.readlines()
    return "".join(lines[-limit:])


def junit(results: Sequence[JobResult], suite: str) -> Any:
    """An ElementTree of one <testsuites> with a <testsuite> per platform."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name=suite)
    platforms = list(dict.fromkeys(r.job.step.platform for r in results))
    for platform in platforms:
        mine = [r for r in results if r.job.step.platform is platform]
        node = ET.SubElement(
            root,
            "testsuite",
            name=f"{suite} ({platform})",
            tests=str(len(mine)),
            failures=str(sum(r.outcome in (Outcome.FAILED, Outcome.SOFT) for r in mine)),
            errors="0",
            skipped=str(sum(r.outcome in (Outcome.SKIPPED, Outcome.NOT_RUN) for r in mine)),
            time=f"{sum(r.seconds for r in mine):.3f}",
        )
        for result in mine:
            job = result.job
            name = job.title
            group = re.sub(r":[a-z0-9_+-]+:", "", job.step.group).strip()
            case = ET.SubElement(
                node,
                "testcase",
                classname=f"{job.step.tier}.{platform}.{group or job.step.source}",
                name=name,
                time=f"{result.seconds:.3f}",
                file=job.step.source,
            )
            if result.outcome is Outcome.FAILED:
                failure = ET.SubElement(
                    case, "failure", type="failure", message=f"exit {result.code}"
                )
                failure.text = _tail(job.log)
            elif result.outcome is Outcome.SOFT:
                failure = ET.SubElement(
                    case,
                    "failure",
                    type="soft_fail",
                    message=f"soft failure: exit {result.code} ({job.step.grade_text})",
                )
                failure.text = _tail(job.log)
            elif result.outcome in (Outcome.SKIPPED, Outcome.NOT_RUN):
                ET.SubElement(case, "skipped", message=result.note or result.outcome.value)
            if job.log is not None and job.runs:
                out = ET.SubElement(case, "system-out")
                out.text = f"log: {job.log}"
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(results: Sequence[JobResult], suite: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    junit(results, suite).write(path, encoding="utf-8", xml_declaration=True)
    return path
