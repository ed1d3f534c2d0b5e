"""The `migrate --check` report: a table, JSON, or Markdown for a pull request.

The Markdown is a pull request's description, which GitHub caps at 65,536
characters: the summary, the grid of verdicts, and each cause once (a failure's
error line, a difference's job and field) with the cells it shows in; never more
than `LIMIT` characters (what is left out is counted, and found in the full
report). The full report (`full_markdown`) has every cell's every difference.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Final

from ci.migrate.compare import (
    AFTER_FAILED,
    BEFORE_FAILED,
    BOTH_FAIL,
    BOTH_FAILED,
    BUILD,
    DIFFERS,
    FAILED,
    Cell,
)

FORMATS: Final = ("table", "json", "markdown")
LIMIT: Final = 60_000  # characters of the Markdown: under GitHub's 65,536, with room to edit


def verdict(cell: Cell) -> str:
    if cell.verdict in FAILED:
        return cell.verdict
    if cell.verdict == DIFFERS:
        jobs = {d.job for d in cell.differences if d.documented is None}
        return f"differs ({len(jobs)} job{'s' * (len(jobs) != 1)})"
    documented = sum(1 for d in cell.differences if d.documented)
    # The cause of "same: both fail (…)" is listed under the grid, once per cell.
    shown = _kind(cell.verdict)
    return f"{shown} ({documented} documented)" if documented else shown


def _kind(verdict: str) -> str:
    return BOTH_FAIL if verdict.startswith(BOTH_FAIL) else verdict


def render(
    cells: Sequence[Cell],
    fmt: str,
    *,
    seconds: float,
    not_compared: Sequence[str] = (),
    full: str | None = None,
) -> str:
    """The report; `not_compared`: a line per platform left out, and why; `full`: the file
    that holds the full report (the Markdown names it)."""
    if fmt == "json":
        return json.dumps(_as_json(cells, seconds, not_compared), indent=2) + "\n"
    if fmt == "markdown":
        return short_markdown(cells, seconds=seconds, not_compared=not_compared, full=full)
    return _text(cells, seconds, not_compared, markdown=False)


def full_markdown(cells: Sequence[Cell], *, seconds: float, not_compared: Sequence[str]) -> str:
    """Every cell's every difference, as Markdown (any length)."""
    return _text(cells, seconds, not_compared, markdown=True)


def _counts(cells: Sequence[Cell]) -> dict[str, int]:
    """How many cells of each verdict; the optional kinds only where some cell has them."""
    counts = Counter(_kind(c.verdict) for c in cells)
    optional = (BOTH_FAIL, *FAILED)
    kinds = ("same", BOTH_FAIL, "skipped by both", *FAILED, DIFFERS)
    return {v: counts[v] for v in kinds if counts[v] or v not in optional}


def _summary(cells: Sequence[Cell], seconds: float) -> str:
    builds = len({(c.change, c.situation) for c in cells})
    platforms = len({c.platform for c in cells})
    parts = ", ".join(f"{n} {v}" for v, n in _counts(cells).items())
    return (
        f"{builds} builds x {platforms} platforms = {len(cells)} cells: {parts} ({seconds:.0f} s)"
    )


def _text(
    cells: Sequence[Cell], seconds: float, not_compared: Sequence[str], *, markdown: bool
) -> str:
    header, body = _table(cells)
    lines = [
        ("## migrate --check: " if markdown else "migrate --check: ") + _summary(cells, seconds),
        "",
    ]
    if markdown:
        lines += _grid(header, body)
    else:
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        lines += [
            "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
            for r in [header, *body]
        ]
    if not_compared:
        lines += ["", "### Not compared" if markdown else "Not compared:"]
        lines += [f"- {line}" for line in not_compared]
    failing = [c for c in cells if c.verdict.startswith(BOTH_FAIL)]
    if failing:
        lines += ["", "### Both fail, for the same cause" if markdown
                  else "Both fail, for the same cause:"]  # fmt: skip
        lines += [
            f"- {c.change} / {c.situation} / {c.platform.value}:"
            f" {_short(c.verdict[len(BOTH_FAIL) :].strip()[1:-1])}"
            for c in failing
        ]
    documented = Counter(d.documented for c in cells for d in c.differences if d.documented)
    if documented:
        lines += ["", "### Documented differences (docs/differences.md)" if markdown
                  else "Documented differences (docs/differences.md):"]  # fmt: skip
        lines += [f"- {heading}: {n} job field(s)" for heading, n in sorted(documented.items())]
    found = [(c, d) for c in cells for d in c.differences if d.documented is None]
    if found:
        lines += ["", "### Differences" if markdown else "Differences:"]
        for cell, d in found:
            where = f"{cell.change} / {cell.situation} / {cell.platform.value}"
            lines.append(
                f"- {where}: {d.job}: {d.field}: before {_short(d.before)}"
                f" → after {_short(d.after)}"
            )
    return "\n".join(lines) + "\n"


def _table(cells: Sequence[Cell]) -> tuple[list[str], list[list[str]]]:
    """The grid's header and rows: a row per build, a column per platform, verdicts."""
    platforms = list(dict.fromkeys(c.platform.value for c in cells))
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for cell in cells:
        rows.setdefault((cell.change, cell.situation), {})[cell.platform.value] = verdict(cell)
    body = [
        [change, situation, *(row.get(p, "") for p in platforms)]
        for (change, situation), row in rows.items()
    ]
    return ["change", "situation", *platforms], body


def _grid(header: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in body]


def short_markdown(
    cells: Sequence[Cell], *, seconds: float, not_compared: Sequence[str], full: str | None
) -> str:
    """The summary, the grid, and each cause once with the cells it shows in, at most
    `LIMIT` characters: a section's causes that do not fit are counted instead."""
    head = [f"## migrate --check: {_summary(cells, seconds)}", "", *_grid(*_table(cells))]
    if not_compared:
        head += ["", "### Not compared", *(f"- {line}" for line in not_compared)]
    where = f"`{full}`" if full else "the full report (`--full-report PATH`)"
    tail = ["", f"The full report, every cell and every difference: {where}"]
    budget = LIMIT - sum(len(line) + 1 for line in [*head, *tail])
    lines: list[str] = []
    for title, groups in _sections(cells):
        if not groups:
            continue
        intro = _INTROS.get(title)
        budget -= len(title) + 2 + (len(intro) + 1 if intro else 0)
        lines += ["", title, *([intro] if intro else [])]
        left = 0
        for cause, affected in groups.items():
            entry = f"- {cause} — {_where(affected, cells)}"
            if left or len(entry) + 1 > budget - _RESERVE:
                left += 1
                continue
            lines.append(entry)
            budget -= len(entry) + 1
        if left:
            note = f"- … {left} more cause{'s' * (left != 1)} left out here; all are in {where}"
            lines.append(note)
            budget -= len(note) + 1
    return "\n".join([*head, *lines, *tail]) + "\n"


_RESERVE: Final = 1_000  # room kept for the sections' "left out" lines


_OLD_FAILED: Final = f"### The old CI failed ({BEFORE_FAILED}, {BOTH_FAILED}: nothing to compare)"
_INTROS: Final = {
    _OLD_FAILED: "The old CI cannot run on this checkout, so these cells compare nothing:"
    " each line is a failed step, its exit and the line that names its error.",
}


def _sections(cells: Sequence[Cell]) -> list[tuple[str, dict[str, list[Cell]]]]:
    """Each section's causes (a Markdown line's start) and the cells each shows in."""
    old: dict[str, list[Cell]] = {}
    new: dict[str, list[Cell]] = {}
    both: dict[str, list[Cell]] = {}
    documented: dict[str, list[Cell]] = {}
    found: dict[str, list[Cell]] = {}
    for cell in cells:
        if cell.verdict.startswith(BOTH_FAIL):
            cause = cell.verdict[len(BOTH_FAIL) :].strip()[1:-1]
            both.setdefault(_code(cause), []).append(cell)
        for d in cell.differences:
            if d.documented:
                _add(documented, d.documented, cell)
            elif d.job == BUILD and d.field == "failed (before)":
                _add(old, _code(d.before), cell)
            elif d.job == BUILD and d.field == "failed (after)":
                _add(new, _code(d.after), cell)
            elif cell.verdict == DIFFERS:  # a failed side's builds compare nothing
                cause = f"{_code(d.job)}: {d.field}: before {_code(_short(d.before))}"
                _add(found, f"{cause} → after {_code(_short(d.after))}", cell)
    return [
        (_OLD_FAILED, old),
        (f"### The new CI failed ({AFTER_FAILED}, {BOTH_FAILED})", new),
        ("### Both fail, for the same cause", both),
        ("### Documented differences (docs/differences.md)", documented),
        ("### Differences", found),
    ]


def _add(groups: dict[str, list[Cell]], cause: str, cell: Cell) -> None:
    listed = groups.setdefault(cause, [])
    if not listed or listed[-1] is not cell:
        listed.append(cell)


def _code(text: str) -> str:
    """`text` as inline code, whatever backticks it holds."""
    flat = " ".join(text.split())
    return f"`` {flat} ``" if "`" in flat else f"`{flat}`"


def _where(affected: Sequence[Cell], every: Sequence[Cell]) -> str:
    """The cells, compactly: `cuda: every build; npu: docs (pr, main), registry (every
    situation)`."""
    changes = set(c.change for c in every)
    situations = set(c.situation for c in every)
    by_platform: dict[str, dict[str, list[str]]] = {}
    for cell in affected:
        by_platform.setdefault(cell.platform.value, {}).setdefault(cell.change, [])
        by_platform[cell.platform.value][cell.change].append(cell.situation)
    parts = []
    for platform, rows in by_platform.items():
        whole = [change for change, seen in rows.items() if set(seen) == situations]
        if set(whole) == changes:
            parts.append(f"{platform}: every build")
            continue
        shown = [f"{change} ({'every situation' if change in whole else ', '.join(seen)})"
                 for change, seen in rows.items()]  # fmt: skip
        parts.append(f"{platform}: {', '.join(shown)}")
    count = len(affected)
    return f"{count} cell{'s' * (count != 1)}: {'; '.join(parts)}"


def _short(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _as_json(
    cells: Sequence[Cell], seconds: float, not_compared: Sequence[str]
) -> dict[str, object]:
    return {
        "summary": _summary(cells, seconds),
        "counts": _counts(cells),
        "seconds": round(seconds, 1),
        "not_compared": list(not_compared),
        "cells": [
            {
                "change": c.change,
                "situation": c.situation,
                "platform": c.platform.value,
                "verdict": c.verdict,
                "differences": [vars(d) for d in c.differences],
            }
            for c in cells
        ],
    }
