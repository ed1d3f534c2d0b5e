"""Hardware marks derived from the marker registry in pyproject.toml.

Why a helper instead of direct marks: as in vLLM-Omni, a test names the
platform and SKU it needs once, through `hardware_test(res=..., num_cards=...)`,
and the helper adds every mark CI selects on (platform, `gpu`, SKU, `cards_<n>`)
plus a skip when that hardware is absent. The SKU and card lists come from the
tags in the marker descriptions, so the registry is the only list.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import pytest
from omni_sample import detect_accelerator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
_TAG = re.compile(r"\[([A-Za-z0-9_-]+)\]")
_CARDS = re.compile(r"^cards_(\d+)$")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Registry:
    levels: tuple[str, ...]
    platforms: tuple[str, ...]
    gpu_platforms: tuple[str, ...]
    skus: Mapping[str, tuple[str, ...]]
    cards: tuple[int, ...]


@cache
def registry(pyproject: Path = PYPROJECT) -> Registry:
    """Parse `[tool.pytest.ini_options].markers` and group markers by their tags."""
    markers = tomllib.loads(pyproject.read_text())["tool"]["pytest"]["ini_options"]["markers"]
    levels: list[str] = []
    platforms: list[str] = []
    gpu_platforms: list[str] = []
    skus: dict[str, list[str]] = {}
    cards: list[int] = []
    for line in markers:
        name, _, description = line.partition(":")
        name = name.strip()
        tags = _TAG.findall(description)
        if "ci-level" in tags:
            levels.append(name)
        if "hardware-platform" in tags:
            platforms.append(name)
            if "gpu" in tags:
                gpu_platforms.append(name)
        if "hardware-resource" in tags:
            for tag in tags:
                if tag != "hardware-resource":
                    skus.setdefault(tag, []).append(name)
        if "hardware-cards" in tags and (match := _CARDS.match(name)):
            cards.append(int(match.group(1)))
    return Registry(
        levels=tuple(levels),
        platforms=tuple(platforms),
        gpu_platforms=tuple(gpu_platforms),
        skus={platform: tuple(names) for platform, names in skus.items()},
        cards=tuple(sorted(cards)),
    )


def hardware_marks(
    *, res: Mapping[str, str | Sequence[str]], num_cards: int = 1
) -> list[pytest.MarkDecorator]:
    """The marks for a test that needs `num_cards` cards of one of the `res` SKUs."""
    reg = registry()
    if not res:
        raise ValueError("hardware_marks needs at least one platform in res=")
    if num_cards not in reg.cards:
        supported = ", ".join(f"cards_{n}" for n in reg.cards)
        raise ValueError(f"cards_{num_cards} is not registered; supported: {supported}")
    marks: list[pytest.MarkDecorator] = []
    for platform, wanted in res.items():
        if platform in ("cpu", "gpu") or platform not in reg.skus:
            known = ", ".join(sorted(reg.skus))
            raise ValueError(f"res key {platform!r} is not a platform with SKUs; known: {known}")
        if isinstance(wanted, str):
            names = [wanted]
        elif platform == "cuda":
            names = list(wanted)
        else:
            raise ValueError(f"only cuda takes a list of SKUs, got {wanted!r} for {platform}")
        for sku in names:
            if sku not in reg.skus[platform]:
                known = reg.skus[platform]
                raise ValueError(f"{sku!r} is not a registered {platform} SKU: {known}")
        marks.append(getattr(pytest.mark, platform))
        if platform in reg.gpu_platforms:
            marks.append(pytest.mark.gpu)
        marks.extend(getattr(pytest.mark, sku) for sku in names)
    marks.append(getattr(pytest.mark, f"cards_{num_cards}"))
    present = detect_accelerator()
    platforms = sorted(res)
    marks.append(
        pytest.mark.skipif(
            present not in res,
            reason=f"needs {num_cards} {'/'.join(platforms)} card(s); found {present or 'none'}",
        )
    )
    return marks


def hardware_test(
    *, res: Mapping[str, str | Sequence[str]], num_cards: int = 1
) -> Callable[[F], F]:
    """Decorator form of `hardware_marks`."""
    marks = hardware_marks(res=res, num_cards=num_cards)

    def decorate(func: F) -> F:
        for mark in reversed(marks):
            func = mark(func)
        return func

    return decorate
