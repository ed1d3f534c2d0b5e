"""`plan` on a real git repository built from the vLLM-Omni corpus.

Each test makes a temporary repo: the corpus `.buildkite/` (copied at test
time from ../shared), the pyproject.toml generated from MARKERS.md and the
`diffusion_joy_image_accuracy` key registered (tests/corpus.py), a few source
files, `main` pushed to a bare origin, then a feature branch with real commits.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci import skipci
from ci.plan.inputs import parse_inputs
from ci.plan.make import make_plan
from ci.plan.model import BuildPlan
from tests.conftest import StandIns
from tests.corpus import make_corpus
from tests.gitrepo import GitRepo, buildkite_env, copy_repo
from tests.inproc import run_task

MODEL = "vllm_omni/model_executor/models/qwen3_omni/model.py"
OTHER = "vllm_omni/entrypoints/unrelated_helper.py"
SOURCES = {
    MODEL: "class Model:\n    pass\n",
    OTHER: "X = 1\n",
    "vllm_omni/diffusion/models/qwen_image/transformer.py": "Y = 1\n",
    "docs/index.md": "# vLLM-Omni\n",
    "README.md": "# readme\n",
}
ALL_LABELS = "ready,merge-test,nightly-test,weekly-test"
SOURCE_REGISTRY = ".buildkite/common/ci_source_file_dependencies.yml"


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    skipci.clear_cache()
    yield
    skipci.clear_cache()


def corpus_repo(tmp_path: Path, *, register_key: bool = True) -> GitRepo:
    repo = GitRepo.create(tmp_path / "omni")
    make_corpus(repo.path, register_key=register_key)
    for rel, text in SOURCES.items():
        repo.write(rel, text)
    repo.commit("corpus")
    repo.push("main")
    repo.branch("feature")
    return repo


@pytest.fixture(scope="module")
def corpus_template(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """`corpus_repo`, built once for the module; tests get copies (`repo`)."""
    return corpus_repo(tmp_path_factory.mktemp("corpus-template"))


@pytest.fixture
def repo(corpus_template: GitRepo, tmp_path: Path) -> GitRepo:
    return copy_repo(corpus_template, tmp_path)


def plan_of(repo: GitRepo, **options: Any) -> BuildPlan:
    return make_plan(parse_inputs(repo=str(repo.path), **options))


def labels_of(plan: BuildPlan, platform: str, pipeline: str) -> list[str]:
    found = [p for p in plan.platform(platform).pipelines if p.name == pipeline]
    assert found, f"{platform} has no pipeline {pipeline!r}"
    return [s.label for s in found[0].steps]


def plan_cli(*args: str, env: dict[str, str] | None = None) -> Any:
    """`vllm-omni-ci plan ARGS` outside any Buildkite build (the plan ignores that env anyway)."""
    return run_task("plan", *args, env=buildkite_env() if env is None else env)


def pipeline_of(plan: BuildPlan, platform: str, name: str) -> Any:
    return next(p for p in plan.platform(platform).pipelines if p.name == name)


def leaves(steps: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for step in steps or []:
        if isinstance(step, dict) and isinstance(step.get("steps"), list):
            found += leaves(step["steps"])
        elif isinstance(step, dict):
            found.append(step)
    return found


# --------------------------------------------------------------------------- behaviour


def test_docs_only_change_skips_every_platform_and_says_why(repo: GitRepo) -> None:
    repo.commit_files({"docs/index.md": "# vLLM-Omni docs, edited\n"}, "docs")
    plan = plan_of(repo, labels="ready,merge-test")
    assert plan_schema_errors(plan.as_dict()) == []
    assert plan.skip_ci["mode"] == "skip-all"
    for platform in plan.platforms:
        assert platform.status == "skip", platform
        assert platform.reason == f"skip-ci: {skipci.MSG_SKIP_ALL}"
        assert not [s for p in platform.pipelines[1:] for s in p.steps]
    # CUDA: the upload steps are there but gated off; the skip is skip-ci's.
    cuda_boot = plan.platform("cuda").pipelines[0]
    assert cuda_boot.steps == []
    assert {d.reason for d in cuda_boot.dropped} == {"skip-ci"}
    assert pipeline_of(plan, "xpu", "intel").status == "not-uploaded"
    assert pipeline_of(plan, "rocm", "READY_TESTS + MERGE_TESTS").dropped[0].reason == "skip-ci"


def _filter_oracle(repo: GitRepo, pipeline: str, path: str) -> dict[str, bool]:
    """label -> "its source_file_dependencies cover `path`" (None-gated steps omitted)."""
    registry = yaml.safe_load((repo.path / SOURCE_REGISTRY).read_text())["source_file_dependencies"]
    document = yaml.safe_load((repo.path / pipeline).read_text())

    def prefixes(value: Any) -> list[str]:
        items = [value] if isinstance(value, str) else list(value)
        out: list[str] = []
        for item in items:
            found = registry.get(item, item) if "/" not in item else item
            out += found if isinstance(found, list) else [found]
        flat: list[str] = []
        for p in out:
            flat += p if isinstance(p, list) else [p]
        return flat

    covered: dict[str, bool] = {}
    for step in leaves(document["steps"]):
        deps = step.get("source_file_dependencies")
        if deps is None:
            continue
        ps = [p.rstrip("/") for p in prefixes(deps)]
        covered[str(step.get("label"))] = any(path == p or path.startswith(p + "/") for p in ps)
    return covered


def test_one_models_change_keeps_only_that_models_jobs_on_cuda_and_npu(repo: GitRepo) -> None:
    repo.commit_files({OTHER: "X = 2\n"}, "unrelated")
    baseline = plan_of(repo, labels=ALL_LABELS, platform=["cuda", "npu"])
    repo.git("reset", "-q", "--hard", "origin/main")
    repo.commit_files({MODEL: "class Model:\n    size = 2\n"}, "one model")
    skipci.clear_cache()  # the diff of `origin/main...HEAD` is cached per process
    plan = plan_of(repo, labels=ALL_LABELS, platform=["cuda", "npu"])
    extra_total = 0
    for platform in ("cuda", "npu"):
        for child in plan.platform(platform).pipelines[1:]:
            assert child.status == "uploaded" or child.name in ("merge", "weekly")
            if child.status != "uploaded":
                continue
            before = set(labels_of(baseline, platform, child.name))
            after = labels_of(plan, platform, child.name)
            extra = [label for label in after if label not in before]
            oracle = _filter_oracle(repo, child.file, MODEL)
            # Every gated job that remains covers the model; every other gated job is dropped.
            for label in after:
                assert oracle.get(label, True), f"{platform} {child.name}: {label} kept"
            for drop in child.dropped:
                if drop.reason == "source-filter":
                    assert oracle[drop.label] is False
            assert all(oracle.get(label) for label in extra)
            extra_total += len(extra)
    assert extra_total > 0
    assert labels_of(plan, "npu", "nightly") == [
        ":full_moon: Omni · Perf Test · No Async Chunk",
        ":full_moon: Omni · Perf Test · Async Chunk",
    ]
    assert "Omni · Qwen3-Omni Test" in labels_of(plan, "cuda", "ready")
    assert "Omni · Qwen3-Omni Test" not in labels_of(baseline, "cuda", "ready")


def test_nightly_label_adds_the_nightly_suites(repo: GitRepo) -> None:
    repo.commit_files({MODEL: "class Model:\n    size = 3\n"}, "model")
    ready = plan_of(repo, labels="ready")
    nightly = plan_of(repo, labels="ready,nightly-test")
    assert pipeline_of(ready, "rocm", "READY_TESTS").status == "uploaded"
    rocm = pipeline_of(nightly, "rocm", "READY_TESTS + NIGHTLY_TESTS")
    assert any(s.groups[:1] == ("NIGHTLY_TESTS",) for s in rocm.steps)
    for platform in ("cuda", "npu"):
        assert pipeline_of(ready, platform, "nightly").status == "not-uploaded"
        assert "nightly-test" in pipeline_of(ready, platform, "nightly").reason
        child = pipeline_of(nightly, platform, "nightly")
        assert child.status == "uploaded" and child.scope == "diff"
        assert child.steps
        assert all(s.runs == "yes" for s in child.steps)  # the groups' `if`s are true
    # Without the label, the nightly groups' own `if` would be false: evaluated, not guessed.
    assert nightly.warnings == []


def test_mirror_hw_b200_selects_presets_only_cuda_nightly_has(repo: GitRepo) -> None:
    # A change to the preset registry bypasses the source filter: every job is considered.
    registry = repo.path / ".buildkite/common/ci_mirror_hardwares.yml"
    repo.commit_files({str(registry.relative_to(repo.path)): registry.read_text() + "\n# x\n"})
    plain = plan_of(repo, labels=ALL_LABELS, platform=["cuda"])
    b200 = plan_of(repo, labels=ALL_LABELS, platform=["cuda"], mirror_hw="B200")
    assert b200.inputs["mirror_hw"] == "b200"

    def presets(plan: BuildPlan) -> dict[str, set[str]]:
        return {
            p.file or "": {s.preset or "" for s in p.steps}
            for p in plan.platform("cuda").pipelines[1:]
        }

    with_b200 = {
        f for f, names in presets(b200).items() if any(n.startswith("b200") for n in names)
    }
    assert with_b200 == {".buildkite/cuda/test-nightly.yml"}
    assert not any(n.startswith("b200") for names in presets(plain).values() for n in names)
    for child in b200.platform("cuda").pipelines[1:]:
        assert child.status == "uploaded"
        assert child.reason.startswith("source filter bypassed by")
        gpu = [s for s in child.steps if s.preset and not s.preset.startswith("b200")]
        assert gpu == [], [(s.label, s.preset) for s in gpu]
        if child.name != "nightly":
            assert child.steps == [] and any(d.reason == "mirror-hw" for d in child.dropped)
            assert any(d.reason == "empty-group" for d in child.dropped)
    nightly = pipeline_of(b200, "cuda", "nightly")
    assert nightly.steps and all(s.queue == "b200-k8s" for s in nightly.steps if s.preset)


def only_cuda_failed(done: Any) -> dict[str, Any]:
    """The CUDA entry of a `--format json` run where CUDA alone failed (exit 1)."""
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert plan_schema_errors(data) == []
    status = {p["platform"]: p["status"] for p in data["platforms"]}
    assert status == {"rocm": "run", "cuda": "error", "npu": "run", "xpu": "run"}
    return next(p for p in data["platforms"] if p["platform"] == "cuda")


def test_unregistered_key_fails_cuda_only_and_exits_1(tmp_path: Path) -> None:
    repo = corpus_repo(tmp_path, register_key=False)
    repo.commit_files({MODEL: "class Model:\n    size = 4\n"}, "model")
    done = plan_cli("--labels", "ready,nightly-test", "--repo", str(repo.path), "--format", "json")
    cuda = only_cuda_failed(done)
    assert any(
        "unknown source_file_dependencies 'diffusion_joy_image_accuracy'" in e
        for e in cuda["errors"]
    )
    assert "error: plan failed for cuda" in done.stderr
    # The table still prints every platform, then the same exit code.
    table = plan_cli("--labels", "ready,nightly-test", "--repo", str(repo.path))
    assert table.returncode == 1
    for name in ("rocm: RUN", "cuda: ERROR", "npu: RUN", "xpu: RUN"):
        assert name in table.stdout


def plan_schema_errors(data: Any) -> list[str]:
    """Problems of a `--format json` document against the documented schema."""
    import jsonschema

    schema = json.loads(resources.files("ci").joinpath("data/plan.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


def test_json_validates_against_the_documented_schema(repo: GitRepo) -> None:
    import jsonschema

    schema = json.loads(resources.files("ci").joinpath("data/plan.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    repo.commit_files({MODEL: "class Model:\n    size = 5\n"}, "model")
    done = plan_cli(
        "--labels",
        ALL_LABELS + ",not-a-label",
        "--repo",
        str(repo.path),
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert list(validator.iter_errors(data)) == []
    assert data["schema"] == "vllm-omni-ci/plan" and data["version"] == 1
    assert data["warnings"] and "'not-a-label'" in data["warnings"][0]
    # Every place the schema names is documented.
    docs = (Path(__file__).resolve().parents[1] / "docs/plan.md").read_text()
    for key in ("plan.schema.json", "version", "dropped", "conditional, not evaluated"):
        assert key in docs
    # The schema rejects what it should (a test of the test's oracle).
    data["platforms"][0]["status"] = "maybe"
    assert list(validator.iter_errors(data))


# --------------------------------------------------------------------------- inputs and formats


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--platform", "cuda,tpu"), "error: --platform: unknown platform 'tpu'"),
        (("--head", "no-such-rev"), "error: head revision 'no-such-rev' does not name a commit"),
        (("--base", "nope"), "error: base revision 'nope' does not name a commit"),
        (("--head", "HEAD", "--worktree"), "error: --head and --worktree are mutually exclusive"),
        (("--format", "yaml"), "error: --format: unknown format 'yaml'"),
        (("--mirror-hw", "b20o"), "error: --mirror-hw: unsupported MIRROR_HW='b20o'"),
        (("--base", "main", "--head", "main~9"), "error: head revision 'main~9' does not name"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    repo: GitRepo, args: tuple[str, ...], message: str
) -> None:
    done = plan_cli("--repo", str(repo.path), *args)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(message), done.stderr
    assert "Traceback" not in done.stderr


def test_a_repo_that_is_not_a_git_checkout_is_one_line_and_exit_2(tmp_path: Path) -> None:
    plain = tmp_path / "not-git"
    plain.mkdir()
    done = plan_cli("--repo", str(plain))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"error: --repo: {plain} is not a git checkout with a commit; pass --repo PATH"
    ]


def test_no_base_to_compare_with_is_one_line_and_exit_2(tmp_path: Path) -> None:
    repo = GitRepo.create(tmp_path / "lonely", origin=False)
    repo.commit_files({"a.py": "a = 1\n"}, "first")
    repo.branch("topic")
    repo.git("branch", "-q", "-D", "main")
    done = plan_cli("--repo", str(repo.path), "--platform", "xpu")
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()[-1:]
    assert line.startswith("error: no base revision: neither origin/main nor main exists")
    assert "Traceback" not in done.stderr


def test_worktree_counts_uncommitted_work(repo: GitRepo) -> None:
    repo.commit_files({MODEL: "class Model:\n    size = 6\n"}, "model")
    repo.git("reset", "-q", "--soft", "HEAD~1")  # the change is now staged, not committed
    committed = plan_of(repo, platform=["xpu"])
    assert committed.diff["paths"] == []
    skipci.clear_cache()
    repo.write("docs/new-page.md", "# untracked\n")
    work = plan_of(repo, platform=["xpu"], worktree=True)
    assert work.inputs["head"] == "WORKTREE"
    assert work.diff["paths"] == ["docs/new-page.md", MODEL]
    assert work.platform("xpu").status == "run"


def test_if_outside_the_subset_is_conditional_not_evaluated(repo: GitRepo) -> None:
    ready = repo.path / ".buildkite/cuda/test-ready.yml"
    document = yaml.safe_load(ready.read_text())
    document["steps"].append(
        {
            "group": "Scheduled only",
            "if": 'build.source == "schedule"',
            "steps": [{"label": "Scheduled CPU step", "commands": ["true"], "soft_fail": True}],
        }
    )
    ready.write_text(yaml.safe_dump(document, sort_keys=False))
    repo.commit("a group with an if outside the subset")
    plan = plan_of(repo, labels="ready", platform=["cuda"])
    step = next(
        s for s in pipeline_of(plan, "cuda", "ready").steps if s.label == "Scheduled CPU step"
    )
    assert plan_schema_errors(plan.as_dict()) == []
    assert step.runs == "conditional"
    assert step.note == 'conditional, not evaluated: build.source == "schedule"'
    assert step.soft_fail and not step.blocking
    assert step.groups == ("Scheduled only",)
    text = plan_cli("--labels", "ready", "--platform", "cuda", "--repo", str(repo.path))
    assert text.returncode == 0, text.stderr
    assert "conditional, not evaluated" in text.stdout
    assert "warning:" not in text.stderr


def test_a_misspelt_label_plans_as_before_with_a_warning(repo: GitRepo) -> None:
    """Labels are free-form on GitHub, so `--labels redy` is no error: a warning (issue 35)."""
    typo = plan_cli("--labels", "redy", "--platform", "rocm", "--repo", str(repo.path))
    assert typo.returncode == 0, typo.stderr
    assert "READY_TESTS (.buildkite/amd/test-amd-ready.yml): uploaded" in typo.stdout  # as before
    assert "warning: label 'redy' is not used by any pipeline; did you mean 'ready'? (known: " in (
        typo.stdout
    )


def test_markdown_and_table_show_every_platform_and_no_side_effects(
    repo: GitRepo, standins: StandIns, tmp_path: Path
) -> None:
    # A buildkite-agent that fails loudly, a GitHub API nobody listens on, and an
    # origin that cannot be reached: any upload, label request or fetch would show.
    standins.add("buildkite-agent", "echo 'buildkite-agent must not run' >&2; exit 97")
    repo.commit_files({MODEL: "class Model:\n    size = 7\n"}, "model")
    repo.git("remote", "set-url", "origin", "http://127.0.0.1:9/vllm-omni.git")
    trace = tmp_path / "git-trace.log"
    env = buildkite_env(
        standins.env(),
        VLLM_OMNI_CI_GITHUB_API="http://127.0.0.1:9",
        GITHUB_TOKEN="not-used",
        GIT_TRACE=str(trace),
    )
    done = plan_cli("--labels", "ready", "--repo", str(repo.path), "--format", "markdown", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("## What will CI run?")
    for name in ("### rocm: RUN", "### cuda: RUN", "### npu: RUN", "### xpu: RUN"):
        assert name in done.stdout
    assert "| pipeline | step | hardware | par. | timeout | blocking |\n" in done.stdout
    assert "**source-filter**" in done.stdout
    assert "<details><summary>" in done.stdout
    # Nothing was uploaded or annotated, and no label request was made (port 9 is closed).
    assert standins.calls() == []
    assert "label request failed" not in done.stderr
    assert "must not run" not in done.stderr
    # git was asked only local questions: no fetch, no remote, nothing written.
    commands = [
        line.split("git ", 1)[1].split()[0]
        for line in trace.read_text().splitlines()
        if "trace: built-in: git " in line
    ]
    assert commands and set(commands) <= {
        "rev-parse",
        "diff",
        "show",
        "status",
        "archive",
        "ls-tree",
        "merge-base",
    }, commands
    assert repo.git("status", "--porcelain", "--ignored") == ""
    assert not (repo.path / ".git" / "worktrees").exists()


def test_unknown_label_is_a_warning(repo: GitRepo) -> None:
    repo.commit_files({MODEL: "class Model:\n    size = 8\n"}, "model")
    plan = plan_of(repo, labels="ready\ndocumentation, nightly-test", platform=["xpu"])
    assert plan.inputs["labels"] == ["ready", "documentation", "nightly-test"]
    assert len(plan.warnings) == 1
    assert plan.warnings[0].startswith("label 'documentation' is not used by any pipeline")
    done = plan_cli("--labels", "documentation", "--platform", "xpu", "--repo", str(repo.path))
    assert done.returncode == 0
    assert "warning: label 'documentation'" in done.stdout
    assert "warning:" not in done.stderr  # said once, in the table
    args = ("--labels", "documentation", "--platform", "xpu", "--repo", str(repo.path))
    as_json = plan_cli(*args, "--format", "json")
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout)["warnings"] == plan.warnings[:1]
    assert f"warning: {plan.warnings[0]}" in as_json.stderr.splitlines()


def test_rocm_says_what_the_mirror_filter_and_duplicates_dropped(repo: GitRepo) -> None:
    ready = repo.path / ".buildkite/amd/test-amd-ready.yml"
    document = yaml.safe_load(ready.read_text())
    document["steps"].append(
        {
            "group": "Tentative only",
            "steps": [
                {
                    "label": "MI325 probe",
                    "agent_pool": "mi325_1",
                    "mirror_hardwares": ["amdtentative"],
                    "commands": ["true"],
                }
            ],
        }
    )
    ready.write_text(yaml.safe_dump(document, sort_keys=False))
    repo.commit_files({MODEL: "class Model:\n    size = 10\n"}, "tentative step")
    plan = plan_of(repo, labels="ready", platform=["rocm"])
    rocm = pipeline_of(plan, "rocm", "READY_TESTS")
    reasons = {(d.label, d.reason) for d in rocm.dropped}
    assert ("MI325 probe", "mirror-hw") in reasons
    assert ("Tentative only", "empty-group") in reasons
    assert "MI325 probe" not in [s.label for s in rocm.steps]
    assert plan.platform("rocm").notes == ["RUN_ALL=0 VLLM_USE_PRECOMPILED=1"]
    skipci.clear_cache()
    both = plan_of(repo, labels="ready,merge-test", platform=["rocm"])
    combined = pipeline_of(both, "rocm", "READY_TESTS + MERGE_TESTS")
    duplicates = [d for d in combined.dropped if d.reason == "duplicate"]
    assert duplicates and all(d.groups == ("MERGE_TESTS",) for d in duplicates)
    kept = {(s.groups, s.label) for s in combined.steps}
    for d in duplicates:
        assert (("READY_TESTS",), f"mi300_1: {d.label}") in kept or any(
            g == ("READY_TESTS",) and label.endswith(d.label) for g, label in kept
        )


def test_ci_yaml_only_change_runs_just_that_level(repo: GitRepo) -> None:
    nightly = repo.path / ".buildkite/cuda/test-nightly.yml"
    repo.commit_files({".buildkite/cuda/test-nightly.yml": nightly.read_text() + "\n# edit\n"})
    plan = plan_of(repo, labels="ready,nightly-test")
    assert plan.skip_ci["mode"] == "yaml-gated"
    cuda = plan.platform("cuda")
    assert cuda.skip_ci == "l2 skip-l23, l3 skip-l23"
    assert pipeline_of(plan, "cuda", "ready").status == "not-uploaded"
    assert pipeline_of(plan, "cuda", "ready").reason.startswith("skip-ci: only CI config YAML")
    assert ("Upload Ready Pipeline", "skip-ci") in {
        (d.label, d.reason) for d in cuda.pipelines[0].dropped
    }
    child = pipeline_of(plan, "cuda", "nightly")
    assert child.status == "uploaded" and child.steps  # the file itself changed: filter bypassed
    assert child.reason == "source filter bypassed by .buildkite/cuda/test-nightly.yml"
    assert plan.platform("xpu").status == "skip"
    assert plan.platform("xpu").reason.startswith("skip-ci: only CI config YAML")
    rocm = plan.platform("rocm")
    assert [d.reason for d in rocm.pipelines[0].dropped if d.label.startswith("READY")] == [
        "skip-ci"
    ]
    assert rocm.status == "run"  # the nightly suite is never skip-gated


def test_the_build_environment_does_not_change_the_plan(repo: GitRepo) -> None:
    """Given --labels, --branch and --base, no build variable changes the plan (without
    them, BUILDKITE_PULL_REQUEST_LABELS, BUILDKITE_BRANCH and the PR base branch are
    their defaults: tests/test_local_build.py)."""
    repo.commit_files({MODEL: "class Model:\n    size = 11\n"}, "model")
    args = (
        "--labels",
        "ready",
        "--branch",
        "feature",
        "--base",
        "origin/main",
        "--repo",
        str(repo.path),
        "--format",
        "json",
    )
    clean = plan_cli(*args)
    noisy_env = buildkite_env(
        BUILDKITE="true",
        BUILDKITE_BRANCH="main",
        BUILDKITE_PULL_REQUEST="12",
        BUILDKITE_PULL_REQUEST_BASE_BRANCH="release-v1",
        NIGHTLY="1",
        WEEKLY="1",
        MIRROR_HW="b20o",
        AMD_MIRROR_HW="amdtentative",
        DEBUG_TEST_YAML="nightly",
    )
    noisy = plan_cli(*args, env=noisy_env)
    assert clean.returncode == noisy.returncode == 0, noisy.stderr
    assert json.loads(noisy.stdout) == json.loads(clean.stdout)


# --------------------------------------------------------------------------- which files are read


def _add_step(repo: GitRepo, rel: str, label: str, **extra: Any) -> None:
    """Append an always-kept CPU step to a test YAML (written, not committed)."""
    path = repo.path / rel
    document = yaml.safe_load(path.read_text())
    document["steps"].append({"label": label, "commands": ["true"], **extra})
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def test_pipelines_are_read_at_the_head_revision_and_worktree_reads_the_tree(
    repo: GitRepo,
) -> None:
    ready = ".buildkite/cuda/test-ready.yml"
    first = repo.commit_files({MODEL: "class Model:\n    size = 12\n"}, "model")
    _add_step(repo, ready, "Committed probe")
    repo.commit("a step in the ready YAML")
    _add_step(repo, ready, "Uncommitted probe")  # the working tree is now ahead of HEAD

    def probes(**options: Any) -> set[str]:
        skipci.clear_cache()
        plan = plan_of(repo, labels="ready", platform=["cuda"], **options)
        assert plan.platform("cuda").status == "run", plan.platform("cuda").errors
        return {s.label for s in pipeline_of(plan, "cuda", "ready").steps} & {
            "Committed probe",
            "Uncommitted probe",
        }

    assert probes(head=first) == set()
    assert probes() == {"Committed probe"}  # HEAD, although the tree differs
    assert probes(head="HEAD") == {"Committed probe"}
    assert probes(worktree=True) == {"Committed probe", "Uncommitted probe"}
    assert repo.git("status", "--porcelain") == f" M {ready}\n"


def test_a_file_missing_at_the_head_revision_is_that_platforms_error(repo: GitRepo) -> None:
    intel = ".buildkite/intel/pipeline-intel.yml"
    repo.git("rm", "-q", intel)
    repo.commit_files({MODEL: "class Model:\n    size = 13\n"}, "no intel pipeline")
    gone = repo.sha()
    repo.git("checkout", "-q", "HEAD~1", "--", intel)  # back in the tree, not at `gone`
    done = plan_cli(
        "--head", gone, "--labels", "ready", "--platform", "xpu,npu", "--repo", str(repo.path)
    )
    assert done.returncode == 1, done.stderr
    assert "npu: RUN" in done.stdout
    assert f"xpu: ERROR — missing pipeline file: {gone}:{intel}" in done.stdout
    assert "error: plan failed for xpu (see above)" in done.stderr
    assert "Traceback" not in done.stderr


# --------------------------------------------------------------------------- schema check


def test_a_pipeline_failing_the_buildkite_schema_is_that_platforms_error(
    repo: GitRepo,
) -> None:
    ready = ".buildkite/cuda/test-ready.yml"
    _add_step(repo, ready, "Bad timeout", timeout_in_minutes="soon")
    repo.commit_files({MODEL: "class Model:\n    size = 14\n"}, "bad timeout")
    done = plan_cli("--labels", "ready", "--repo", str(repo.path), "--format", "json")
    cuda = only_cuda_failed(done)
    child = next(p for p in cuda["pipelines"] if p["name"] == "ready")
    assert child["status"] == "not-uploaded" and child["steps"] == []
    [error] = cuda["errors"]
    assert error.startswith(f"{ready}: rendered pipeline fails the Buildkite schema at steps/")
    assert error.endswith("timeout_in_minutes: 'soon' is not of type 'integer'")
    # The real upload refuses the same file with the same line.
    upload = run_task(
        "upload-pipeline",
        ready,
        "--scope",
        "all",
        "--dry-run",
        "--repo",
        str(repo.path),
        env=buildkite_env(),
    )
    assert upload.returncode == 1
    assert f"error: {error}" in upload.stderr.splitlines()


def test_an_amd_pipeline_failing_the_schema_is_the_rocm_error(repo: GitRepo) -> None:
    ready = repo.path / ".buildkite/amd/test-amd-ready.yml"
    document = yaml.safe_load(ready.read_text())
    document["steps"][0]["steps"][0]["timeout_in_minutes"] = "soon"
    ready.write_text(yaml.safe_dump(document, sort_keys=False))
    repo.commit_files({MODEL: "class Model:\n    size = 15\n"}, "bad amd timeout")
    plan = plan_of(repo, labels="ready", platform=["rocm", "xpu"])
    rocm = plan.platform("rocm")
    assert rocm.status == "error"
    # The AMD bootstrap's own check and words (it names the suite files).
    [error] = rocm.errors
    assert "fails the Buildkite schema at steps/" in error
    assert error.endswith("timeout_in_minutes: 'soon' is not of type 'integer'")
    assert plan.platform("xpu").status == "run"


def test_the_readme_example_is_what_plan_prints(repo: GitRepo) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    intro = "with the `ready` label, `vllm-omni-ci plan --labels ready --platform npu,xpu` prints:"
    intro += "\n\n```text\n"
    assert intro in readme
    shown = readme.split(intro, 1)[1].split("\n```\n", 1)[0] + "\n"
    repo.branch("my-change")
    repo.commit_files({MODEL: "class Model:\n    size = 16\n"}, "one model")
    env = {k: v for k, v in buildkite_env().items() if k not in ("COLUMNS", "LINES")}
    done = plan_cli("--labels", "ready", "--platform", "npu,xpu", "--repo", str(repo.path), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown


def test_platforms_repeat_comma_separate_and_take_aliases(repo: GitRepo) -> None:
    repo.commit_files({MODEL: "class Model:\n    size = 17\n"}, "model")
    args = ("--platform", "intel", "--platform", "amd,xpu", "--repo", str(repo.path))
    done = plan_cli(*args, "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["inputs"]["platforms"] == ["rocm", "xpu"]
    assert [p["platform"] for p in data["platforms"]] == ["rocm", "xpu"]


# --------------------------------------------------------------------------- trust (issue 32)

SECRET = "s3cr3t-label"  # HF_TOKEN's value, given again as an input


def test_a_secrets_value_given_as_input_is_masked_on_stdout_in_every_format(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--labels ready,X`, `--branch X` and BUILDKITE_BRANCH=X printed X on stdout while
    stderr masked it (item 3): every format now goes through the program's stdout masker."""
    import signal

    from ci.cli import run

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for name in [k for k in os.environ if k.startswith("BUILDKITE")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    given = {"labels": ["--labels", f"ready,{SECRET}"], "branch": ["--branch", SECRET], "env": []}
    plan = ["plan", "-r", str(repo.path), "--format"]
    try:
        for fmt in ("table", "json", "markdown"):
            for how, words in given.items():
                with monkeypatch.context() as scoped:
                    if how == "env":
                        scoped.setenv("BUILDKITE_BRANCH", SECRET)
                    run([*plan, fmt, *words])
                out, err = capsys.readouterr()
                assert SECRET not in out + err, (fmt, how)
                assert "[REDACTED]" in out, (fmt, how)
                if fmt == "json":
                    json.loads(out)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


@pytest.mark.process  # a closed stdout: the process itself is the subject
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_reader_gone_before_the_plan_is_printed_is_exit_141(repo: GitRepo, fmt: str) -> None:
    """`plan | true` exited 1 with no message in table format (item 18): rich's Console
    turned the closed pipe into its own exit 1; now it is 141, as every other format's."""

    from tests.conftest import cli_path

    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as stdout:
        done = subprocess.run(
            [cli_path(), "plan", "-r", str(repo.path), "--format", fmt],
            stdout=stdout, stderr=subprocess.PIPE, text=True, env=buildkite_env(), timeout=120,
        )  # fmt: skip
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "script",
    [
        'case "$1" in archive) exit 0;; esac',  # "succeeds" and writes no archive
        'case "$1" in archive) for a; do case "$a" in --output=*) echo junk > "${a#--output=}";;'
        " esac; done; exit 0;; esac",  # writes something that is no tar
        "case \"$1\" in ls-tree) printf '../../etc\\0'; exit 0;; esac",  # names not asked for
    ],
    ids=["no-archive", "not-a-tar", "strange-names"],
)
def test_a_git_whose_output_is_nonsense_stops_the_plan_with_one_line(
    repo: GitRepo, script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32, item 15: a `git` that exits 0 with nonsense gave FileNotFoundError (head.tar)."""

    from ci.errors import Failure
    from ci.plan.snapshot import files_at

    real = shutil.which("git")
    bin_dir = tmp_path / "odd-git"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\n{script}\nexec {real} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    first = repo.sha()
    repo.commit_files({MODEL: "class Model:\n    size = 14\n"}, "a later commit")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(Failure) as caught, files_at(repo.path, first):
        pass
    assert caught.value.code == 1
    (line,) = caught.value.problems
    assert line.startswith("`git "), line


# --------------------------------------------------------------------------- plan explains itself


def test_an_unmigrated_checkout_is_told_the_plan_is_of_vllm_omni_ci(repo: GitRepo) -> None:
    """Issue 35, item 2.1: on a checkout whose CI still calls the old scripts, the plan
    shows what vllm-omni-ci's bootstraps would run, and says so first (JSON: `migrated`)."""
    from ci.migrate import edits

    repo.commit_files({MODEL: "class Model:\n    size = 18\n"}, "model")
    plan = plan_of(repo, platform=["xpu"])
    assert plan.migrated is False
    # Where, as `migrate` finds the calls (the corpus is the old CI).
    assert ".buildkite/intel/pipeline-intel.yml: run-xpu-test.sh" in plan.old_calls
    assert ".buildkite/npu/pipeline-npu.yml: upload_pipeline.py" in plan.old_calls
    done = plan_cli("--platform", "xpu", "--repo", str(repo.path))
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("plan: what vllm-omni-ci's bootstraps would run for this change")
    assert "this checkout's CI still calls the old scripts" in first
    assert "see `vllm-omni-ci migrate`" in first
    as_json = plan_cli("--platform", "xpu", "--repo", str(repo.path), "--format", "json")
    data = json.loads(as_json.stdout)
    assert data["migrated"] is False and data["old_calls"] == plan.old_calls
    assert plan_schema_errors(data) == []
    markdown = plan_cli("--platform", "xpu", "--repo", str(repo.path), "--format", "markdown")
    assert markdown.stdout.splitlines()[2].startswith("- plan: what vllm-omni-ci's bootstraps")
    # Migrated (as `migrate --apply` writes it): the plan is of this checkout's own CI.
    edits.apply(repo.path)
    intel = repo.path / ".buildkite/intel/pipeline-intel.yml"
    # A comment naming an old script is no call of it (the rule is migrate's: commands).
    intel.write_text("# was: run-xpu-test.sh\n" + intel.read_text())
    repo.commit("migrate")
    skipci.clear_cache()
    migrated = plan_of(repo, platform=["xpu"])
    assert migrated.migrated is True and migrated.old_calls == []
    done = plan_cli("--platform", "xpu", "--repo", str(repo.path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("diff: ")


def test_rocm_with_no_amd_label_says_it_falls_back_to_the_ready_suite(repo: GitRepo) -> None:
    """Issue 35, item 2.2: with no label rocm runs the ready suite while cuda and npu skip;
    the plan says why (the AMD selection's fallback) and that AMD suites are not filtered by
    source files (a qwen3_omni change runs Wan22)."""
    from ci.plan.platforms import AMD_WHOLE, INTEL_WHOLE

    repo.commit_files({MODEL: "class Model:\n    size = 19\n"}, "model")
    plan = plan_of(repo)
    rocm = plan.platform("rocm")
    assert rocm.status == "run"
    assert {plan.platform(p).status for p in ("cuda", "npu")} == {"skip"}
    assert rocm.why.startswith("no AMD suite label (ready, merge-test, nightly-test): the AMD")
    assert "falls back to the ready suite" in rocm.why
    assert rocm.why.endswith(AMD_WHOLE)
    assert any("Wan22" in s.label for s in rocm.pipelines[0].steps)
    assert plan.platform("xpu").why == INTEL_WHOLE
    assert plan.platform("cuda").why == ""  # its pipelines say why (the upload gates)
    done = plan_cli("--platform", "rocm", "--repo", str(repo.path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("rocm: RUN"))
    assert lines[title + 1] == f"  why: {rocm.why}"
    data = json.loads(plan_cli("--repo", str(repo.path), "--format", "json").stdout)
    assert data["platforms"][0]["why"] == rocm.why
    assert plan_schema_errors(data) == []
    # A label that chooses a suite: no fallback, still run whole.
    skipci.clear_cache()
    assert plan_of(repo, labels="merge-test", platform=["rocm"]).platform("rocm").why == AMD_WHOLE


def test_the_jobs_table_has_no_runs_column_and_a_condition_column_only_when_needed(
    repo: GitRepo,
) -> None:
    """Issue 35, item 2.3: `runs` said `yes` on every row (a listed job runs); it is gone,
    and a job whose `if` decides at build time says so in a `condition` column."""
    repo.commit_files({MODEL: "class Model:\n    size = 20\n"}, "model")
    args = ("--labels", "ready", "--platform", "xpu", "--repo", str(repo.path))
    for fmt, header in (("table", "┃ blocking ┃\n"), ("markdown", "| blocking |\n")):
        done = plan_cli(*args, "--format", fmt)
        assert done.returncode == 0, done.stderr
        assert header in done.stdout
        assert not {" runs ", " condition "} & set(_header_cells(done.stdout)), done.stdout
    intel = repo.path / ".buildkite/intel/pipeline-intel.yml"
    document = yaml.safe_load(intel.read_text())
    document["steps"].append(
        {"label": "Scheduled XPU step", "if": 'build.source == "schedule"', "command": "true"}
    )
    intel.write_text(yaml.safe_dump(document, sort_keys=False))
    repo.commit("an if outside the subset")
    for fmt, header in (("table", "┃ condition "), ("markdown", "| blocking | condition |\n")):
        done = plan_cli(*args, "--format", fmt)
        assert done.returncode == 0, done.stderr
        assert header in done.stdout and " runs " not in _header_cells(done.stdout)
        row = next(line for line in done.stdout.splitlines() if "Scheduled XPU step" in line)
        assert 'conditional, not evaluated: build.source == "schedule"' in row


def _header_cells(text: str) -> list[str]:
    """The cells of every table line (rich's header, markdown's rows)."""
    return [
        f" {cell.strip()} "
        for line in text.splitlines()
        if line.startswith(("┃", "| "))
        for cell in line.strip("┃| ").replace("┃", "|").split("|")
    ]


@pytest.mark.parametrize(
    ("files", "change"),
    [
        ({}, "a.py"),
        # A docs-only change skips rocm and xpu before they read a file: `SKIP`, it said.
        ({".buildkite/release/release-pipeline.yml": "steps: []\n"}, "docs/index.md"),
    ],
)
def test_a_checkout_that_is_not_vllm_omni_is_one_line_and_exit_2(
    tmp_path: Path, files: dict[str, str], change: str
) -> None:
    """Issue 35, item 2.4: `plan --repo` on another project printed every platform as an
    error or a skip; it is an input error naming what it looked for."""
    other = GitRepo.create(tmp_path / "other")
    other.commit_files({"a.py": "a = 1\n", **files}, "first")
    other.push("main")
    other.branch("topic")
    other.commit_files({change: "a = 2\n"}, "second")
    done = plan_cli("--repo", str(other.path))
    assert done.returncode == 2 and done.stdout == "", done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: --repo: {other.path} is not a vLLM-Omni checkout: no platform's pipelines at"
        " HEAD (looked for .buildkite/amd/*.yml, .buildkite/cuda/*.yml, .buildkite/npu/*.yml,"
        " .buildkite/intel/*.yml)"
    ]
    assert "Traceback" not in done.stderr
