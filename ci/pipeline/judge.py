"""Is this `.buildkite/` file acceptable to the task that consumes it? One answer for every gate.

`file_problems` applies the consumers' own loaders (AMD suites: `load_suite`; test
YAMLs: `load_test_yaml`; anything else: what Buildkite's upload takes), so a gate
never passes a file its consumer refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ci.amd.combine import load_suite
from ci.amd.suites import SUITES, Suite
from ci.errors import TaskError
from ci.pipeline import stepshape
from ci.pipeline.upload import is_amd_suite, load_test_yaml

NOT_A_PIPELINE = "not a pipeline (a mapping with `steps`, or a list of steps)"


# A `test-*.yml` anywhere under .buildkite/ (the seed's `.buildkite/cuda/test-ready.yml`,
# an earlier layout's flat `.buildkite/test-ready.yml`) is what the uploader is handed;
# `amd/test-*` are the AMD bootstrap's suites, which upload-pipeline refuses.
TEST_YAML = re.compile(r"\.buildkite/(?:(?!amd/)[^/]+/)*test-[^/]*\.yml")


def is_uploader_test_yaml(rel: str) -> bool:
    """A repo-relative path `upload-pipeline` renders as a test pipeline (`TEST_YAML`), so
    every gate judges it by the uploader's loader and render, as the upload would."""
    return TEST_YAML.fullmatch(rel) is not None and not is_amd_suite(rel)


def _refusal(load: Callable[[], object]) -> list[str]:
    """What a consumer's loader says about the file ([] when it loads it)."""
    try:
        load()
    except TaskError as exc:
        return list(exc.problems)
    return []


def file_problems(rel: str, path: Path, documents: Sequence[Any]) -> list[str]:
    """The consumer's problems with one parsed file (`documents`: its non-empty documents)."""
    if is_amd_suite(rel):
        known = (s for s in SUITES if s.file == path.name)
        suite = next(known, Suite(path.stem, path.stem, path.name, "", None))
        found = _refusal(lambda: load_suite(path.parent, suite))
    elif is_uploader_test_yaml(rel):
        found = _refusal(lambda: load_test_yaml(path))
    else:
        found = [] if documents else [f"{rel}: empty, {NOT_A_PIPELINE}"]
    if found:
        return found
    problems: list[str] = []
    for document in documents:  # none is None (empty documents are left out)
        steps = document.get("steps") if isinstance(document, Mapping) else document
        if steps is None or isinstance(steps, list):  # a mapping without `steps` has none
            problems += stepshape.all_problems(steps or [], rel)
        elif isinstance(document, Mapping):
            problems.append(f"{rel}: `steps` must be a list, got {type(steps).__name__}")
        else:
            problems.append(f"{rel}: {NOT_A_PIPELINE}, got {type(document).__name__}")
    return problems
