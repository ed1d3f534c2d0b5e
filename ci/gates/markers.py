"""What `check-marks` needs from the target's marker registry.

vLLM-Omni hard-codes no SKU list: `tests/helpers/mark.py` groups the markers
registered in `pyproject.toml` by tags in their descriptions (`[ci-level]`,
`[hardware-platform]`, `[gpu]`, `[hardware-resource]` + `[<platform>]`,
`[hardware-cards]`). The registry itself is read by `ci.pipeline.markers`
(shared with the uploader); this module derives the sets the gate checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ci.errors import BAD_INPUT, UserError


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


def _sets(registry: object) -> MarkerRegistry:
    from ci.pipeline.markers import MarkerRegistry as Registry

    assert isinstance(registry, Registry)
    platforms = registry.tagged("hardware-platform")
    skus: dict[str, str] = {}
    for platform in platforms:
        for sku in registry.skus(platform):
            skus.setdefault(sku, platform)
    return MarkerRegistry(
        levels=frozenset(registry.tagged("ci-level")),
        platforms=frozenset(platforms),
        gpu_platforms=frozenset(registry.tagged("hardware-platform", "gpu")),
        skus=skus,
        card_counts=frozenset(registry.card_counts),
    )


def parse_markers(entries: list[str], source: str = "<markers>") -> MarkerRegistry:
    """The sets of `markers = ["name: description [tag]", ...]` lines."""
    from ci.pipeline.markers import parse_marker_lines

    return _sets(parse_marker_lines(list(entries), source))


def load_registry(repo: Path) -> MarkerRegistry:
    """The sets of `<repo>/pyproject.toml`; a missing or untagged registry exits 2."""
    from ci.pipeline.markers import load_markers

    try:
        found = _sets(load_markers(repo))
    except UserError as exc:  # the uploader's code is 1; for this gate it is bad input
        raise UserError(*exc.problems, code=BAD_INPUT) from None
    from ci.pipeline.files import realpath

    path = realpath(repo / "pyproject.toml")
    missing = [
        tag
        for tag, present in (
            ("[ci-level]", found.levels),
            ("[hardware-platform]", found.platforms),
            ("[hardware-resource]", found.skus),
        )
        if not present
    ]
    if missing:
        raise UserError(
            f"no pytest markers tagged {', '.join(missing)} in {path} "
            "([tool.pytest.ini_options].markers); check-marks reads the registry from these tags"
        )
    return found
