"""Validation of every pipeline we emit against Buildkite's official schema.

The old uploaders sent whatever they rendered, and Buildkite rejected a bad
pipeline only after the upload; checking first makes it an exit-1 line naming
the field. The schema is a packaged copy of Buildkite's (byte-equal, tested);
`ci.schemafast` gives the same verdict for valid pipelines without the cost of
jsonschema trying every step type on every step.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from ci.errors import UserError

SCHEMA_FILE = "buildkite-pipeline.schema.json"


def schema_text() -> bytes:
    return resources.files("ci").joinpath("data").joinpath(SCHEMA_FILE).read_bytes()


@cache
def _validator() -> Any:
    import jsonschema  # type: ignore[import-untyped]

    schema = json.loads(schema_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def validator() -> Any:
    """The cached validator of the packaged schema, for callers that walk the error tree."""
    return _validator()


def pipeline_errors(pipeline: Any) -> list[str]:
    """Every schema violation, as `path: message` lines (empty when valid)."""
    from ci.schemafast import is_valid

    if is_valid(pipeline):  # the same verdict, without trying every step type on every step
        return []
    errors = sorted(_validator().iter_errors(pipeline), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors]


def validate_pipeline(pipeline: Any, *, source: str = "pipeline", code: int = 1) -> None:
    problems = pipeline_errors(pipeline)
    if problems:
        raise UserError(
            *(f"{source} fails the Buildkite schema at {p}" for p in problems[:20]), code=code
        )
