"""`migrate --check`: a report of what a checkout still has to migrate (not built yet)."""

from __future__ import annotations

from pathlib import Path

from ci.errors import UserError


def run(repo: Path, fmt: str) -> int:
    """The report of `repo` in `fmt` (table, json or markdown); the exit code."""
    raise UserError("migrate --check: not built yet")
