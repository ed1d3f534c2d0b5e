"""The packaged copy of Buildkite's pipeline schema, and its one cached validator.

Its own module so that `ci.schema` (error messages) and `ci.schemafast` (the
fast verdict that `ci.schema` asks first) can both read the schema without
importing each other.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

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
