"""A fast, exact "is this pipeline valid?" for the Buildkite schema.

jsonschema checks every step against each of the fourteen step types of the
schema's `anyOf`, so a plan that renders a few hundred steps spent most of
its time here. Yet a command or group step is a plain object definition
(`properties`, `additionalProperties: false`, `required`), so it is valid
exactly when its keys are allowed and each value is valid on its own, and
the values repeat (agents, plugins, retry, env): each distinct value is
checked once by jsonschema and remembered.

`is_valid` is exact both ways: a step this shortcut cannot accept is checked
by jsonschema against the step list's real `items` schema, so the verdict is
always jsonschema's. `ci.schema.pipeline_errors` asks it first and computes
the error messages only when it says no.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any, Final

from ci.schemafile import schema_text, validator

STEP_LISTS: Final = ("pipelineSteps", "groupSteps")
_ANNOTATIONS: Final = frozenset({"description", "title", "examples", "deprecated", "$comment"})
_OBJECT_KEYS: Final = frozenset({"type", "properties", "additionalProperties", "required"})
_MEMO: dict[tuple[str, str, str], bool] = {}


def clear_cache() -> None:
    """Forget remembered values (benchmarks measure a cold plan)."""
    _MEMO.clear()


@cache
def _schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(schema_text())
    return loaded


def _node(pointer: str) -> Any:
    """The schema at `#/definitions/...`, following `$ref`s (draft-07 ignores their siblings)."""
    node: Any = _schema()
    for part in pointer.removeprefix("#/").split("/"):
        node = node[part]
    seen = {pointer}
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
def _validator(pointer: str) -> Any:
    """The jsonschema validator of one place in the schema (`#/definitions/...`)."""
    import jsonschema  # type: ignore[import-untyped]

    full = _schema()
    cls = jsonschema.validators.validator_for(full)
    node = _node(pointer)
    if isinstance(node, dict) and "definitions" not in node and "$ref" not in node:
        # The place itself is the root: one `$ref` lookup less on every check.
        return cls({**node, "definitions": full["definitions"]})
    return cls({"$ref": pointer, "definitions": full["definitions"]})


@cache
def _plain_object(name: str) -> bool:
    """True when definition `name` is only properties / additionalProperties false / required."""
    definition = _schema()["definitions"].get(name)
    if not isinstance(definition, dict):
        return False
    keys = set(definition) - _ANNOTATIONS
    return (
        keys <= _OBJECT_KEYS
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


def _frozen(value: Any) -> str:
    """The memo key of a value: `repr` tells list from tuple, 1 from "1" from 1.0 from True."""
    return f"{type(value).__name__}:{value!r}"


@cache
def _plain_string(pointer: str) -> bool:
    """True when the place is just `{"type": "string"}` (labels, `if`s): isinstance decides."""
    node = _node(pointer)
    return (
        isinstance(node, dict)
        and set(node) - _ANNOTATIONS == {"type"}
        and (node["type"] == "string")
    )


def _value_ok(name: str, key: str, value: Any) -> bool:
    if _plain_string(f"#/definitions/{name}/properties/{key}"):
        return isinstance(value, str)  # jsonschema's own "string" check
    memo = (name, key, _frozen(value))
    found = _MEMO.get(memo)
    if found is None:
        found = bool(_validator(f"#/definitions/{name}/properties/{key}").is_valid(value))
        _MEMO[memo] = found
    return found


def _object_ok(name: str, instance: Any) -> bool:
    """Fast accept: True only if `instance` is valid against definition `name`."""
    if not _plain_object(name) or not isinstance(instance, dict):
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
        if target in STEP_LISTS and set(rule) == {"$ref"}:
            if not _steps_ok(target, value):
                return False
        elif not _value_ok(name, key, value):
            return False
    return True


def _kind(step: Any) -> str:
    if isinstance(step, dict) and "group" in step:
        return "groupStep"
    return "commandStep"


def _steps_ok(step_list: str, steps: Any) -> bool:
    """Exact: is `steps` valid against the step list definition `step_list`?"""
    definition = _schema()["definitions"][step_list]
    shape = {"type", "items"} | ({"minItems"} if "minItems" in definition else set())
    if (
        not isinstance(steps, list)
        or definition.get("type") != "array"
        or set(definition) - _ANNOTATIONS != shape
    ):
        return bool(_validator(f"#/definitions/{step_list}").is_valid(steps))
    if len(steps) < definition.get("minItems", 0):
        return False
    allowed = _alternatives(step_list)
    items = _validator(f"#/definitions/{step_list}/items")
    for step in steps:
        kind = _kind(step)
        if kind in allowed and _object_ok(kind, step):
            continue
        if not items.is_valid(step):
            return False
    return True


def is_valid(pipeline: Any) -> bool:
    """jsonschema's verdict on the whole pipeline, computed step by step."""
    if not isinstance(pipeline, dict) or "steps" not in pipeline:
        return bool(validator().is_valid(pipeline))
    rule = _schema().get("properties", {}).get("steps")
    if rule != {"$ref": "#/definitions/pipelineSteps"}:
        return bool(validator().is_valid(pipeline))
    if not validator().is_valid({**pipeline, "steps": []}):
        return False
    return _steps_ok("pipelineSteps", pipeline["steps"])
