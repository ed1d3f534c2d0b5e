"""The builds `migrate --check` compares: situation x change x platform.

A situation is what Buildkite knows about a build (branch, PR number and labels,
schedule env); a change is the one commit the build tests, on top of main. Every
cell runs the old CI and the new CI on the same commit and situation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ci import topology, yamlio
from ci.pipeline.ifexpr import Context
from ci.pipeline.registries import SOURCE_REGISTRY as REGISTRY

PULL_REQUEST: Final = "4242"
TEST_YAML: Final = ".buildkite/cuda/test-ready.yml"


@dataclass(frozen=True)
class BuildCase:
    name: str
    branch: str
    labels: tuple[str, ...] = ()
    schedule: Mapping[str, str] = field(default_factory=dict)  # NIGHTLY=1, WEEKLY=1

    @property
    def pull_request(self) -> str:
        return PULL_REQUEST if self.branch != "main" else "false"

    def env(self) -> dict[str, str]:
        """The BUILDKITE_* variables and schedule flags every job of this build sees."""
        env = {
            "BUILDKITE": "true",
            "CI": "true",
            "BUILDKITE_BRANCH": self.branch,
            "BUILDKITE_PULL_REQUEST": self.pull_request,
            "BUILDKITE_PIPELINE_SLUG": "vllm-omni",
            **self.schedule,
        }
        if self.pull_request != "false":
            env["BUILDKITE_PULL_REQUEST_BASE_BRANCH"] = "main"
            env["BUILDKITE_PULL_REQUEST_LABELS"] = ",".join(self.labels)
        return env

    def context(self) -> Context:
        """What Buildkite evaluates an `if` against."""
        return Context.of(self.branch, self.labels, self.schedule)


_READY, _MERGE, _NIGHTLY = (
    topology.LABELS[t] for t in (topology.READY, topology.MERGE, topology.NIGHTLY)
)
SITUATIONS: Final = (
    BuildCase("pr", "feature"),
    BuildCase(f"pr {_READY}", "feature", (_READY,)),
    BuildCase(f"pr {_READY},{_MERGE}", "feature", (_READY, _MERGE)),
    BuildCase(f"pr {_NIGHTLY}", "feature", (_NIGHTLY,)),
    BuildCase("main", "main"),
    BuildCase("nightly", "main", schedule={topology.NIGHTLY_ENV: "1"}),
    BuildCase("weekly", "main", schedule={topology.WEEKLY_ENV: "1"}),
)


@dataclass(frozen=True)
class Change:
    """One kind of commit: `files` maps a path to the text appended to it (made if missing)."""

    name: str
    files: Mapping[str, str]


_TEST = "\n\ndef test_migrate_check() -> None:\n    assert True\n"
_COMMENT = "\n# migrate --check: a change to this file\n"


def changes(repo: Path) -> tuple[Change, ...]:
    """The five kinds of change, at paths of this checkout: docs only; one model's code
    (a file under the first model folder the source-dependency registry names); one test
    file (the registry's first test file); one test YAML; the registry itself."""
    model_dir, test_file = _registry_paths(repo / REGISTRY)
    return (
        Change("docs", {"docs/migrate-check.md": "A docs-only change.\n"}),
        Change("model code", {f"{model_dir}migrate_check.py": "VALUE = 1\n"}),
        Change("test file", {test_file: _TEST}),
        Change("test YAML", {TEST_YAML: _COMMENT}),
        Change("registry", {REGISTRY: _COMMENT}),
    )


def _registry_paths(registry: Path) -> tuple[str, str]:
    prefixes: list[str] = []
    if registry.is_file():
        document = yamlio.load(registry)
        _strings(document, prefixes)
    model = next((p for p in prefixes if p.startswith("vllm_omni/") and p.endswith("/")), None)
    test = next((p for p in prefixes if p.startswith("tests/") and p.endswith(".py")), None)
    return model or "vllm_omni/model_executor/models/", test or "tests/test_migrate_check.py"


def _strings(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)
