"""Is this `.buildkite/` file acceptable to the task that consumes it? One answer for every gate.

`file_problems` applies the consumers' own checks, so no gate passes a file they refuse:

* AMD suite YAMLs (`amd/test-*.yml`): the AMD bootstrap's `ci.amd.combine.load_suite`;
* the uploader's test YAMLs (`<dir>/test-*.yml`): `ci.pipeline.upload.load_test_yaml`;
* every other pipeline: what Buildkite's upload takes, at least one document,
  each a mapping (with a `steps` list, when it has `steps`) or a list of steps;
* every step, everywhere: `command`/`commands` as `ci.pipeline.commands` wants.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ci.amd.combine import load_suite
from ci.amd.suites import SUITES, Suite
from ci.errors import UserError
from ci.pipeline import commands
from ci.pipeline.upload import load_test_yaml

NOT_A_PIPELINE = "not a pipeline (a mapping with `steps`, or a list of steps)"


def is_amd_suite(rel: str) -> bool:
    """`.buildkite/amd/test-*.yml`: data of the AMD bootstrap's template, not an upload YAML."""
    parts = rel.split("/")
    return len(parts) >= 2 and parts[-2] == "amd" and parts[-1].startswith("test-")


def is_uploader_test_yaml(rel: str) -> bool:
    """`.buildkite/<dir>/test-*.yml` outside amd/: what `upload-pipeline` renders."""
    parts = rel.split("/")
    return (
        len(parts) == 3
        and parts[0] == ".buildkite"
        and parts[1] != "amd"
        and parts[2].startswith("test-")
        and parts[2].endswith(".yml")
    )


def _refusal(load: Callable[[], object]) -> list[str]:
    """What a consumer's loader says about the file ([] when it loads it)."""
    try:
        load()
    except UserError as exc:
        return list(exc.problems)
    return []


def _amd_suite(path: Path) -> Suite:
    return next(
        (s for s in SUITES if s.file == path.name), Suite(path.stem, path.stem, path.name, "", None)
    )


def file_problems(rel: str, path: Path, documents: Sequence[Any]) -> list[str]:
    """The consumer's problems with one parsed file (`documents`: its non-empty documents).

    Lines name `rel` (the AMD bootstrap's own lines name the path it read).
    """
    if is_amd_suite(rel):
        found = _refusal(lambda: load_suite(path.parent, _amd_suite(path)))
    elif is_uploader_test_yaml(rel):
        found = _refusal(lambda: load_test_yaml(path))
    else:
        found = [] if documents else [f"{rel}: empty, {NOT_A_PIPELINE}"]
    if found:
        return found
    problems: list[str] = []
    for document in documents:
        steps = document if isinstance(document, list) else None
        if isinstance(document, Mapping):
            steps = document.get("steps")
            if steps is not None and not isinstance(steps, list):
                problems.append(f"{rel}: `steps` must be a list, got {type(steps).__name__}")
            steps = steps if isinstance(steps, list) else []
        if steps is None:
            problems.append(f"{rel}: {NOT_A_PIPELINE}, got {type(document).__name__}")
        else:
            problems += commands.all_problems(steps, rel)
    return problems
