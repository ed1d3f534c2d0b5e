"""The build a task acts for, on a laptop and in Buildkite (`ci.target.resolve_build`).

One rule for every task: explicit env values win; inside Buildkite nothing is
defaulted and a missing BUILDKITE_COMMIT is an input error; outside it, with
BUILDKITE_PULL_REQUEST and BUILDKITE_BRANCH unset, a checkout on a branch other
than main is a PR against main and one on main a push to main. Everything runs
the CLI against real git repositories; `buildkite-agent` is a recording
stand-in, and "no git" is a PATH that holds the Python interpreter only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import SAMPLE, StandIns
from tests.corpus import make_corpus
from tests.gitrepo import GitRepo, buildkite_env, copy_repo, sample_checkout
from tests.inproc import run_task

HINT = "(outside Buildkite; set BUILDKITE_PULL_REQUEST/BUILDKITE_BRANCH to choose)"
MODEL = "vllm_omni/model_executor/models/qwen3_omni/model.py"


def local_env(**values: str) -> dict[str, str]:
    """No BUILDKITE* variable at all (a laptop), plus `values`."""
    return buildkite_env(**values)


def skip_ci(repo: GitRepo, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return run_task(
        "skip-ci", "--platform", "cuda", "--level", "l2", *extra, env=env, cwd=repo.path
    )


@pytest.fixture(scope="module")
def docs_template(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """main pushed with code and docs, built once for the module."""
    repo = GitRepo.create(tmp_path_factory.mktemp("docs-template") / "repo")
    repo.commit_files({"vllm_omni/a.py": "a = 1\n", "docs/a.md": "a\n"}, "base")
    repo.push("main")
    return repo


@pytest.fixture
def docs_repo(docs_template: GitRepo, tmp_path: Path) -> GitRepo:
    """A copy of `docs_template`; the next commit (on whichever branch) is docs only."""
    return copy_repo(docs_template, tmp_path)


# --------------------------------------------------------------------------- the local rule


def test_on_main_without_buildkite_env_skip_ci_diffs_the_last_commit(docs_repo: GitRepo) -> None:
    """Item 4: BUILDKITE_BRANCH defaults to the checkout's branch; main is a main build."""
    head = docs_repo.commit_files({"docs/a.md": "b\n"}, "docs")
    done = skip_ci(docs_repo, local_env())
    assert (done.returncode, done.stdout) == (0, "skip-all\n"), done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == f"local build: push to main {HINT}"
    assert "[diff]: 1 changed file(s) (main build: HEAD^..HEAD)" in lines
    assert "not PR/main" not in done.stderr
    assert docs_repo.sha() == head


def test_pull_request_false_and_no_branch_is_the_checkouts_branch(docs_repo: GitRepo) -> None:
    docs_repo.commit_files({"docs/a.md": "b\n"}, "docs")
    done = skip_ci(docs_repo, local_env(BUILDKITE_PULL_REQUEST="false"))
    assert (done.returncode, done.stdout) == (0, "skip-all\n"), done.stderr
    assert f"local build: push to main {HINT}" in done.stderr.splitlines()


def test_on_a_feature_branch_the_build_is_a_pr_against_main(docs_repo: GitRepo) -> None:
    docs_repo.branch("my-branch")
    docs_repo.commit_files({"docs/a.md": "b\n"}, "docs")
    done = skip_ci(docs_repo, local_env())
    assert (done.returncode, done.stdout) == (0, "skip-all\n"), done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == f"local build: PR from my-branch against main {HINT}"
    assert (
        "[diff]: 1 changed file(s) (PR build from my-branch (local): origin/main...HEAD)" in lines
    )
    assert sum(line.startswith("local build:") for line in lines) == 1


def test_the_base_branch_variable_still_chooses_the_base(docs_repo: GitRepo) -> None:
    docs_repo.git("branch", "release", "main")
    docs_repo.push("release")
    docs_repo.branch("my-branch")
    docs_repo.commit_files({"vllm_omni/a.py": "a = 2\n"}, "code")
    done = skip_ci(docs_repo, local_env(BUILDKITE_PULL_REQUEST_BASE_BRANCH="release"))
    assert done.returncode == 1, done.stderr
    assert f"local build: PR from my-branch against release {HINT}" in done.stderr
    assert "(PR build from my-branch (local): origin/release...HEAD)" in done.stderr


def test_a_local_pr_never_fetches_its_base(docs_repo: GitRepo) -> None:
    """The base is origin/main, else the local main; only an explicit PR build fetches."""
    docs_repo.git("update-ref", "-d", "refs/remotes/origin/main")
    docs_repo.branch("my-branch")
    docs_repo.commit_files({"docs/a.md": "b\n"}, "docs")
    done = skip_ci(docs_repo, local_env())
    assert (done.returncode, done.stdout) == (0, "skip-all\n"), done.stderr
    assert "(PR build from my-branch (local): main...HEAD)" in done.stderr
    assert "trying fetch" not in done.stderr
    explicit = skip_ci(docs_repo, local_env(BUILDKITE_PULL_REQUEST="7"))
    assert "[diff]: origin/main not found locally; trying fetch" in explicit.stderr


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"BUILDKITE_BRANCH": "my-branch"}, "not PR/main build; using safe defaults"),
        ({"BUILDKITE_PULL_REQUEST": "false", "BUILDKITE_BRANCH": "my-branch"}, "not PR/main"),
        ({"BUILDKITE_PULL_REQUEST": "7"}, "(PR build #7: origin/main...HEAD)"),
    ],
    ids=["branch-only", "not-a-pr", "pr-number"],
)
def test_explicit_env_values_win_and_nothing_is_announced(
    docs_repo: GitRepo, values: dict[str, str], reason: str
) -> None:
    docs_repo.branch("my-branch")
    docs_repo.commit_files({"docs/a.md": "b\n"}, "docs")
    done = skip_ci(docs_repo, local_env(**values))
    assert reason in done.stderr
    assert "local build:" not in done.stderr


def test_inside_buildkite_nothing_is_defaulted(docs_repo: GitRepo) -> None:
    docs_repo.commit_files({"docs/a.md": "b\n"}, "docs")  # on main, but no BUILDKITE_BRANCH
    done = skip_ci(docs_repo, local_env(BUILDKITE="true", BUILDKITE_COMMIT=docs_repo.sha()))
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert "[diff]: not PR/main build; using safe defaults" in done.stderr
    assert "local build:" not in done.stderr


# --------------------------------------------------------------------------- tasks agree


@pytest.fixture(scope="module")
def corpus_template(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """The corpus with a model and a README, pushed on main; built once for the module."""
    repo = GitRepo.create(tmp_path_factory.mktemp("corpus-template") / "omni")
    make_corpus(repo.path)
    repo.write(MODEL, "class Model:\n    pass\n")
    repo.write("README.md", "# readme\n")
    repo.commit("corpus")
    repo.push("main")
    return repo


@pytest.fixture
def corpus(corpus_template: GitRepo, tmp_path: Path) -> GitRepo:
    """A copy of `corpus_template` for one test to commit on."""
    return copy_repo(corpus_template, tmp_path)


def _leaf_labels(steps: Any) -> list[str]:
    found: list[str] = []
    for step in steps or []:
        if isinstance(step, dict) and isinstance(step.get("steps"), list):
            found += _leaf_labels(step["steps"])
        elif isinstance(step, dict) and "label" in step:
            found.append(str(step["label"]))
    return found


@pytest.mark.parametrize(
    ("branch", "pipeline", "name"),
    [("my-change", "test-ready.yml", "ready"), ("main", "test-merge.yml", "merge")],
    ids=["pr-like", "main-push"],
)
def test_upload_pipeline_and_plan_keep_the_same_steps(
    corpus: GitRepo, branch: str, pipeline: str, name: str
) -> None:
    """Item 5: the README's `upload-pipeline … --dry-run` and `plan` see the same build."""
    repo = corpus
    if branch != "main":
        repo.branch(branch)
    repo.commit_files({MODEL: "class Model:\n    size = 16\n"}, "one model")
    # The PR's labels from Buildkite's variable: plan reads it when --labels is not given.
    env = local_env(BUILDKITE_PULL_REQUEST_LABELS="ready")
    rel = f".buildkite/cuda/{pipeline}"
    upload = run_task("upload-pipeline", "--pipeline", rel, "--dry-run", env=env, cwd=repo.path)
    assert upload.returncode == 0, upload.stderr
    plan = run_task("plan", "--platform", "cuda", "--format", "json", env=env, cwd=repo.path)
    assert plan.returncode == 0, plan.stderr

    data = json.loads(plan.stdout)
    assert data["inputs"]["branch"] == branch
    assert data["inputs"]["labels"] == ["ready"]
    [planned] = [p for p in data["platforms"][0]["pipelines"] if p["name"] == name]
    assert planned["status"] == "uploaded"
    uploaded = _leaf_labels(yaml.safe_load(upload.stdout)["steps"])
    kept = [ln for ln in upload.stderr.splitlines() if " step(s) kept, " in ln]
    assert kept == [f"upload_pipeline: {len(planned['steps'])} step(s) kept, "
                    f"{len(planned['dropped'])} dropped (diff scope)"]  # fmt: skip
    assert uploaded == [s["label"] for s in planned["steps"]]
    assert 0 < len(uploaded) < len(uploaded) + len(planned["dropped"])
    # Both said which build they assumed, in the same words.
    said = "local build: " + (
        f"PR from {branch} against main {HINT}" if branch != "main" else f"push to main {HINT}"
    )
    assert said in upload.stderr.splitlines()
    assert said in plan.stderr.splitlines()


def test_plan_and_upload_pipeline_use_the_pr_base_branch_variable(corpus: GitRepo) -> None:
    repo = corpus
    repo.git("branch", "release", "main")
    repo.push("release")
    repo.branch("my-change")
    repo.commit_files({MODEL: "class Model:\n    size = 19\n"}, "one model")
    env = local_env(BUILDKITE_PULL_REQUEST_BASE_BRANCH="release")
    plan = run_task("plan", "--platform", "xpu", "--format", "json", env=env, cwd=repo.path)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["diff"]["range"] == "origin/release...HEAD"
    upload = run_task(
        "upload-pipeline", ".buildkite/cuda/test-ready.yml", "--dry-run", env=env, cwd=repo.path
    )
    assert upload.returncode == 0, upload.stderr
    assert "(PR build from my-change (local): origin/release...HEAD)" in upload.stderr
    said = f"local build: PR from my-change against release {HINT}"
    assert said in plan.stderr.splitlines() and said in upload.stderr.splitlines()


def test_plan_labels_option_wins_over_the_buildkite_variable(corpus: GitRepo) -> None:
    repo = corpus
    repo.branch("my-change")
    repo.commit_files({MODEL: "class Model:\n    size = 17\n"}, "one model")
    env = local_env(BUILDKITE_PULL_REQUEST_LABELS="ready,nightly-test")
    args = ("plan", "--platform", "xpu", "--format", "json")
    from_env = run_task(*args, env=env, cwd=repo.path)
    given = run_task(*args, "--labels", "merge-test", env=env, cwd=repo.path)
    assert from_env.returncode == given.returncode == 0, from_env.stderr + given.stderr
    assert json.loads(from_env.stdout)["inputs"]["labels"] == ["ready", "nightly-test"]
    assert json.loads(given.stdout)["inputs"]["labels"] == ["merge-test"]


def test_plan_branch_defaults_to_buildkite_branch(corpus: GitRepo) -> None:
    repo = corpus
    repo.branch("my-change")
    repo.commit_files({MODEL: "class Model:\n    size = 18\n"}, "one model")
    args = ("plan", "--platform", "xpu", "--format", "json")
    done = run_task(*args, env=local_env(BUILDKITE_BRANCH="other"), cwd=repo.path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["inputs"]["branch"] == "other"
    assert "local build:" not in done.stderr


# --------------------------------------------------------------------------- BUILDKITE_COMMIT


@pytest.fixture(scope="module")
def sample_template(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """The sample pushed on main, a product change on branch `pr`; built once for the module."""
    repo = sample_checkout(tmp_path_factory.mktemp("sample-template") / "sample", SAMPLE)
    repo.branch("pr")
    repo.commit_files({"omni_sample/new_module.py": "VALUE = 1\n"}, "product change")
    return repo


@pytest.fixture
def sample(sample_template: GitRepo, tmp_path: Path) -> GitRepo:
    """A copy of `sample_template` for one test."""
    return copy_repo(sample_template, tmp_path)


@pytest.mark.parametrize(
    "args",
    [
        ("skip-ci", "--platform", "cuda", "--level", "l2"),
        ("upload-pipeline", ".buildkite/cuda/test-ready.yml", "--upload"),
        ("upload-pipeline", ".buildkite/cuda/bootstrap-upload-steps.yml", "--upload"),
        ("bootstrap", "--platform", "cuda"),
        ("bootstrap", "--platform", "npu"),
        ("bootstrap", "--platform", "xpu"),
    ],
    ids=["skip-ci", "upload-test", "upload-bootstrap", "bootstrap-cuda", "bootstrap-npu", "xpu"],
)
def test_inside_buildkite_a_missing_commit_stops_before_anything(
    sample: GitRepo, standins: StandIns, args: tuple[str, ...]
) -> None:
    """Item 23: one `error: BUILDKITE_COMMIT is not set …` line, exit 2, no git HEAD guess."""
    standins.add("buildkite-agent")
    env = standins.env(
        local_env(BUILDKITE="true", BUILDKITE_PULL_REQUEST="42", BUILDKITE_BRANCH="pr")
    )
    done = run_task(*args, env=env, cwd=sample.path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        "error: BUILDKITE_COMMIT is not set "
        "(BUILDKITE=true: a Buildkite build must name its commit)\n"
    )
    calls = standins.argvs("buildkite-agent")
    if args[0] == "upload-pipeline":
        # An upload job's errors are annotated on the build (W21); nothing is uploaded.
        [annotate] = calls
        assert annotate[:2] == ["annotate", "--style"]
        assert "- BUILDKITE_COMMIT is not set (BUILDKITE=true" in annotate[-1]
    else:
        assert calls == []


def test_inside_buildkite_the_tier_wants_the_commit_too(sample: GitRepo) -> None:
    env = local_env(BUILDKITE="true", BUILDKITE_BRANCH="pr")
    done = run_task("tier", "ready", "--platform", "rocm", "--native", env=env, cwd=sample.path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines() == ["error: BUILDKITE_COMMIT is not set"]


def test_outside_buildkite_a_missing_commit_is_head(sample: GitRepo) -> None:
    done = skip_ci(sample, local_env(BUILDKITE_PULL_REQUEST="42"))
    assert done.returncode == 1, done.stderr
    assert "[diff]: 1 changed file(s) (PR build #42: origin/main...HEAD)" in done.stderr


# --------------------------------------------------------------------------- no git


@pytest.fixture
def no_git(tmp_path: Path) -> dict[str, str]:
    """An env whose PATH has the Python interpreter and nothing else (no git)."""
    bin_dir = tmp_path / "python-only-bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):
        (bin_dir / name).symlink_to(sys.executable)
    env = local_env()
    env["PATH"] = str(bin_dir)
    return env


@pytest.mark.parametrize(
    ("args", "with_repo"),
    [
        (("skip-ci", "--platform", "cuda", "--level", "l2"), False),
        (("skip-ci", "--platform", "cuda", "--level", "l2"), True),
        (("plan", "--base", "HEAD~1"), True),
        (("plan",), False),
        (("check-marks", "--from-ref", "HEAD~1"), True),
        (("upload-pipeline", ".buildkite/cuda/test-ready.yml", "--dry-run"), True),
        (("bootstrap", "--platform", "cuda", "--dry-run"), True),
        (("bootstrap", "--platform", "xpu", "--dry-run"), False),
    ],
    ids=[
        "skip-ci",
        "skip-ci-repo",
        "plan-base",
        "plan",
        "check-marks",
        "upload-pipeline",
        "bootstrap-cuda",
        "bootstrap-xpu",
    ],
)
def test_without_git_on_path_the_task_says_so(
    sample: GitRepo, no_git: dict[str, str], args: tuple[str, ...], with_repo: bool
) -> None:
    """Item 29a: not "not inside a git repository" or "'HEAD~1' does not name a commit"."""
    repo = ("--repo", str(sample.path)) if with_repo else ()
    env = dict(no_git)
    if args[0] == "upload-pipeline":
        env["BUILDKITE_PULL_REQUEST"] = "42"  # was: "origin/main not found locally; trying fetch"
    done = run_task(*args, *repo, env=env, cwd=sample.path)
    assert (done.returncode, done.stdout, done.stderr) == (127, "", "error: git: not found\n")
