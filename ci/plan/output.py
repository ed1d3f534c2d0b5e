"""The plan as text: rich tables (terminal), JSON (tools), markdown (annotations, PR comments).

All three read the same `BuildPlan`; JSON is `BuildPlan.as_dict()` verbatim, so the
schema in `ci/data/plan.schema.json` describes exactly what is printed.
"""

from __future__ import annotations

import errno
import json
import os
from collections import Counter
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, TypeVar

from ci.pipeline.render import Dropped
from ci.plan.model import BuildPlan, PlannedPipeline, PlannedStep, PlatformPlan
from ci.plan.steps import one_line
from ci.tiers.terminal import Columns, informative, strip_emoji, widths, wrap

if TYPE_CHECKING:
    from rich.console import Console

DETAIL_WIDTH = 90
SEP = " / "  # between group names and the step label
WIDE = 200  # piped output (a file, a CI log) is not wrapped at 80 columns


def _short(text: str, width: int = DETAIL_WIDTH) -> str:
    text = one_line(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _label(groups: tuple[str, ...], label: str) -> str:
    return SEP.join((*groups, label))


def _header(plan: BuildPlan) -> list[str]:
    diff = plan.diff
    paths = diff.get("paths")
    count = "unknown" if paths is None else str(len(paths))
    inputs = plan.inputs
    labels = ", ".join(inputs.get("labels") or []) or "none"
    flags = [f for f in ("nightly", "weekly", "non_critical") if inputs.get(f)]
    lines = [] if plan.migrated else [_not_migrated(plan)]
    lines += [
        f"diff: {diff.get('range')} ({count} changed file(s))",
        f"branch: {inputs.get('branch')}  labels: {labels}"
        + (f"  env: {', '.join(f.upper() + '=1' for f in flags)}" if flags else "")
        + (f"  MIRROR_HW={inputs['mirror_hw']}" if inputs.get("mirror_hw") else ""),
        f"skip-ci: {plan.skip_ci.get('mode')} — {plan.skip_ci.get('message')}",
    ]
    lines += [f"warning: {w}" for w in plan.warnings]
    return lines


def _not_migrated(plan: BuildPlan) -> str:
    """The first line on a checkout whose CI still runs the old scripts: the plan is of ours."""
    first = plan.old_calls[0] if plan.old_calls else ""
    more = f" and {len(plan.old_calls) - 1} more" if len(plan.old_calls) > 1 else ""
    return (
        "plan: what vllm-omni-ci's bootstraps would run for this change (this checkout's CI"
        f" still calls the old scripts: {first}{more}; see `vllm-omni-ci migrate`)"
    )


def _title(platform: PlatformPlan) -> str:
    return f"{platform.platform}: {platform.status.upper()} — {platform.reason}"


Item = TypeVar("Item", PlannedStep, Dropped)


def _by_pipeline(
    platform: PlatformPlan, items: Callable[[PlannedPipeline], list[Item]]
) -> list[tuple[tuple[str, ...], Item]]:
    """(pipeline, item) of every pipeline, the pipeline `()` when all rows share one; it is
    `bootstrap`, not `cuda bootstrap`: the platform is the table's title already."""
    rows = [
        (p.name.removeprefix(f"{platform.platform} "), item)
        for p in platform.pipelines
        for item in items(p)
    ]
    named = len({name for name, _ in rows}) > 1
    return [((name,) if named else (), item) for name, item in rows]


def _conditional(rows: list[tuple[tuple[str, ...], PlannedStep]]) -> bool:
    """Whether some job's `if` decides at build time: only then is there a `condition` column."""
    return any(step.runs != "yes" for _, step in rows)


def _cells(
    step: PlannedStep, strip: Callable[[str], str] = str, *, condition: bool = False
) -> tuple[str, ...]:
    hardware = f"{step.preset} ({step.queue})" if step.preset and step.queue else None
    cells = (
        strip(SEP.join(step.groups)),
        strip(step.label),
        hardware or step.preset or step.queue or "-",
        str(step.parallelism or ""),
        f"{step.timeout_in_minutes}m" if step.timeout_in_minutes else "",
        "yes" if step.blocking else "soft-fail",
    )
    if not condition:
        return cells
    return (*cells, "" if step.runs == "yes" else step.note or "conditional")


# Every listed job runs (what does not is under `dropped`), so there is no `runs` column;
# a job whose `if` the plan cannot evaluate says so in a `condition` column.
COLUMNS = ("group", "step", "hardware", "par.", "timeout", "blocking")
CONDITION = ("condition",)
_STATUS_STYLE = {"run": "bold green", "skip": "bold yellow", "error": "bold red"}


def print_table(plan: BuildPlan, file: IO[str]) -> None:
    """One rich table per platform: every job it would run, then what was dropped and why.
    Piped (a file, a CI log), each fact is one line and the tables are as wide
    as they need. At a terminal lines wrap between words, `:emoji:` shortcodes
    are dropped, and a table leaves out a column empty or the same on every row
    (said once, as `every job:`); when still too wide, each job is a line."""
    from rich.console import Console
    from rich.text import Text

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            """rich's own exits 1, silently: a closed pipe is the program's 141, as for
            every other format and task (`plan | true`)."""
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    console = PipeConsole(file=file, soft_wrap=False, highlight=False)
    terminal = console.is_terminal
    strip: Callable[[str], str] = strip_emoji if terminal else str
    if not terminal:
        console.width = max(console.width, WIDE)

    def say(text: str, style: str = "", indent: str = "") -> None:
        # Piped, one output line per fact: a long reason is not folded (the tables are).
        for line in wrap(text, console.width, indent) if terminal else [indent + text]:
            console.print(Text(line, style=style), soft_wrap=True)

    for line in _header(plan):
        say(line)
    for platform in plan.platforms:
        say("")
        say(_title(platform), style=_STATUS_STYLE[platform.status])
        for error in platform.errors:
            say(f"error: {error}", style="red", indent="  ")
        if platform.why:
            say(f"why: {platform.why}", indent="  ")
        for note in platform.notes:
            say(note, indent="  ")
        for p in platform.pipelines:
            scope = f" scope={p.scope}" if p.scope else ""
            reason = f" — {p.reason}" if p.reason else ""
            line = f"{p.name} ({p.file or '-'}){scope}: {p.status}{reason}"
            say(line, style="bold", indent="  ")
        rows = _by_pipeline(platform, lambda p: p.steps)
        if rows:
            condition = _conditional(rows)
            headers = ("pipeline",) * len(rows[0][0]) + COLUMNS + CONDITION * condition
            cells = [
                pipeline_cell + _cells(step, strip, condition=condition)
                for pipeline_cell, step in rows
            ]
            _table(console, headers, cells, say, fit=terminal)
        drops = _by_pipeline(platform, lambda p: p.dropped)
        if drops:
            counts = Counter(d.reason for _, d in drops)
            summary = ", ".join(f"{reason} {n}" for reason, n in counts.items())
            say(f"dropped {len(drops)}: {summary}", style="dim", indent="  ")
            for names, drop in drops:
                where = "".join(f"[{name}] " for name in names)
                detail = f" ({_short(drop.detail, 70)})" if drop.detail else ""
                label = strip(_label(drop.groups, drop.label))
                say(f"- {where}{label}: {drop.reason}{detail}", style="dim", indent="    ")


def _table(
    console: Console,
    headers: tuple[str, ...],
    rows: list[tuple[str, ...]],
    say: Callable[..., None],
    *,
    fit: bool,
) -> None:
    """`fit` (a terminal): only the informative columns (`step` always), sized to keep words
    whole, else one line per job; otherwise every column, as wide as it needs."""
    from rich.table import Table
    from rich.text import Text

    everything = Columns(tuple(range(len(headers))), ())
    shown = informative(headers, rows, always=("step",)) if fit else everything
    names = [headers[i] for i in shown.keep]
    cells = [[row[i] for i in shown.keep] for row in rows]
    fitted = widths(names, cells, console.width) if fit else [None] * len(names)
    if fitted is None:  # too narrow for whole words in columns: one line per job
        for row in cells:
            values = dict(zip(names, row, strict=True))
            where = f"[{values.pop('pipeline')}] " if "pipeline" in values else ""
            label = SEP.join(v for v in (values.pop("group", ""), values.pop("step")) if v)
            facts = "".join(f"; {n} {v}" for n, v in values.items() if v)
            say(f"- {where}{label}{facts}", indent="  ")
    else:
        table = Table(show_lines=False, expand=False)
        for name, size in zip(names, fitted, strict=True):
            table.add_column(name, width=size, overflow="fold")
        for row in cells:
            table.add_row(*(Text(c) for c in row))
        console.print(table)
    if shown.same:
        say("every job: " + ", ".join(f"{h} {v}" for h, v in shown.same), style="dim", indent="  ")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(plan: BuildPlan) -> str:
    out = ["## What will CI run?", ""]
    out += [f"- {_cell(line)}" for line in _header(plan)]
    for platform in plan.platforms:
        out += ["", f"### {_cell(_title(platform))}", ""]
        out += [f"- error: `{_cell(e)}`" for e in platform.errors]
        out += [f"- why: {_cell(platform.why)}"] if platform.why else []
        out += [f"- {_cell(n)}" for n in platform.notes]
        for pipeline in platform.pipelines:
            scope = f", scope `{pipeline.scope}`" if pipeline.scope else ""
            reason = f" — {_cell(pipeline.reason)}" if pipeline.reason else ""
            out.append(
                f"- **{pipeline.name}** (`{pipeline.file or '-'}`{scope}): "
                f"{pipeline.status}{reason}"
            )
        rows = _by_pipeline(platform, lambda p: p.steps)
        if rows:
            condition = _conditional(rows)
            columns = ("pipeline",) * len(rows[0][0]) + COLUMNS[1:] + CONDITION * condition
            out += ["", f"| {' | '.join(columns)} |", f"|{' --- |' * len(columns)}"]
            for pipeline_cell, step in rows:
                shown = _cells(step, condition=condition)[2:]
                cells = (*pipeline_cell, _label(step.groups, step.label), *shown)
                out.append(f"| {' | '.join(_cell(c) for c in cells)} |")
        drops = _by_pipeline(platform, lambda p: p.dropped)
        if drops:
            out += ["", f"<details><summary>{len(drops)} dropped</summary>", ""]
            for names, drop in drops:
                where = "".join(f"[{name}] " for name in names)
                detail = f" — {_short(drop.detail)}" if drop.detail else ""
                label = _cell(where + _label(drop.groups, drop.label))
                out.append(f"- {label}: **{drop.reason}**{_cell(detail)}")
            out += ["", "</details>"]
    return "\n".join(out) + "\n"


def write(plan: BuildPlan, format: str, file: IO[str]) -> None:
    if format == "json":
        file.write(json.dumps(plan.as_dict(), indent=2, ensure_ascii=False) + "\n")
    elif format == "markdown":
        file.write(to_markdown(plan))
    else:
        print_table(plan, file)
    file.flush()
