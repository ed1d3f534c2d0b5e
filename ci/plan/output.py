"""The plan as text: rich tables (terminal), JSON (tools), markdown (annotations, PR comments).

All three read the same `Plan`; JSON is `Plan.as_dict()` verbatim, so the
schema in `ci/data/plan.schema.json` describes exactly what is printed.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import IO

from ci.plan.model import Dropped, Plan, PlatformPlan, Step

DETAIL_WIDTH = 90
SEP = " / "  # between group names and the step label
WIDE = 160  # piped output (a file, a CI log) is not wrapped at 80 columns


def to_json(plan: Plan) -> str:
    return json.dumps(plan.as_dict(), indent=2, ensure_ascii=False) + "\n"


def _short(text: str, width: int = DETAIL_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _hardware(step: Step) -> str:
    if step.preset and step.queue:
        return f"{step.preset} ({step.queue})"
    return step.preset or step.queue or "-"


def _label(groups: tuple[str, ...], label: str) -> str:
    return SEP.join((*groups, label))


def _runs(step: Step) -> str:
    return "yes" if step.runs == "yes" else step.note or "conditional"


def _header(plan: Plan) -> list[str]:
    diff = plan.diff
    paths = diff.get("paths")
    count = "unknown" if paths is None else str(len(paths))
    inputs = plan.inputs
    labels = ", ".join(inputs.get("labels") or []) or "none"
    flags = [f for f in ("nightly", "weekly", "non_critical") if inputs.get(f)]
    lines = [
        f"diff: {diff.get('range')} ({count} changed file(s))",
        f"branch: {inputs.get('branch')}  labels: {labels}"
        + (f"  env: {', '.join(f.upper() + '=1' for f in flags)}" if flags else "")
        + (f"  MIRROR_HW={inputs['mirror_hw']}" if inputs.get("mirror_hw") else ""),
        f"skip-ci: {plan.skip_ci.get('mode')} — {plan.skip_ci.get('message')}",
    ]
    lines += [f"warning: {w}" for w in plan.warnings]
    return lines


def _title(platform: PlatformPlan) -> str:
    return f"{platform.platform}: {platform.status.upper()} — {platform.reason}"


# --------------------------------------------------------------------------- table


def print_table(plan: Plan, file: IO[str]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=file, soft_wrap=False, highlight=False)

    def say(text: str, style: str = "") -> None:
        # One output line per fact: a long reason is not folded (the tables are).
        console.print(Text(text, style=style), soft_wrap=True)

    if not console.is_terminal:
        console.width = max(console.width, WIDE)
    for line in _header(plan):
        say(line)
    for platform in plan.platforms:
        console.print()
        style = {"run": "bold green", "skip": "bold yellow", "error": "bold red"}[platform.status]
        say(_title(platform), style=style)
        for error in platform.errors:
            say(f"  error: {error}", style="red")
        for note in platform.notes:
            say(f"  {note}")
        for pipeline in platform.pipelines:
            head = f"{pipeline.name} ({pipeline.file or '-'})"
            if pipeline.scope:
                head += f" scope={pipeline.scope}"
            head += f": {pipeline.status}"
            if pipeline.reason:
                head += f" — {pipeline.reason}"
            say(head, style="bold")
            table = Table(show_lines=False, expand=False)
            for column in ("group", "step", "hardware", "par.", "timeout", "blocking", "runs"):
                table.add_column(column, overflow="fold")
            for step in pipeline.steps:
                cells = (
                    SEP.join(step.groups),
                    step.label,
                    _hardware(step),
                    str(step.parallelism or ""),
                    f"{step.timeout_in_minutes}m" if step.timeout_in_minutes else "",
                    "yes" if step.blocking else "soft-fail",
                    _runs(step),
                )
                table.add_row(*(Text(c) for c in cells))
            if pipeline.steps:
                console.print(table)
            if pipeline.dropped:
                counts = Counter(d.reason for d in pipeline.dropped)
                summary = ", ".join(f"{reason} {n}" for reason, n in counts.items())
                say(f"  dropped {len(pipeline.dropped)}: {summary}", style="dim")
                for drop in pipeline.dropped:
                    detail = f" ({_short(drop.detail, 70)})" if drop.detail else ""
                    line = f"    - {_label(drop.groups, drop.label)}: {drop.reason}{detail}"
                    say(line, style="dim")


# --------------------------------------------------------------------------- markdown


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _dropped_line(drop: Dropped) -> str:
    detail = f" — {_short(drop.detail)}" if drop.detail else ""
    return f"- {_cell(_label(drop.groups, drop.label))}: **{drop.reason}**{_cell(detail)}"


def to_markdown(plan: Plan) -> str:
    out = ["## What will CI run?", ""]
    out += [f"- {_cell(line)}" for line in _header(plan)]
    for platform in plan.platforms:
        out += ["", f"### {_cell(_title(platform))}"]
        facts = [f"- error: `{_cell(e)}`" for e in platform.errors]
        facts += [f"- {_cell(n)}" for n in platform.notes]
        out += ["", *facts] if facts else []
        for pipeline in platform.pipelines:
            scope = f", scope `{pipeline.scope}`" if pipeline.scope else ""
            reason = f" — {_cell(pipeline.reason)}" if pipeline.reason else ""
            out += [
                "",
                f"**{pipeline.name}** (`{pipeline.file or '-'}`{scope}): {pipeline.status}{reason}",
            ]
            if pipeline.steps:
                out += [
                    "",
                    "| step | hardware | par. | timeout | blocking | runs |",
                    "| --- | --- | --- | --- | --- | --- |",
                ]
                out += [
                    f"| {_cell(_label(s.groups, s.label))} | {_cell(_hardware(s))} "
                    f"| {s.parallelism or ''} "
                    f"| {f'{s.timeout_in_minutes}m' if s.timeout_in_minutes else ''} "
                    f"| {'yes' if s.blocking else 'soft-fail'} | {_cell(_runs(s))} |"
                    for s in pipeline.steps
                ]
            if pipeline.dropped:
                out += ["", f"<details><summary>{len(pipeline.dropped)} dropped</summary>", ""]
                out += [_dropped_line(d) for d in pipeline.dropped]
                out += ["", "</details>"]
    return "\n".join(out) + "\n"


def write(plan: Plan, format: str, file: IO[str]) -> None:
    if format == "json":
        file.write(to_json(plan))
    elif format == "markdown":
        file.write(to_markdown(plan))
    else:
        print_table(plan, file)
    file.flush()
