"""`mirror_hardwares`: turn a step's hardware preset into Buildkite fields.

A step names a preset (`mirror_hardwares: l4_1`), or its pytest `-m` expression
says which chip and how many cards it needs; the preset's fields replace the key.
`MIRROR_HW=b200` reroutes the CUDA jobs that can run on B200 and drops the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from ci.pipeline import model
from ci.pipeline.commands import command_text
from ci.pipeline.registries import PresetRegistry, Registries, fail

FIELD = "mirror_hardwares"
SELECTORS = ("b200",)
HF_EXPORT = 'if [ -n "$${VLLM_CI_HF_TOKEN:-}" ]; then export HF_TOKEN="$${VLLM_CI_HF_TOKEN}"; fi'
HF_SECRET_ENV = "VLLM_CI_HF_TOKEN"
_POOL_KEYS = ("agents", "plugins", "image")
_M_EXPR = re.compile(r"""-m\s+(?:"([^"]*)"|'([^']*)'|(\S+))""")
_NOT_BEFORE = re.compile(r"\bnot\s+$")


def parse_mirror_hw(value: str | None) -> str | None:
    """`MIRROR_HW`: empty/unset -> None, `b200` in any case/padding -> "b200", else an error."""
    selector = (value or "").strip().lower()
    if not selector:
        return None
    if selector not in SELECTORS:
        raise fail(f"unsupported MIRROR_HW={(value or '').strip()!r}; expected empty or 'b200'")
    return selector


def m_expressions(text: str) -> list[str]:
    """Every `-m EXPR` (double-, single-quoted or bare); `python -m pytest` yields `pytest`."""
    return [next(g for g in m.groups() if g is not None) for m in _M_EXPR.finditer(text)]


def polarities(expression: str, word: str) -> Iterable[bool]:
    """For each whole-word occurrence of `word`: True if positive, False if after `not `."""
    for match in re.finditer(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", expression):
        yield _NOT_BEFORE.search(expression, 0, match.start()) is None


Cards = int | Literal["max"] | None


@dataclass(frozen=True)
class MarkAsk:
    """What the `-m` expressions of one step ask for: chips, and cards (`max`: `not cards_*`)."""

    chips: frozenset[str] = frozenset()
    cards: Cards = None


@lru_cache(maxsize=16)  # asked for every step; the registries of one run do not change
def mirror_chips(cuda_skus: tuple[str, ...], preset_names: tuple[str, ...]) -> tuple[str, ...]:
    """Lower-cased CUDA SKUs that have a preset `<chip>` or `<chip>_...`, longest first."""
    chips = {
        sku.lower()
        for sku in cuda_skus
        if any(n == sku.lower() or n.startswith(sku.lower() + "_") for n in preset_names)
    }
    return tuple(sorted(chips, key=lambda c: (-len(c), c)))


def read_marks(
    expressions: Sequence[str], skus: Iterable[str], chips: Iterable[str], counts: Iterable[int]
) -> MarkAsk:
    """SKUs (case-sensitive whole words, not after `not `) and cards_<n> of every expression."""
    chip_set = set(chips)
    wanted = [sku for sku in skus if sku.lower() in chip_set]
    found = {sku.lower() for e in expressions for sku in wanted if any(polarities(e, sku))}
    seen = [(n, p) for e in expressions for n in counts for p in polarities(e, f"cards_{n}")]
    positive = [n for n, is_positive in seen if is_positive]
    negated = not all(is_positive for _, is_positive in seen)
    cards: Cards = max(positive) if positive else ("max" if negated else None)
    return MarkAsk(frozenset(found), cards)


@dataclass
class Expansion:
    """One leaf's outcome: the step to emit (None = dropped), why, and log lines."""

    step: model.Fields | None
    preset: str | None = None
    dropped: Literal["mirror-hw", "no-chip"] | None = None
    log: list[str] = field(default_factory=list)


def compose_preset(
    label: str, ask: MarkAsk, selector: str | None, presets: PresetRegistry, counts: Sequence[int]
) -> tuple[str | None, str]:
    """The preset `<chip>_<n>` for an inferred step, or (None, why it is dropped)."""
    chip = selector or next((c for c in ("h100", "l4") if c in ask.chips), None)
    if chip is None or chip not in ask.chips:
        why = f"MIRROR_HW={selector!r} not" if selector else "no H100 or L4"
        return None, f"skip {label}: {why} in -m SKUs [{', '.join(sorted(ask.chips))}]"
    if ask.cards is None:
        raise fail(
            f"step {label!r} has a pytest -m SKU marker but no cards_* (or not cards_*); "
            "add cards_n or set mirror_hardwares to force a preset"
        )
    if ask.cards == "max":
        available = [n for n in counts if f"{chip}_{n}" in presets.presets]
        if not available:
            raise fail(f"not cards_* in step {label!r} has no CUDA count presets for {chip}")
        name = f"{chip}_{max(available)}"
        return name, f"{label}: not cards_* → {name!r}"
    if ask.cards not in counts:
        supported = ", ".join(f"cards_{n}" for n in counts)
        raise fail(
            f"cards_{ask.cards} in step {label!r} is not a registered cards_* mark; "
            f"supported: {supported}"
        )
    name = f"{chip}_{ask.cards}"
    if name not in presets.presets:
        raise fail(f"cards_{ask.cards} in step {label!r} has no preset {name!r}")
    return name, f"{label}: cards_{ask.cards} → {name!r}"


def preset_name(value: Any, label: str) -> str:
    """The `mirror_hardwares` value as a preset name (strings and ints only)."""
    if isinstance(value, bool):
        raise fail(f"{FIELD} must not be a boolean in step {label!r}")
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str):
        raise fail(f"{FIELD} must be a preset string in step {label!r}")
    name = value.strip()
    if not name:
        raise fail(f"{FIELD} must be a non-empty string in step {label!r}")
    return name


def plain_copy(value: Any) -> Any:
    """Deep copy of YAML data, faster than `copy.deepcopy`; unshares anchors (no aliases)."""
    if isinstance(value, dict):
        return {k: plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_copy(v) for v in value]
    return value


def _mentions(value: Any, text: str) -> bool:
    if isinstance(value, dict):
        return any(_mentions(v, text) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, text) for v in value)
    return isinstance(value, str) and value == text


def apply_preset(step: Mapping[str, Any], preset: Mapping[str, Any]) -> model.Document:
    """The step without `mirror_hardwares`, overlaid with a copy of the preset (its own
    `retry` wins). CUDA presets carry the HF secret as VLLM_CI_HF_TOKEN: the job's
    first command then restores HF_TOKEN from it."""
    merged = {k: v for k, v in step.items() if k != FIELD}
    merged.update(plain_copy(dict(preset)))
    if _mentions(preset, HF_SECRET_ENV):
        commands = merged.get("commands")
        rest = commands if isinstance(commands, list) else [] if commands is None else [commands]
        merged["commands"] = [HF_EXPORT, *rest]
    if "retry" in step:
        merged["retry"] = step["retry"]
    return merged


def _has_pool(step: Mapping[str, Any]) -> bool:
    return any(step.get(k) is not None for k in _POOL_KEYS)


def expand(step: model.Fields, selector: str | None, registries: Registries) -> Expansion:
    """Expand one leaf step's hardware (raises `Failure` with the original's messages)."""
    label = model.name_of(step)
    if FIELD in step:
        return _expand_named(step, label, selector, registries)
    expressions = [] if _has_pool(step) else m_expressions(command_text(step))
    if not expressions:
        return Expansion(step)
    markers, presets = registries.markers(), registries.presets()
    skus, counts = markers.skus("cuda"), markers.card_counts
    ask = read_marks(expressions, skus, mirror_chips(skus, presets.names), counts)
    if not ask.chips and ask.cards is None:
        return Expansion(step)
    name, line = compose_preset(label, ask, selector, presets, counts)
    if name is None:
        return Expansion(None, dropped="mirror-hw" if selector else "no-chip", log=[line])
    return Expansion(apply_preset(step, presets.presets[name]), preset=name, log=[line])


def _expand_named(
    step: model.Fields, label: str, selector: str | None, registries: Registries
) -> Expansion:
    """A step that names its preset: the preset, or dropped when it is another chip's."""
    if _has_pool(step):
        raise fail(
            f"step {label!r} sets {FIELD} together with agents/plugins/image; use {FIELD} only"
        )
    name = preset_name(step[FIELD], label)
    presets = registries.presets()
    if selector is not None:
        chips = mirror_chips(registries.markers().skus("cuda"), presets.names)
        lowered = name.lower()
        chip = next((c for c in chips if lowered == c or lowered.startswith(c + "_")), None)
        if chip is not None and chip != selector:
            line = f"skip {label}: preset {name!r} is {chip} hardware; MIRROR_HW={selector!r}"
            return Expansion(None, dropped="mirror-hw", log=[line])
    return Expansion(apply_preset(step, known_preset(name, label, presets)), preset=name)


def known_preset(name: str, label: str, presets: PresetRegistry) -> Mapping[str, Any]:
    """The preset `name` (a step's `mirror_hardwares`), else the original's error."""
    if name not in presets.presets:
        raise fail(f"unknown {FIELD} {name!r} in step {label!r}; known: {', '.join(presets.names)}")
    return presets.presets[name]
