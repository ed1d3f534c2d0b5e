"""Every pipeline we emit, checked against Buildkite's pipeline schema first.

The old uploaders sent whatever they rendered, and Buildkite rejected a bad
pipeline only after the upload; checking first makes it an exit-1 line naming
the field. The schema is a packaged copy of Buildkite's (byte-equal, tested).

One step at a time, for two reasons. Speed: jsonschema tries every step
against each of the fourteen step types of the step list's `anyOf`, and a plan
renders hundreds of steps. Yet a command, group, wait, block, input or trigger
step is a plain object definition (`properties`, `additionalProperties:
false`, `required`), so it is valid exactly when its keys are allowed and each
value is valid on its own; values repeat (agents, plugins, retry, env), so
each distinct one is checked by jsonschema once and remembered. A step this
shortcut cannot accept is checked by jsonschema against the list's real
`items`, so the verdict is always jsonschema's. Messages: under `anyOf` one
bad field reads "<the whole group> is not valid under any of the given
schemas"; an invalid step is validated again against the definition its shape
selects (a `group` is a group step, `trigger` a trigger step, ..., otherwise a
command step), children of groups one by one, so the line names the field:
`steps/0/steps/5/timeout_in_minutes: 'soon' is not of type 'integer'`.

jsonschema is imported only when a check runs (start-up matters).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any, Final

SCHEMA_FILE = "buildkite-pipeline.schema.json"
MAX_MESSAGE = 160
_KINDS: Final = (
    ("group", "groupStep"),
    ("trigger", "triggerStep"),
    ("block", "blockStep"),
    ("input", "inputStep"),
    ("wait", "waitStep"),
)
_STEP_LISTS: Final = ("pipelineSteps", "groupSteps")
_ANNOTATIONS: Final = frozenset({"description", "title", "examples", "deprecated", "$comment"})
_OBJECT_KEYS: Final = frozenset({"type", "properties", "additionalProperties", "required"})
_MEMO: dict[tuple[str, str, str], bool] = {}


def schema_text() -> bytes:
    return resources.files("ci").joinpath("data").joinpath(SCHEMA_FILE).read_bytes()


def clear_cache() -> None:
    """Forget remembered values (benchmarks measure a cold plan)."""
    _MEMO.clear()


@cache
def _schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(schema_text())
    return loaded


def _node(pointer: str) -> Any:
    """The schema at `#/definitions/...`, following `$ref`s (draft-07 ignores their siblings)."""
    seen: set[str] = set()
    node: Any = {"$ref": pointer}
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        target = node["$ref"]
        if target in seen or not target.startswith("#/"):
            break
        seen.add(target)
        node = _schema()
        for part in target.removeprefix("#/").split("/"):
            node = node[part]
    return node


@cache
def _validator(pointer: str = "") -> Any:
    """The jsonschema validator of one place in the schema (`#/definitions/...`; "" is all)."""
    import jsonschema  # type: ignore[import-untyped]

    full = _schema()
    cls = jsonschema.validators.validator_for(full)
    if not pointer:
        return cls(full)
    node = _node(pointer)
    if isinstance(node, dict) and "definitions" not in node and "$ref" not in node:
        # The place itself is the root: one `$ref` lookup less on every check.
        return cls({**node, "definitions": full["definitions"]})
    return cls({"$ref": pointer, "definitions": full["definitions"]})


def validator() -> Any:
    """The validator of the whole packaged schema, for callers that walk the error tree."""
    return _validator()


# --------------------------------------------------------------------------- the verdict


@cache
def _plain_object(name: str) -> bool:
    """True when definition `name` is only properties / additionalProperties false / required."""
    definition = _schema()["definitions"].get(name)
    if not isinstance(definition, dict):
        return False
    return (
        set(definition) - _ANNOTATIONS <= _OBJECT_KEYS
        and definition.get("type") == "object"
        and definition.get("additionalProperties") is False
        and isinstance(definition.get("properties"), dict)
    )


@cache
def _alternatives(step_list: str) -> tuple[str, ...]:
    """Names of the step types a step list's `items.anyOf` allows."""
    items = _schema()["definitions"][step_list].get("items", {})
    refs = [alt.get("$ref", "") for alt in items.get("anyOf", []) if isinstance(alt, dict)]
    return tuple(ref.rsplit("/", 1)[-1] for ref in refs if ref.startswith("#/definitions/"))


@cache
def _plain_string(pointer: str) -> bool:
    """True when the place is just `{"type": "string"}` (labels, `if`s): isinstance decides."""
    node = _node(pointer)
    return (
        isinstance(node, dict) and set(node) - _ANNOTATIONS == {"type"} and node["type"] == "string"
    )


def _value_ok(name: str, key: str, value: Any) -> bool:
    pointer = f"#/definitions/{name}/properties/{key}"
    if _plain_string(pointer):
        return isinstance(value, str)  # jsonschema's own "string" check
    # `repr` with the type tells list from tuple, 1 from "1" from 1.0 from True.
    memo = (name, key, f"{type(value).__name__}:{value!r}")
    found = _MEMO.get(memo)
    if found is None:
        found = _MEMO[memo] = bool(_validator(pointer).is_valid(value))
    return found


def _object_ok(name: str, instance: dict[Any, Any]) -> bool:
    """Fast accept: True only if `instance` is valid against definition `name`."""
    if not _plain_object(name):
        return False
    definition = _schema()["definitions"][name]
    properties = definition["properties"]
    if not set(definition.get("required", ())) <= instance.keys():
        return False
    for key, value in instance.items():
        rule = properties.get(key) if isinstance(key, str) else None
        if rule is None:
            return False
        target = rule.get("$ref", "").rsplit("/", 1)[-1] if isinstance(rule, dict) else ""
        if target in _STEP_LISTS and set(rule) == {"$ref"}:
            if not _steps_ok(target, value):
                return False
        elif not _value_ok(name, key, value):
            return False
    return True


def _steps_ok(step_list: str, steps: Any) -> bool:
    """Exact: is `steps` valid against the step list definition `step_list`?"""
    definition = _schema()["definitions"][step_list]
    if not isinstance(steps, list) or set(definition) - _ANNOTATIONS - {"minItems"} != {
        "type",
        "items",
    }:
        return bool(_validator(f"#/definitions/{step_list}").is_valid(steps))
    return len(steps) >= definition.get("minItems", 0) and all(
        _step_ok(step, step_list) for step in steps
    )


def _kind(step: dict[Any, Any]) -> str:
    for key, definition in _KINDS:
        if key in step:
            return definition
    return "commandStep"


def _step_ok(step: Any, step_list: str) -> bool:
    """jsonschema's verdict on one item of `step_list`, without `anyOf` for a plain step."""
    if isinstance(step, dict):
        kind = _kind(step)
        if kind in _alternatives(step_list) and _object_ok(kind, step):
            return True
    return bool(_validator(f"#/definitions/{step_list}/items").is_valid(step))


# --------------------------------------------------------------------------- the messages


def _format(path: list[Any], message: str) -> str:
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return f"{'/'.join(str(p) for p in path) or '<root>'}: {message}"


def _against(definition: str, instance: Any, path: list[Any]) -> list[str]:
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

    found = []
    for error in _validator(f"#/definitions/{definition}").iter_errors(instance):
        best = best_match([error])
        found.append(_format([*path, *best.absolute_path], best.message))
    return found


def _messages(step: Any, path: list[Any]) -> list[str]:
    """Why an invalid step is invalid, said at its fields (may be empty: see schema_problems)."""
    if not isinstance(step, dict):
        return [_format(path, f"{step!r} is not a valid step")]
    kind = _kind(step)
    children = step.get("steps") if kind == "groupStep" else None
    if not isinstance(children, list) or not children:
        return _against(kind, step, path)
    found = _against(kind, {**step, "steps": [{"command": "true"}]}, path)
    for i, child in enumerate(children):
        if not _step_ok(child, "groupSteps"):
            found += _messages(child, [*path, "steps", i])
    return found


def schema_problems(pipeline: Any) -> list[str]:
    """One `path: message` line per problem (empty exactly when jsonschema accepts it)."""
    steps = pipeline.get("steps") if isinstance(pipeline, dict) else None
    rest = {**pipeline, "steps": []} if isinstance(steps, list) else pipeline
    errors = _validator().iter_errors(rest)  # quick: the steps are checked one by one below
    found = dict.fromkeys(_format(list(e.absolute_path), e.message) for e in errors)
    invalid = bool(found)
    for i, step in enumerate(steps if isinstance(steps, list) else ()):
        if not _step_ok(step, "pipelineSteps"):
            invalid = True
            found.update(dict.fromkeys(_messages(step, ["steps", i])))
    if invalid and not found:  # the per-step view missed it (a group in a group): jsonschema's own
        errors = sorted(_validator().iter_errors(pipeline), key=lambda e: list(e.absolute_path))
        return [
            f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors
        ]
    return list(found)


def require_valid(pipeline: Any, source: str) -> None:
    """Stop (exit 1) with one line per problem: what every upload checks before it leaves."""
    from ci.errors import FAILURE, UserError

    UserError.collect(
        (
            f"{source}: rendered pipeline fails the Buildkite schema at {p}"
            for p in schema_problems(pipeline)
        ),
        code=FAILURE,
    )
