"""PLACEHOLDER until migrate's edits land (helper H3 owns this file)."""

from __future__ import annotations

from pathlib import Path


def apply(checkout: Path) -> None:
    raise NotImplementedError(checkout)
