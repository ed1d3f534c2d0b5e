"""The `migrate --check` report: a table, JSON, or Markdown for a pull request."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Final

from ci.migrate.compare import BOTH_FAIL, Cell

FORMATS: Final = ("table", "json", "markdown")


def verdict(cell: Cell) -> str:
    if cell.verdict == "differs":
        jobs = {d.job for d in cell.differences if d.documented is None}
        return f"differs ({len(jobs)} job{'s' * (len(jobs) != 1)})"
    documented = sum(1 for d in cell.differences if d.documented)
    # The cause of "same: both fail (…)" is listed under the grid, once per cell.
    shown = _kind(cell.verdict)
    return f"{shown} ({documented} documented)" if documented else shown


def _kind(verdict: str) -> str:
    return BOTH_FAIL if verdict.startswith(BOTH_FAIL) else verdict


def render(
    cells: Sequence[Cell], fmt: str, *, seconds: float, not_compared: Sequence[str] = ()
) -> str:
    """The report; `not_compared`: a line per platform left out, and why."""
    if fmt == "json":
        return json.dumps(_as_json(cells, seconds, not_compared), indent=2) + "\n"
    return _text(cells, seconds, not_compared, markdown=fmt == "markdown")


def _summary(cells: Sequence[Cell], seconds: float) -> str:
    counts = Counter(_kind(c.verdict) for c in cells)
    builds = len({(c.change, c.situation) for c in cells})
    platforms = len({c.platform for c in cells})
    kinds = ("same", *((BOTH_FAIL,) if counts[BOTH_FAIL] else ()), "skipped by both", "differs")
    parts = ", ".join(f"{counts[v]} {v}" for v in kinds)
    return (
        f"{builds} builds x {platforms} platforms = {len(cells)} cells: {parts} ({seconds:.0f} s)"
    )


def _text(
    cells: Sequence[Cell], seconds: float, not_compared: Sequence[str], *, markdown: bool
) -> str:
    platforms = list(dict.fromkeys(c.platform.value for c in cells))
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for cell in cells:
        rows.setdefault((cell.change, cell.situation), {})[cell.platform.value] = verdict(cell)
    header = ["change", "situation", *platforms]
    body = [
        [change, situation, *(row.get(p, "") for p in platforms)]
        for (change, situation), row in rows.items()
    ]
    lines = [
        ("## migrate --check: " if markdown else "migrate --check: ") + _summary(cells, seconds),
        "",
    ]
    if markdown:
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
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


def _short(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _as_json(
    cells: Sequence[Cell], seconds: float, not_compared: Sequence[str]
) -> dict[str, object]:
    return {
        "summary": _summary(cells, seconds),
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
