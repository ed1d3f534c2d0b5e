"""Is this `.buildkite/` file acceptable to the task that consumes it? One answer for every gate.

`lint-pipelines` and `shellcheck-steps` used to accept files their consumers
reject: an empty AMD suite YAML passed the linter, which the AMD bootstrap
refuses, and shellcheck-steps skipped a file that is no pipeline at all. Both
gates now ask `file_problems`, which applies the consumers' own checks:

* AMD suite YAMLs (`amd/test-*.yml`): the AMD bootstrap's loader,
  `ci.amd.combine.load_suite` (a mapping with a `steps` list, a mapping
  `env`, every entry a mapping);
* the uploader's test YAMLs (`<dir>/test-*.yml`): the uploader's loader,
  `ci.pipeline.upload.load_test_yaml` (one mapping document);
* every other pipeline: what Buildkite's upload (and our uploader) takes, at
  least one document, each a mapping (with a `steps` list, when it has
  `steps`) or a list of steps;
* every step, everywhere: `command`/`commands` as `ci.pipeline.commands` wants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ci.amd.combine import load_suite
from ci.amd.suites import SUITES, Suite
from ci.errors import UserError
from ci.pipeline import commands
from ci.pipeline.upload import load_test_yaml


def is_amd_suite(rel: str) -> bool:
    """`.buildkite/amd/test-*.yml`: data of the AMD bootstrap's template, not an upload YAML."""
    parts = rel.split("/")
    return len(parts) >= 2 and parts[-2] == "amd" and parts[-1].startswith("test-")


def amd_suite_problems(path: Path) -> list[str]:
    """What the AMD bootstrap says when it loads `path` as a suite ([] when it would load it)."""
    suite = next(
        (s for s in SUITES if s.file == path.name),
        Suite(path.stem, path.stem, path.name, "", None),
    )
    try:
        load_suite(path.parent, suite)
    except UserError as exc:
        return list(exc.problems)
    return []


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


def uploader_problems(path: Path) -> list[str]:
    """What `upload-pipeline` says when it loads `path` ([] when it would load it)."""
    try:
        load_test_yaml(path)
    except UserError as exc:
        return list(exc.problems)
    return []


def file_problems(rel: str, path: Path, documents: Sequence[Any]) -> list[str]:
    """The consumer's problems with one parsed file (`documents`: its non-empty documents).

    Lines name `rel` (the AMD bootstrap's own lines name the path it read).
    """
    if is_amd_suite(rel) or is_uploader_test_yaml(rel):
        found = amd_suite_problems(path) if is_amd_suite(rel) else uploader_problems(path)
        if found:
            return found
    elif not documents:
        return [f"{rel}: empty, not a pipeline (a mapping with `steps`, or a list of steps)"]
    problems: list[str] = []
    for document in documents:
        if isinstance(document, Mapping):
            steps = document.get("steps")
            if steps is not None and not isinstance(steps, list):
                problems.append(f"{rel}: `steps` must be a list, got {type(steps).__name__}")
            steps = steps if isinstance(steps, list) else []
        elif isinstance(document, list):
            steps = document
        else:
            problems.append(
                f"{rel}: not a pipeline (a mapping with `steps`, or a list of steps), "
                f"got {type(document).__name__}"
            )
            continue
        problems += commands.all_problems(steps, rel)
    return problems
