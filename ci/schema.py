"""Every pipeline we emit, checked first against Buildkite's schema (a packaged copy).

A bad pipeline is an exit-1 line naming the field, not a rejection after upload.
For speed, a plain step (command, group, wait, block, input, trigger) is valid
exactly when its keys are allowed and each value is: checked key by key, each
distinct value once; a step this cannot accept goes to jsonschema, whose
verdict is final. An invalid step is validated again against the definition
its shape selects, so the line names the field:
`steps/0/steps/5/timeout_in_minutes: 'soon' is not of type 'integer'`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any, Final

from ci.errors import Failure

SCHEMA_FILE = "buildkite-pipeline.schema.json"
MAX_MESSAGE = 160
# A step's kind is the first of these keys it has (`groupStep`...), else `commandStep`.
_KINDS: Final = tuple((key, f"{key}Step") for key in ("group", "trigger", "block", "input", "wait"))
_STEP_LISTS: Final = ("pipelineSteps", "groupSteps")
_ANNOTATIONS: Final = frozenset({"description", "title", "examples", "deprecated", "$comment"})
_MEMO: dict[tuple[str, str, str], bool] = {}


def schema_text() -> bytes:
    return resources.files("ci").joinpath("data").joinpath(SCHEMA_FILE).read_bytes()


def clear_cache() -> None:
    """Forget remembered values (benchmarks measure a cold plan)."""
    _MEMO.clear()


@cache
def _schema() -> dict[str, Any]:
    return json.loads(schema_text())  # type: ignore[no-any-return]


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
def validator(pointer: str = "") -> Any:
    """The jsonschema validator of a place in the schema (`#/definitions/...`; "" is all)."""
    import jsonschema  # type: ignore[import-untyped]

    full = _schema()
    cls = jsonschema.validators.validator_for(full)
    # The place itself is the root: one `$ref` lookup less on every check.
    return cls({**_node(pointer), "definitions": full["definitions"]} if pointer else full)


@cache
def _alternatives(step_list: str) -> tuple[str, ...]:
    """Names of the step types a step list's `items.anyOf` allows."""
    items = _schema()["definitions"][step_list].get("items", {})
    refs = [alt.get("$ref", "") for alt in items.get("anyOf", []) if isinstance(alt, dict)]
    return tuple(ref.rsplit("/", 1)[-1] for ref in refs if ref.startswith("#/definitions/"))


# Types whose jsonschema check is a plain isinstance (not "integer": 1.0 is one, True is not).
_TYPES: Final[dict[str, type]] = {"string": str, "object": dict, "array": list, "null": type(None)}


def _predicate(node: Any) -> Callable[[Any], bool] | None:
    """A Python test equal to jsonschema's for the common shapes (`type` of the types above,
    arrays and `anyOf` of them), else None: such values rarely repeat, a memo would not help."""
    if not isinstance(node, dict):
        return None
    keys = set(node) - _ANNOTATIONS
    names = node.get("type")
    names = names if isinstance(names, list) else [names]
    if keys == {"type"} and all(name in _TYPES for name in names):
        kinds = tuple(_TYPES[name] for name in names)
        return lambda value: isinstance(value, kinds)
    if keys == {"type", "items"} and names == ["array"] and (item := _predicate(node["items"])):
        return lambda value: isinstance(value, list) and all(item(v) for v in value)
    if keys == {"anyOf"} and isinstance(node["anyOf"], list):
        options = [check for option in node["anyOf"] if (check := _predicate(option))]
        if len(options) == len(node["anyOf"]):
            return lambda value: any(option(value) for option in options)
    return None


@cache
def _quick(pointer: str) -> Callable[[Any], bool] | None:
    return _predicate(_node(pointer))


def _value_ok(name: str, key: str, value: Any) -> bool:
    pointer = f"#/definitions/{name}/properties/{key}"
    quick = _quick(pointer)
    if quick is not None:
        return quick(value)
    # `repr` with the type tells list from tuple, 1 from "1" from 1.0 from True.
    memo = (name, key, f"{type(value).__name__}:{value!r}")
    found = _MEMO.get(memo)
    if found is None:
        found = _MEMO[memo] = bool(validator(pointer).is_valid(value))
    return found


def _object_ok(name: str, instance: dict[Any, Any]) -> bool:
    """Is `instance` valid against step definition `name`? Each of them in the packaged schema
    is an object of `properties`, `additionalProperties: false` and perhaps `required`."""
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
    """Is `steps` valid against the step list definition `step_list` (an array of items)?"""
    least = _schema()["definitions"][step_list].get("minItems", 0)
    return (
        isinstance(steps, list)
        and len(steps) >= least
        and all(_step_ok(s, step_list) for s in steps)
    )


def _kind(step: dict[Any, Any]) -> str:
    return next((definition for key, definition in _KINDS if key in step), "commandStep")


def _step_ok(step: Any, step_list: str) -> bool:
    """jsonschema's verdict on one item of `step_list`, without `anyOf` for a plain step."""
    if isinstance(step, dict):
        kind = _kind(step)
        if kind in _alternatives(step_list) and _object_ok(kind, step):
            return True
    return bool(validator(f"#/definitions/{step_list}/items").is_valid(step))


def _format(path: list[Any], message: str) -> str:
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return f"{'/'.join(str(p) for p in path) or '<root>'}: {message}"


def _against(definition: str, instance: Any, path: list[Any]) -> list[str]:
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

    errors = validator(f"#/definitions/{definition}").iter_errors(instance)
    best = [best_match([error]) for error in errors]
    return [_format([*path, *b.absolute_path], b.message) for b in best]


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
    errors = validator().iter_errors(rest)  # quick: the steps are checked one by one below
    found = dict.fromkeys(_format(list(e.absolute_path), e.message) for e in errors)
    invalid = bool(found)
    for i, step in enumerate(steps if isinstance(steps, list) else ()):
        if not _step_ok(step, "pipelineSteps"):
            invalid = True
            found.update(dict.fromkeys(_messages(step, ["steps", i])))
    if invalid and not found:  # the per-step view missed it (a group in a group): jsonschema's own
        errors = sorted(validator().iter_errors(pipeline), key=lambda e: list(e.absolute_path))
        return [
            f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors
        ]
    return list(found)


def require_valid(pipeline: Any, source: str) -> None:
    """Stop (exit 1) with one line per problem: what every upload checks before it leaves."""
    Failure.collect(
        (
            f"{source}: rendered pipeline fails the Buildkite schema at {p}"
            for p in schema_problems(pipeline)
        ),
    )
