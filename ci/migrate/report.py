"""The `migrate --check` report: a table, JSON, or Markdown for a pull request."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Final

from ci.migrate.compare import Cell

FORMATS: Final = ("table", "json", "markdown")


def verdict(cell: Cell) -> str:
    if cell.verdict == "differs":
        jobs = {d.job for d in cell.differences if d.documented is None}
        return f"differs ({len(jobs)} job{'s' * (len(jobs) != 1)})"
    documented = sum(1 for d in cell.differences if d.documented)
    return f"{cell.verdict} ({documented} documented)" if documented else cell.verdict


def render(cells: Sequence[Cell], fmt: str, *, seconds: float) -> str:
    if fmt == "json":
        return json.dumps(_as_json(cells, seconds), indent=2) + "\n"
    return _text(cells, seconds, markdown=fmt == "markdown")


def _summary(cells: Sequence[Cell], seconds: float) -> str:
    counts = Counter(c.verdict for c in cells)
    builds = len({(c.change, c.situation) for c in cells})
    platforms = len({c.platform for c in cells})
    parts = ", ".join(f"{counts[v]} {v}" for v in ("same", "skipped by both", "differs"))
    return (
        f"{builds} builds x {platforms} platforms = {len(cells)} cells: {parts} ({seconds:.0f} s)"
    )


def _text(cells: Sequence[Cell], seconds: float, *, markdown: bool) -> str:
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


def _as_json(cells: Sequence[Cell], seconds: float) -> dict[str, object]:
    return {
        "summary": _summary(cells, seconds),
        "seconds": round(seconds, 1),
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
