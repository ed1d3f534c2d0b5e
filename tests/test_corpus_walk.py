"""Findings of running every task against the real corpus as a CI maintainer would.

Each test pins one problem found that way: a command the bootstrap emits that
could not work on a real agent, or a message that did not say what was wrong.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from ci.images import npu
from tests.corpus import make_corpus
from tests.gitrepo import GitRepo, buildkite_env
from tests.inproc import run_task


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """The corpus on `main` (pushed) with the NPU image steps opting into the buildctl download."""
    path = make_corpus(tmp_path_factory.mktemp("walk") / "omni")
    steps_file = path / ".buildkite/npu/bootstrap-upload-steps.yml"
    text = steps_file.read_text()
    anchor = "    env:\n      VLLM_IMAGE_TAG:"
    assert text.count(anchor) == 4  # one env block per image step
    opted_in = f'    env:\n      {npu.INSTALL_ENV}: "1"\n      VLLM_IMAGE_TAG:'
    steps_file.write_text(text.replace(anchor, opted_in))
    (path / "docker").mkdir()
    (path / "docker/Dockerfile.npu.ci").write_text("FROM scratch\n")
    repo = GitRepo.create(path)
    repo.write("vllm_omni/model.py", "x = 1\n")
    repo.commit("base")
    repo.push("main")
    return repo


def ci_env(repo: GitRepo, **more: str) -> dict[str, str]:
    sha = repo.git("rev-parse", "HEAD").strip()
    return buildkite_env(
        None,
        BUILDKITE="true",
        BUILDKITE_BRANCH="main",
        BUILDKITE_COMMIT=sha,
        BUILDKITE_PULL_REQUEST="false",
        NIGHTLY="1",
        **more,
    )


def leaves(node: object) -> list[dict[str, object]]:
    if isinstance(node, dict):
        if isinstance(node.get("steps"), list):
            return [s for child in node["steps"] for s in leaves(child)]
        return [node]
    return []


def test_generated_npu_image_steps_can_opt_into_the_buildctl_download(
    corpus: GitRepo, tmp_path: Path
) -> None:
    # The script downloaded buildctl when missing; build-image needs an opt-in, and the
    # bootstrap generates the image commands, so the opt-in must travel in the step env.
    done = run_task(
        "bootstrap", "--platform", "npu", "--dry-run", env=ci_env(corpus), cwd=corpus.path
    )
    assert done.returncode == 0, done.stderr
    images = [s for s in leaves(yaml.safe_load(done.stdout)) if "image-build" in str(s.get("key"))]
    assert len(images) == 4
    # An agent without buildctl: only git and python on PATH.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "python3"):
        found = shutil.which(tool)
        assert found
        (bin_dir / tool).symlink_to(found)
    for step in images:
        env_block = step["env"]
        assert isinstance(env_block, dict) and env_block[npu.INSTALL_ENV] == "1"
        (command,) = step["commands"]  # type: ignore[misc]
        argv = shlex.split(command)
        assert argv[:2] == ["vllm-omni-ci", "build-image"]
        env = {**ci_env(corpus), **{k: str(v) for k, v in env_block.items()}, "PATH": str(bin_dir)}
        ran = run_task(*argv[1:], "--dry-run", env=env, cwd=corpus.path)
        assert ran.returncode == 0, ran.stderr
        assert "# buildctl: not on PATH; --install-buildctl downloads https://" in ran.stdout
        assert "mkdir -p /tmp/buildkit" in ran.stdout
    # Without the opt-in a real run stops before anything, naming both ways to opt in.
    env = {**ci_env(corpus), "PATH": str(bin_dir)}
    ran = run_task("build-image", "--platform", "npu", "--variant", "a2", env=env, cwd=corpus.path)
    assert ran.returncode == 2
    assert f"pass --install-buildctl (or set {npu.INSTALL_ENV}=1)" in ran.stderr


def test_upload_pipeline_of_an_amd_suite_yaml_names_the_task_to_use(corpus: GitRepo) -> None:
    # It used to render the template data and print one error per step (25 for ready).
    for name in ("test-amd-ready.yml", "test-amd-merge.yml", "test-amd-nightly.yml"):
        pipeline = f".buildkite/amd/{name}"
        done = run_task(
            "upload-pipeline", pipeline, "--dry-run", env=ci_env(corpus), cwd=corpus.path
        )
        assert done.returncode == 1
        assert done.stdout == ""
        assert done.stderr.splitlines() == [
            f"error: {pipeline}: AMD suite YAMLs are rendered by `vllm-omni-ci bootstrap "
            "--platform rocm` (suites: `vllm-omni-ci select-suites`), not by upload-pipeline"
        ]


def test_invalid_pipeline_yaml_says_why(corpus: GitRepo) -> None:
    # The corpus' entry pipeline is two YAML documents (lint-pipelines checks each); the
    # uploader said only `invalid pipeline YAML: <path>`.
    pipeline = ".buildkite/cuda/pipeline.yml"
    done = run_task("upload-pipeline", pipeline, "--dry-run", env=ci_env(corpus), cwd=corpus.path)
    assert done.returncode == 1
    assert done.stdout == ""
    assert (
        f"error: invalid pipeline YAML: {corpus.path / pipeline} "
        "(invalid YAML at line 16, column 1: but found another document)"
    ) in done.stderr.splitlines()
