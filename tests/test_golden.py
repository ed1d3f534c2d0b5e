"""Golden pipelines: the exact YAML `bootstrap --dry-run` and `upload-pipeline --dry-run`
print today, for the builds that change it.

Each case runs the CLI on a git copy of examples/omni-sample and compares its
stdout, byte for byte, with tests/golden/<task>/<case>.yml, so a refactor that
changes a rendered pipeline fails here with a unified diff. When a change to the
output is meant, `pytest tests/test_golden.py --update-golden` rewrites the files
(review them in `git diff`). The env is built from nothing but PATH, HOME and the
case's values, so no variable of the machine or of an outer Buildkite job leaks in.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, SAMPLE
from tests.gitrepo import GitRepo, sample_checkout
from tests.inproc import run_task

GOLDEN = Path(__file__).parent / "golden"

# One branch off the pushed `main` per kind of change, appending the text to the
# file (docs: a new file); a main build diffs the same commit against its parent.
CHANGES: dict[str, tuple[str, str]] = {
    "code": ("omni_sample/model.py", "\nGOLDEN = 1\n"),
    "docs": ("docs/guide.md", "# Guide\n"),
    "engine-test": ("tests/engine/test_engine_gpu.py", "\n# touched\n"),
    "test-yaml": (".buildkite/cuda/test-ready.yml", "# touched\n"),
}


@dataclass(frozen=True)
class Case:
    """One CLI run: `task` is the golden folder, `build` is `pr` (PR #7 from
    `feature`) or `main` (a push), `change` a key of CHANGES."""

    name: str
    task: str
    args: tuple[str, ...]
    build: str
    change: str
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int = 0

    @property
    def golden(self) -> Path:
        return GOLDEN / self.task / f"{self.name}.yml"


def bootstrap(name: str, platform: str, build: str, change: str, *extra: str, **env: str) -> Case:
    args = ("bootstrap", "--platform", platform, "--dry-run", *extra)
    return Case(name, "bootstrap", args, build, change, env)


def upload(
    name: str, pipeline: str, scope: str, build: str, change: str, exit_code: int = 0, **env: str
) -> Case:
    args = ("upload-pipeline", f".buildkite/{pipeline}", "--dry-run", "--scope", scope)
    return Case(name, "upload", args, build, change, env, exit_code)


READY, MERGE = "cuda/test-ready.yml", "cuda/test-merge.yml"


CASES = (
    bootstrap("cuda-pr-code-change", "cuda", "pr", "code"),
    bootstrap("cuda-pr-docs-only", "cuda", "pr", "docs"),
    bootstrap("cuda-pr-test-yaml-change", "cuda", "pr", "test-yaml"),
    # The sample has no CUDA nightly tier: NIGHTLY changes no gate, and this pins that.
    bootstrap("cuda-main-nightly", "cuda", "main", "code", NIGHTLY="1"),
    bootstrap("npu-pr-code-change", "npu", "pr", "code"),
    bootstrap("npu-pr-docs-only", "npu", "pr", "docs"),
    bootstrap("npu-main-push", "npu", "main", "code"),
    bootstrap("xpu-pr-code-change", "xpu", "pr", "code"),
    bootstrap("xpu-pr-docs-only", "xpu", "pr", "docs"),
    bootstrap("rocm-pr-ready-merge-labels", "rocm", "pr", "code", "--labels", "ready,merge-test"),
    # No label: the script's fallback, the ready suite.
    bootstrap("rocm-pr-no-labels", "rocm", "pr", "code", BUILDKITE_PULL_REQUEST_LABELS=""),
    bootstrap("rocm-pr-docs-only", "rocm", "pr", "docs", BUILDKITE_PULL_REQUEST_LABELS="ready"),
    bootstrap("rocm-main-push", "rocm", "main", "code"),
    bootstrap("rocm-main-nightly", "rocm", "main", "code", NIGHTLY="1"),
    upload("cuda-ready-pr-code-diff", READY, "diff", "pr", "code"),
    upload("cuda-ready-pr-engine-test-diff", READY, "diff", "pr", "engine-test"),
    upload("cuda-ready-pr-docs-diff", READY, "diff", "pr", "docs"),
    upload("cuda-ready-pr-docs-all", READY, "all", "pr", "docs"),
    upload("cuda-ready-pr-e2e", READY, "e2e", "pr", "code"),
    upload("cuda-ready-main-weekly-auto", READY, "auto", "main", "docs", WEEKLY="1"),
    upload("cuda-merge-main-push-diff", MERGE, "diff", "main", "engine-test"),
    upload("cuda-merge-mirror-b200-all", MERGE, "all", "pr", "code", MIRROR_HW="b200"),
    # Only b200 reroutes: any other MIRROR_HW is an error, with nothing on stdout.
    upload("cuda-ready-mirror-h100-unsupported", READY, "all", "pr", "code", 1, MIRROR_HW="h100"),
    upload("npu-ready-pr-code-diff", "npu/test-npu-ready.yml", "diff", "pr", "code"),
    upload("cuda-bootstrap-steps-pr-docs", "cuda/bootstrap-upload-steps.yml", "diff", "pr", "docs"),
)  # fmt: skip


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, dict[str, str]]:
    """The sample committed on `main` (pushed), and one unpushed commit per change."""
    repo = sample_checkout(tmp_path_factory.mktemp("golden") / "omni-sample", SAMPLE)
    shas: dict[str, str] = {}
    for change, (rel, text) in CHANGES.items():
        repo.branch(change)
        path = repo.path / rel
        repo.write(rel, (path.read_text() if path.exists() else "") + text)
        shas[change] = repo.commit(change)
        repo.git("checkout", "-q", "main")
    return repo, shas


def build_env(case: Case, sha: str) -> dict[str, str]:
    """A Buildkite job's env for `case`, from nothing but PATH and HOME."""
    env = {key: os.environ[key] for key in ("PATH", "HOME") if key in os.environ}
    env.update(
        PYTHONPATH=str(ROOT),  # this checkout's ci/, whatever the editable install points at
        BUILDKITE="true",
        BUILDKITE_PIPELINE_SLUG="vllm-omni",
        BUILDKITE_COMMIT=sha,
    )
    if case.build == "pr":
        env.update(
            BUILDKITE_BRANCH="feature",
            BUILDKITE_PULL_REQUEST="7",
            BUILDKITE_PULL_REQUEST_BASE_BRANCH="main",
        )
    else:
        env.update(BUILDKITE_BRANCH="main", BUILDKITE_PULL_REQUEST="false")
    env.update(case.env)
    return env


def check_golden(case: Case, actual: str, update: bool) -> None:
    """Compare `actual` with the case's golden file, or (with --update-golden) rewrite it."""
    if update:
        case.golden.parent.mkdir(parents=True, exist_ok=True)
        case.golden.write_text(actual)
        return
    if not case.golden.exists():
        pytest.fail(
            f"{case.name}: {case.golden.relative_to(ROOT)} is missing; "
            "run `pytest tests/test_golden.py --update-golden` to write it",
            pytrace=False,
        )
    expected = case.golden.read_text()
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=str(case.golden.relative_to(ROOT)),
            tofile=f"{case.name} (actual stdout)",
        )
        pytest.fail(f"{case.name}: stdout differs from its golden file\n{''.join(diff)}", False)


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.task}/{case.name}")
def test_output_matches_its_golden_file(
    case: Case, sample: tuple[GitRepo, dict[str, str]], request: pytest.FixtureRequest
) -> None:
    repo, shas = sample
    done = run_task(*case.args, "--repo", str(repo.path), env=build_env(case, shas[case.change]))
    assert done.returncode == case.exit_code, f"{case.name}: exit {done.returncode}\n{done.stderr}"
    check_golden(case, done.stdout, bool(request.config.getoption("--update-golden")))
    # A skipped build prints nothing (an empty YAML document); anything else is a pipeline.
    pipeline = yaml.safe_load(case.golden.read_text())
    assert pipeline is None or isinstance(pipeline.get("steps"), list), case.name


def test_every_golden_file_belongs_to_a_case() -> None:
    """A golden left behind by a renamed or dropped case would never be compared again."""
    on_disk = {path for path in GOLDEN.rglob("*") if path.is_file()}
    assert sorted(on_disk - {case.golden for case in CASES}) == []
