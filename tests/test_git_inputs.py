"""Hostile values in every `BUILDKITE_*` variable and option that reaches git (issue 32, item 1).

`BUILDKITE_PULL_REQUEST_BASE_BRANCH='--upload-pack=touch x;'` once reached `git fetch` as
an option and ran. Every task that reads a checkout now refuses such a value before any
work (`ci.refnames`, `ci.target.build_env_problems`), and every git call puts refs after
`--end-of-options`. Each task runs in-process on a copy of the sample checkout, with and
without `BUILDKITE=true`: no marker file may appear, and the exit is 2 where the task reads
the value (a normal outcome where it does not), never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci import skipci
from ci.cli import program
from tests.conftest import SAMPLE
from tests.gitrepo import GitRepo, sample_checkout

CUDA_TEST = ".buildkite/cuda/test-ready.yml"
CUDA_BOOTSTRAP = ".buildkite/cuda/bootstrap-upload-steps.yml"
# The shapes an attacker tries: an option of `git fetch`, and a `-c` config of any git.
HOSTILE = ("--upload-pack=touch {marker};", "-c core.sshCommand=touch {marker}")
ENV_VARS = (
    "BUILDKITE_PULL_REQUEST_BASE_BRANCH",
    "BUILDKITE_BRANCH",
    "BUILDKITE_COMMIT",
    "BUILDKITE_PULL_REQUEST",
)
# Every task that reads a checkout (and select-suites, which takes a branch), as run here.
TASKS: dict[str, list[str]] = {
    "skip-ci": ["skip-ci", "--platform", "cuda", "--level", "l2"],
    "upload-pipeline": ["upload-pipeline", CUDA_TEST, "--dry-run"],
    "upload-bootstrap-file": ["upload-pipeline", CUDA_BOOTSTRAP, "--dry-run"],
    "bootstrap-rocm": ["bootstrap", "--platform", "rocm", "--dry-run", "--labels", "ready"],
    "bootstrap-cuda": ["bootstrap", "--platform", "cuda", "--dry-run"],
    "bootstrap-npu": ["bootstrap", "--platform", "npu", "--dry-run"],
    "bootstrap-xpu": ["bootstrap", "--platform", "xpu", "--dry-run"],
    "plan": ["plan", "--labels", "ready"],
    "check-marks": ["check-marks", "--from-ref", "main"],
    "select-suites": ["select-suites", "--branch", "main"],
}
# Tasks that may not read BUILDKITE_* variables: a normal outcome or 2, but no marker.
NO_ENV = ("check-marks", "select-suites")
# Options that name a revision or a branch, per task (replacing the task's own value).
OPTIONS: list[tuple[str, str]] = [
    ("plan", "--base"),
    ("plan", "--head"),
    ("plan", "--branch"),
    ("check-marks", "--from-ref"),
    ("check-marks", "--to-ref"),
    ("select-suites", "--branch"),
]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """The sample on `main` (pushed), and a PR branch `feat` that changes a test file."""
    repo = sample_checkout(tmp_path_factory.mktemp("git-inputs") / "repo", SAMPLE)
    repo.branch("feat")
    repo.commit_files({"tests/test_hostile_probe.py": "import pytest\n"}, "a PR change")
    return repo


@pytest.fixture
def build_env(monkeypatch: pytest.MonkeyPatch, checkout: GitRepo) -> Iterator[dict[str, str]]:
    """A PR build's variables (no outer job's), set in os.environ by `run`."""
    for name in [k for k in os.environ if k.startswith("BUILDKITE") or k in ("CI", "MIRROR_HW")]:
        monkeypatch.delenv(name)
    skipci.clear_cache()
    yield {
        "BUILDKITE_PULL_REQUEST": "5",
        "BUILDKITE_BRANCH": "feat",
        "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main",
        "BUILDKITE_COMMIT": checkout.sha(),
        "BUILDKITE_PULL_REQUEST_LABELS": "ready",
    }
    skipci.clear_cache()


def run(
    args: list[str], env: dict[str, str], repo: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    """The task in-process: its exit code and stderr (an exception is a traceback: fails)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    argv = ["vllm-omni-ci", *args]
    if args[0] != "select-suites":
        argv += ["--repo", str(repo)]
    try:
        program().run(argv)
    except SystemExit as done:
        return int(done.code or 0), ""
    return 0, ""


def said(err: str, prefix: str) -> bool:
    return any(line.startswith(prefix) for line in err.splitlines())


@pytest.mark.parametrize("name", ENV_VARS)
@pytest.mark.parametrize("task", list(TASKS))
def test_a_hostile_build_variable_runs_nothing(
    task: str,
    name: str,
    checkout: GitRepo,
    build_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    marker = tmp_path / "MARKER"
    for shape in HOSTILE:
        value = shape.format(marker=marker)
        for buildkite in ("", "true"):
            env = {**build_env, name: value, "BUILDKITE": buildkite}
            code, _ = run(TASKS[task], env, checkout.path, monkeypatch)
            err = capfd.readouterr().err
            assert not marker.exists(), (task, name, value, buildkite, err)
            assert "Traceback" not in err
            if task in NO_ENV:
                assert code in (0, 1, 2), err
            else:
                assert code == 2, err
                assert said(err, f"error: {name}: {value!r} is not "), err


@pytest.mark.parametrize(("task", "option"), OPTIONS)
def test_a_hostile_option_runs_nothing(
    task: str,
    option: str,
    checkout: GitRepo,
    build_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    marker = tmp_path / "MARKER"
    args = TASKS[task]
    for shape in HOSTILE:
        value = shape.format(marker=marker)
        given = [*args[: args.index(option)], option, value] if option in args else []
        given = given or [*args, option, value]
        for buildkite in ("", "true"):
            code, _ = run(given, {**build_env, "BUILDKITE": buildkite}, checkout.path, monkeypatch)
            err = capfd.readouterr().err
            assert not marker.exists(), (task, option, value, err)
            assert code == 2, err
            assert said(err, f"error: {option}: {value!r} is not "), err


def test_a_dry_run_never_fetches(
    checkout: GitRepo,
    build_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A PR base missing locally is fetched by a real run; `--dry-run` starts nothing."""
    env = {**build_env, "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "release", "BUILDKITE": "true"}
    for args in (
        TASKS["bootstrap-cuda"],
        TASKS["bootstrap-xpu"],
        TASKS["bootstrap-rocm"],
        TASKS["upload-pipeline"],
        TASKS["upload-bootstrap-file"],
    ):
        skipci.clear_cache()
        code, _ = run(args, env, checkout.path, monkeypatch)
        err = capfd.readouterr().err
        assert code == 0, err
        assert "[diff]: origin/release not found locally; not fetched" in err, err
        assert "trying fetch" not in err and "git fetch" not in err, err
