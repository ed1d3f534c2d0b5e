"""The checks of a step's own fields that every consumer of a pipeline makes alike.

`command`/`commands` (`ci.pipeline.commands`) and the whole numbers
(`ci.pipeline.numbers`: `parallelism`, `timeout_in_minutes`, retry limits): the
uploader's render, lint-pipelines, the gates' judge (`ci.pipeline.judge`), the AMD
suite loader and the tiers all ask here, so a file one refuses every other refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ci.pipeline import commands, model, numbers


def problems(step: Mapping[str, Any], source: str = "") -> list[str]:
    """What is wrong with one step's (or group's) own fields, one line each."""
    return commands.problems(step, source) + numbers.problems(step, source)


def all_problems(steps: Iterable[Any], source: str = "") -> list[str]:
    """`problems` of every step of a `steps` list, group children included."""
    return _every(model.nodes(steps), source)


def document_problems(document: Any, source: str = "") -> list[str]:
    """`problems` of every step of a parsed pipeline document (a mapping or a bare list)."""
    return _every(model.parse(document).steps or (), source)


def _every(entries: Iterable[model.Node], source: str) -> list[str]:
    return [p for entry in model.every(entries) for p in problems(entry.fields, source)]
