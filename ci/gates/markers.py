"""The target's pytest marker registry, read from its `pyproject.toml` tags.

vLLM-Omni hard-codes no SKU list: `tests/helpers/mark.py` groups the markers
registered in `[tool.pytest.ini_options].markers` by tags in their
descriptions (`[ci-level]`, `[hardware-platform]`, `[gpu]`,
`[hardware-resource]` + `[<platform>]`, `[hardware-cards]`). Reading the same
tags keeps our gate in step with the helpers whenever a SKU is added.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ci.errors import UserError

_TAG = re.compile(r"\[([A-Za-z0-9_-]+)\]")
_CARDS = re.compile(r"^cards_(\d+)$")


@dataclass(frozen=True)
class MarkerRegistry:
    """The marker sets mark.py derives from the tags (see MARKERS.md)."""

    levels: frozenset[str]
    platforms: frozenset[str]
    gpu_platforms: frozenset[str]
    skus: Mapping[str, str] = field(default_factory=dict)  # SKU -> platform
    card_counts: frozenset[int] = frozenset()

    @property
    def res_keys(self) -> frozenset[str]:
        """Platforms valid as `res=` keys: those with at least one SKU."""
        return frozenset(self.skus.values())

    def skus_for(self, platform: str) -> tuple[str, ...]:
        return tuple(s for s, p in self.skus.items() if p == platform)

    def gpu_marks(self) -> frozenset[str]:
        """Marks that say "needs a GPU": `gpu` and every `[gpu]` platform."""
        return self.gpu_platforms | {"gpu"}


def parse_markers(entries: list[str]) -> MarkerRegistry:
    """Build the registry from `markers = ["name: description", ...]` lines."""
    levels: set[str] = set()
    platforms: set[str] = set()
    gpu: set[str] = set()
    resources: dict[str, set[str]] = {}
    cards: set[int] = set()
    for entry in entries:
        name, _, description = entry.partition(":")
        name = name.strip()
        tags = set(_TAG.findall(description))
        if "ci-level" in tags:
            levels.add(name)
        if "hardware-platform" in tags:
            platforms.add(name)
            if "gpu" in tags:
                gpu.add(name)
        if "hardware-resource" in tags:
            resources[name] = tags - {"hardware-resource"}
        match = _CARDS.match(name)
        if "hardware-cards" in tags and match:
            cards.add(int(match.group(1)))
    skus: dict[str, str] = {}
    for sku, tags in resources.items():
        owners = sorted(tags & platforms)
        if owners:
            skus[sku] = owners[0]
    return MarkerRegistry(
        levels=frozenset(levels),
        platforms=frozenset(platforms),
        gpu_platforms=frozenset(gpu),
        skus=skus,
        card_counts=frozenset(cards),
    )


def _toml(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads(text)
    try:  # Python 3.10: the tomllib backport, when installed
        tomli = importlib.import_module("tomli")
    except ModuleNotFoundError:
        raise UserError(
            "reading pyproject.toml needs Python >= 3.11 or the tomli package"
        ) from None
    return cast(dict[str, Any], tomli.loads(text))


def load_registry(repo: Path) -> MarkerRegistry:
    """The registry of `<repo>/pyproject.toml`; fails closed (exit 2) naming the file."""
    path = repo / "pyproject.toml"
    try:
        data = _toml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(
            f"{path}: cannot read the pytest marker registry: {exc.strerror or exc}"
        ) from None
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise UserError(f"{path}: invalid TOML: {exc}") from None
    options = data.get("tool", {}).get("pytest", {}).get("ini_options", {})
    entries = options.get("markers", [])
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise UserError(f"{path}: [tool.pytest.ini_options].markers must be a list of strings")
    registry = parse_markers(entries)
    missing = [
        tag
        for tag, found in (
            ("[ci-level]", registry.levels),
            ("[hardware-platform]", registry.platforms),
            ("[hardware-resource]", registry.skus),
        )
        if not found
    ]
    if missing:
        raise UserError(
            f"{path}: no pytest markers tagged {', '.join(missing)} in "
            "[tool.pytest.ini_options].markers; check-marks reads the registry from these tags"
        )
    return registry
