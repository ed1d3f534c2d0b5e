"""Validation of every pipeline we emit against Buildkite's official schema.

The old uploaders sent whatever they rendered, and Buildkite rejected a bad
pipeline only after the upload; checking first makes it an exit-1 line naming
the field. The schema is a packaged copy of Buildkite's (byte-equal, tested),
read by `ci.schemafile` (re-exported here: `schema_text`, `validator`);
`ci.schemafast` gives the same verdict for valid pipelines without the cost of
jsonschema trying every step type on every step.
"""

from __future__ import annotations

from typing import Any

from ci.errors import UserError
from ci.schemafast import is_valid
from ci.schemafile import schema_text as schema_text
from ci.schemafile import validator as validator


def pipeline_errors(pipeline: Any) -> list[str]:
    """Every schema violation, as `path: message` lines (empty when valid)."""
    if is_valid(pipeline):  # the same verdict, without trying every step type on every step
        return []
    errors = sorted(validator().iter_errors(pipeline), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors]


def validate_pipeline(pipeline: Any, *, source: str = "pipeline", code: int = 1) -> None:
    problems = pipeline_errors(pipeline)
    if problems:
        raise UserError(
            *(f"{source} fails the Buildkite schema at {p}" for p in problems[:20]), code=code
        )
