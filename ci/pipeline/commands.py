"""A step's `command` / `commands`: a string or a list of strings, and nothing else.

Buildkite's schema allows exactly that; every consumer reads the field here, so none
runs a mapping as shell text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ci.errors import Failure
from ci.pipeline import model

FIELDS = ("command", "commands")
# bool before int: a boolean is an int to isinstance.
_TYPES = ((bool, "a boolean"), ((int, float), "a number"), (dict, "a mapping"), (list, "a list"))


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _TYPES if isinstance(value, kind)), type(value).__name__)


def step_name(step: Mapping[str, Any]) -> str:
    """`'label'` (`model.name_of`), with `(key 'k')` when the step has a key too."""
    label, key = model.name_of(step, ""), step.get("key")
    if not label or label == key:
        return f"with key {key!r}" if label else "without label or key"
    return f"{label!r} (key {key!r})" if key else repr(label)


def problems(step: Mapping[str, Any], source: str = "") -> list[str]:
    """What is wrong with the step's `command`/`commands`, one line each ([] when fine)."""
    where = f"{source}: " if source else ""
    found: list[str] = []
    for field in FIELDS:
        value = step.get(field)
        if value is None or isinstance(value, str):
            continue
        head = f"{where}step {step_name(step)}: `{field}`"
        if not isinstance(value, list):
            found.append(f"{head} must be a string or a list of strings, got {_type(value)}")
            continue
        found += [
            f"{head} item {number} must be a string, got {_type(item)}"
            for number, item in enumerate(value, 1)
            if not isinstance(item, str)
        ]
    return found


def step_commands(step: Mapping[str, Any], source: str = "") -> tuple[str, ...]:
    """The step's commands as written (`()` when it has none), or one error per problem, exit 1."""
    Failure.collect(problems(step, source))
    return _written(step, "command")


def command_text(step: Mapping[str, Any]) -> str:
    """The commands unchecked, one per line: the uploader's scans (`-m` marks, the uploaded
    file) read any step, and there `commands` wins over `command` whenever it is written,
    even as null (the uploader read `step.get("commands", step.get("command"))`)."""
    chosen = {"commands": step["commands"]} if "commands" in step else step
    return "\n".join(_written(chosen, "commands"))


def _written(step: Mapping[str, Any], first: str) -> tuple[str, ...]:
    """`first`, else the other field (items as text, nulls skipped). The AMD template lets
    `command` win, the uploader `commands`; a step that sets both is the only difference."""
    for name in sorted(FIELDS, key=lambda f: f != first):
        if (value := step.get(name)) is not None:
            items = value if isinstance(value, list) else [value]
            return tuple(str(item) for item in items if item is not None)
    return ()
