"""The pytest marker registry of the target repo: SKUs and card counts.

vLLM-Omni tags its markers in `pyproject.toml` (`[hardware-resource] [cuda]`, `[hardware-cards]`),
as `tests/helpers/mark.py` reads them; we parse the TOML, importing nothing of the target.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ci.errors import Failure
from ci.pipeline import files

PYPROJECT = "pyproject.toml"
_TAG = re.compile(r"\[([A-Za-z0-9_-]+)\]")
_CARDS = re.compile(r"^cards_(\d+)$")


@dataclass(frozen=True)
class Marker:
    """One registered pytest marker: its name, its description, its `[tag]`s."""

    name: str
    description: str
    tags: frozenset[str]


@dataclass(frozen=True)
class MarkerRegistry:
    """The tagged markers, in file order, and what mark.py derives from them."""

    source: str
    markers: tuple[Marker, ...]

    def tagged(self, *tags: str) -> tuple[str, ...]:
        wanted = set(tags)
        return tuple(dict.fromkeys(m.name for m in self.markers if wanted <= m.tags))

    def skus(self, platform: str) -> tuple[str, ...]:
        """`get_skus_for_platform`: markers tagged `[hardware-resource]` and `[<platform>]`."""
        return self.tagged("hardware-resource", platform)

    @property
    def card_counts(self) -> tuple[int, ...]:
        """`get_supported_card_counts`: n of every `cards_<n>` tagged `[hardware-cards]`."""
        found = (_CARDS.match(name) for name in self.tagged("hardware-cards"))
        return tuple(sorted({int(m.group(1)) for m in found if m}))

    @cached_property
    def levels(self) -> frozenset[str]:
        return frozenset(self.tagged("ci-level"))

    @cached_property
    def platforms(self) -> frozenset[str]:
        return frozenset(self.tagged("hardware-platform"))

    @cached_property
    def gpu_platforms(self) -> frozenset[str]:
        return frozenset(self.tagged("hardware-platform", "gpu"))

    @cached_property
    def sku_platforms(self) -> Mapping[str, str]:
        """SKU -> the first `[hardware-platform]` platform (in file order) that tags it."""
        found: dict[str, str] = {}
        for platform in self.tagged("hardware-platform"):
            for sku in self.skus(platform):
                found.setdefault(sku, platform)
        return found

    @property
    def res_keys(self) -> frozenset[str]:
        """Platforms valid as `res=` keys: those with at least one SKU."""
        return frozenset(self.sku_platforms.values())

    def skus_for(self, platform: str) -> tuple[str, ...]:
        """The SKUs whose platform (`sku_platforms`) is `platform`."""
        return tuple(s for s, p in self.sku_platforms.items() if p == platform)

    def gpu_marks(self) -> frozenset[str]:
        """Marks that say "needs a GPU": `gpu` and every `[gpu]` platform."""
        return self.gpu_platforms | {"gpu"}


def parse_marker_lines(lines: list[Any], source: str) -> MarkerRegistry:
    """`name: description [tag] ...` strings, as pytest's `markers` ini list holds them."""
    markers = []
    for line in lines:
        if isinstance(line, str) and line.strip():
            name, _, description = line.partition(":")
            tags = frozenset(_TAG.findall(description))
            markers.append(Marker(name.strip(), _TAG.sub("", description).strip(), tags))
    if not any(m.tags & {"hardware-resource", "hardware-cards"} for m in markers):
        raise Failure(
            f"no tagged pytest markers ([hardware-resource] / [hardware-cards]) in {source}",
        )
    return MarkerRegistry(source, tuple(markers))


def _toml() -> Any:
    try:
        return importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    except ImportError:  # pragma: no cover - Python 3.10 without tomli
        raise Failure(
            "reading pyproject.toml markers needs Python 3.11+ (or the tomli package)"
        ) from None


def parse_pyproject(text: str, source: str) -> MarkerRegistry:
    toml = _toml()
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise Failure(f"invalid pytest marker registry: {source}: {exc}") from None
    lines = data.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("markers")
    if not isinstance(lines, list):
        raise Failure(
            f"no [tool.pytest.ini_options].markers list in {source} "
            "(the pytest marker registry: SKUs and cards_* marks)",
        )
    return parse_marker_lines(lines, source)


def load_markers(repo: Path) -> MarkerRegistry:
    path = files.realpath(repo / PYPROJECT)
    if not files.exists(path):
        raise Failure(f"missing pytest marker registry: {path}")
    try:
        text = files.read_text(path, str(path))
    except files.Unreadable as exc:
        raise Failure(f"cannot read pytest marker registry: {path}: {exc.why}") from None
    return parse_pyproject(text, str(path))
