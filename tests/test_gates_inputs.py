"""Gates over entries they cannot read, and files their consumers reject (issue 23: 28a, 30a, 30b).

Tests run as root, so "unreadable" means what root cannot read either: a
symlink loop, a dangling link, a FIFO (reading one used to block forever), a
directory where a file is expected. Each is one error line naming the path,
and a gate that meets one fails (exit 1): it cannot pass what it did not read.
The timeouts only catch a hang.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SAMPLE
from tests.gitrepo import GitRepo, buildkite_env, sample_checkout
from tests.inproc import run_task

HANG = 60


def loop(path: Path) -> str:
    path.symlink_to(path.name)
    return "symlink loop"


def dangling(path: Path) -> str:
    path.symlink_to("nowhere.yml")
    return "dangling symlink to nowhere.yml"


def fifo(path: Path) -> str:
    os.mkfifo(path)
    return "a FIFO, not a regular file"


KINDS: dict[str, Callable[[Path], str]] = {"loop": loop, "dangling": dangling, "fifo": fifo}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    return sample_checkout(tmp_path_factory.mktemp("gates-inputs") / "repo", SAMPLE)


@pytest.fixture
def repo(sample: GitRepo, tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    shutil.copytree(sample.path, copy, symlinks=True)
    return copy


def gate(*args: str) -> tuple[int, str, str]:
    env = buildkite_env()
    env.pop("MIRROR_HW", None)
    done = run_task(*args, env=env, timeout=HANG)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


# ------------------------------------------------------------- 28a: unreadable entries


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("task", ["lint-pipelines", "shellcheck-steps"])
def test_an_unreadable_pipeline_fails_the_gate_naming_it(repo: Path, task: str, kind: str) -> None:
    """A looping link under .buildkite/ was a RuntimeError traceback in lint-pipelines and
    silently skipped by shellcheck-steps (exit 0); a FIFO hung lint-pipelines."""
    rel = ".buildkite/cuda/test-extra.yml"
    why = KINDS[kind](repo / rel)
    extra = ["--dry-run"] if task == "shellcheck-steps" else []
    code, _out, err = gate(task, "--repo", str(repo), *extra)
    assert code == 1, err
    (line,) = [e for e in errors(err) if "test-extra.yml" in e]
    assert line.endswith(f"test-extra.yml: cannot read: {why}"), line


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_unreadable_test_file_fails_check_marks(repo: Path, kind: str) -> None:
    """A FIFO under tests/ hung check-marks; every unreadable file is a problem, never OK."""
    why = KINDS[kind](repo / "tests/test_extra.py")
    code, out, err = gate("check-marks", "--repo", str(repo))
    assert code == 1, err
    assert f"tests/test_extra.py:\n  Unreadable: {why}\n" in out
    assert "OK" not in err


def test_check_marks_on_a_range_does_not_skip_an_unreadable_change(
    sample: GitRepo, tmp_path: Path
) -> None:
    """`--from-ref` kept only `is_file()` paths, so a changed test file that became a
    symlink loop was skipped and the gate said there was nothing to check (exit 0)."""
    clone = GitRepo(tmp_path / "clone")
    assert sample.origin is not None
    clone.git("clone", "-q", "--branch", "main", str(sample.origin), str(clone.path), cwd=tmp_path)
    clone.git("config", "commit.gpgsign", "false")
    clone.git("checkout", "-q", "-b", "pr")
    loop(clone.path / "tests/test_looping.py")
    clone.commit("a test file that is a symlink loop")
    code, out, err = gate("check-marks", "--repo", str(clone.path), "--from-ref", "main")
    assert code == 1, err
    assert "tests/test_looping.py:\n  Unreadable: symlink loop\n" in out


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["check-marks"], 2),
        (["lint-pipelines"], 1),
        (["upload-pipeline", ".buildkite/cuda/test-ready.yml", "--dry-run", "--scope", "all"], 1),
    ],
    ids=["check-marks", "lint-pipelines", "upload-pipeline"],
)
def test_a_looping_marker_registry_is_one_line(repo: Path, args: list[str], code: int) -> None:
    """`Path.resolve()` raised RuntimeError (a traceback) on a looping pyproject.toml.
    check-marks keeps its code for a bad registry (2, bad input); the uploader's is 1."""
    path = repo / "pyproject.toml"
    path.unlink()
    loop(path)
    got, _out, err = gate(*args, "--repo", str(repo))
    assert got == code, err
    assert f"error: cannot read pytest marker registry: {path}: symlink loop" in err.splitlines()


@pytest.mark.parametrize("task", ["lint-pipelines", "upload-pipeline"])
def test_a_registry_that_is_a_fifo_is_an_error_not_a_hang(repo: Path, task: str) -> None:
    path = repo / ".buildkite/common/ci_mirror_hardwares.yml"
    path.unlink()
    fifo(path)
    args = [".buildkite/cuda/test-ready.yml", "--dry-run", "--scope", "all"]
    code, _out, err = gate(task, *(args if task == "upload-pipeline" else []), "--repo", str(repo))
    assert code == 1, err
    assert (
        f"error: invalid CI mirror_hardwares registry: {path} "
        "(cannot read: a FIFO, not a regular file)"
    ) in err.splitlines()


@pytest.mark.parametrize("kind", ["loop", "fifo"])
@pytest.mark.parametrize(
    "rel", [".buildkite/cuda/test-ready.yml", ".buildkite/cuda/bootstrap-upload-steps.yml"]
)
def test_upload_pipeline_says_why_it_cannot_read_the_file(repo: Path, rel: str, kind: str) -> None:
    """A looping or FIFO pipeline file was `missing pipeline file`: it is there, and
    unreadable. Checked before either mode reads it, so the FIFO never blocks a reader."""
    path = repo / rel
    path.unlink()
    why = KINDS[kind](path)
    code, _out, err = gate("upload-pipeline", rel, "--dry-run", "--repo", str(repo))
    assert code == 1
    assert errors(err) == [f"error: invalid pipeline YAML: {path} (cannot read: {why})"]


# ------------------------------------------ 30b: judged as the consuming task judges


@pytest.mark.parametrize("task", ["lint-pipelines", "shellcheck-steps"])
def test_an_empty_amd_suite_fails_like_the_bootstrap(repo: Path, task: str) -> None:
    """lint-pipelines passed an empty `test-amd-merge.yml`, which the AMD bootstrap refuses;
    both gates now print the bootstrap's own line."""
    path = repo / ".buildkite/amd/test-amd-merge.yml"
    path.write_text("# nothing here yet\n")
    env = buildkite_env(DEBUG_TEST_YAML="merge")
    bootstrap = run_task(
        "bootstrap", "--platform", "rocm", "--dry-run", "--repo", str(repo), env=env, timeout=HANG
    )
    assert bootstrap.returncode == 1
    (expected,) = errors(bootstrap.stderr)
    assert expected == f"error: {path}: not an AMD suite (a mapping with a `steps` list)"
    extra = ["--dry-run"] if task == "shellcheck-steps" else []
    code, _out, err = gate(task, "--repo", str(repo), *extra)
    assert code == 1, err
    assert errors(err) == [expected]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("just a string\n", "not a pipeline (a mapping with `steps`, or a list of steps), got str"),
        ("steps: 5\n", "`steps` must be a list, got int"),
        ("# empty\n", "empty, not a pipeline (a mapping with `steps`, or a list of steps)"),
    ],
    ids=["scalar", "steps-not-a-list", "empty"],
)
def test_shellcheck_steps_does_not_skip_a_malformed_pipeline(
    repo: Path, text: str, problem: str
) -> None:
    """Such a file runs no step, so the gate skipped it silently and passed."""
    (repo / ".buildkite/cuda/pipeline-extra.yml").write_text(text)
    code, _out, err = gate("shellcheck-steps", "--dry-run", "--repo", str(repo))
    assert code == 1, err
    assert errors(err) == [f"error: .buildkite/cuda/pipeline-extra.yml: {problem}"]


def test_shellcheck_steps_refuses_a_test_yaml_the_uploader_refuses(repo: Path) -> None:
    """Two YAML documents in a CUDA test YAML: the uploader refuses the file, so the gate
    does too, with the uploader's line (it used to check both documents and pass)."""
    path = repo / ".buildkite/cuda/test-extra.yml"
    path.write_text("steps:\n  - command: echo a\n---\nsteps:\n  - command: echo b\n")
    upload = run_task(
        "upload-pipeline", str(path), "--dry-run", "--scope", "all", "--repo", str(repo),
        timeout=HANG,
    )  # fmt: skip
    (expected,) = errors(upload.stderr)
    assert "but found another document" in expected
    code, _out, err = gate("shellcheck-steps", "--dry-run", "--repo", str(repo))
    assert code == 1, err
    assert errors(err) == [expected]
