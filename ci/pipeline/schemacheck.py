"""Schema problems of a rendered pipeline, said at the field that causes them.

Buildkite's schema describes a step as `anyOf` many step types, so a plain
validation error on one bad field reads "<the whole group> is not valid under
any of the given schemas". We validate each step against the definition its
shape selects (a `group` is a group step, `command`/`commands` a command
step, ...), children of groups one by one, so the message names the field:
`steps/0/steps/5/timeout_in_minutes: 'soon' is not of type 'integer'`.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

MAX_MESSAGE = 160
_KINDS = (
    ("group", "groupStep"),
    ("trigger", "triggerStep"),
    ("block", "blockStep"),
    ("input", "inputStep"),
    ("wait", "waitStep"),
)


def _kind(step: dict[str, Any]) -> str:
    for key, definition in _KINDS:
        if key in step:
            return definition
    return "commandStep"


@cache
def _definition_validator(definition: str) -> Any:
    import jsonschema  # type: ignore[import-untyped]

    from ci.schema import schema_text

    full = json.loads(schema_text())
    schema = {"$ref": f"#/definitions/{definition}", "definitions": full["definitions"]}
    return jsonschema.validators.validator_for(full)(schema)


def _format(path: list[Any], message: str) -> str:
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return f"{'/'.join(str(p) for p in path) or '<root>'}: {message}"


def _against(definition: str, instance: Any, path: list[Any]) -> list[str]:
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

    found = []
    for error in _definition_validator(definition).iter_errors(instance):
        best = best_match([error])
        found.append(_format([*path, *best.absolute_path], best.message))
    return found


def _step(step: Any, path: list[Any]) -> list[str]:
    from ci.schema import pipeline_errors

    if not isinstance(step, dict):
        if pipeline_errors({"steps": [step]}):
            return [_format(path, f"{step!r} is not a valid step")]
        return []
    kind = _kind(step)
    children = step.get("steps") if kind == "groupStep" else None
    if isinstance(children, list) and children:
        shallow = {**step, "steps": [{"command": "true"}]}
        found = _against(kind, shallow, path)
        for i, child in enumerate(children):
            found += _step(child, [*path, "steps", i])
        return found
    return _against(kind, step, path)


def schema_problems(pipeline: Any) -> list[str]:
    """One `path: message` line per problem (empty when the pipeline is valid)."""
    from ci.schema import pipeline_errors, validator

    if not pipeline_errors(pipeline):
        return []
    found: dict[str, None] = {}
    steps = pipeline.get("steps") if isinstance(pipeline, dict) else None
    for error in validator().iter_errors(pipeline):
        where = list(error.absolute_path)
        if isinstance(steps, list) and len(where) >= 2 and where[0] == "steps":
            continue  # said per step below
        found.setdefault(_format(where, error.message), None)
    if isinstance(steps, list):
        for i, step in enumerate(steps):
            found.update(dict.fromkeys(_step(step, ["steps", i])))
    if not found:  # the per-step view missed it: fall back to the raw errors
        found.update(dict.fromkeys(pipeline_errors(pipeline)))
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
