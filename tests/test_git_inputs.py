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
from ci.cli import run as run_cli
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
    argv = list(args)
    if args[0] != "select-suites":
        argv += ["--repo", str(repo)]
    try:
        run_cli(argv)
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


# ----------------------------------------------------------- 19: BUILDKITE_PULL_REQUEST

# The tasks that act for a build (and so read BUILDKITE_PULL_REQUEST).
BUILD_TASKS = [t for t in TASKS if t not in NO_ENV]


@pytest.mark.parametrize("task", BUILD_TASKS)
def test_a_pr_number_is_digits_or_false_for_every_task(
    task: str,
    checkout: GitRepo,
    build_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    for value in ("abc", "12a", "../x", "0x10", "-1", "\uff11", "1 2"):
        code, _ = run(
            TASKS[task], {**build_env, "BUILDKITE_PULL_REQUEST": value}, checkout.path, monkeypatch
        )
        err = capfd.readouterr().err
        assert code == 2, err
        assert said(err, f"error: BUILDKITE_PULL_REQUEST: {value!r} is not a PR number"), err
    for value in ("", "false", "5"):  # empty is unset; `false` is no PR
        skipci.clear_cache()
        code, _ = run(
            TASKS[task], {**build_env, "BUILDKITE_PULL_REQUEST": value}, checkout.path, monkeypatch
        )
        err = capfd.readouterr().err
        assert "BUILDKITE_PULL_REQUEST" not in err and code in (0, 1), err


def test_a_fork_prs_branch_is_a_branch(
    checkout: GitRepo,
    build_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Buildkite names a fork PR's branch `owner:branch`; that stays a good value."""
    env = {**build_env, "BUILDKITE_BRANCH": "some-user:feat", "BUILDKITE": "true"}
    for task in ("skip-ci", "bootstrap-cuda", "plan"):
        code, _ = run(TASKS[task], env, checkout.path, monkeypatch)
        assert code in (0, 1), capfd.readouterr().err
    code, _ = run([*TASKS["select-suites"][:-1], "u:feat"], env, checkout.path, monkeypatch)
    assert code == 0
    for bad in ("-u:feat", "u:-x", "u:a..b", "u:v:w"):
        code, _ = run(
            TASKS["skip-ci"], {**env, "BUILDKITE_BRANCH": bad}, checkout.path, monkeypatch
        )
        assert code == 2
        assert said(capfd.readouterr().err, f"error: BUILDKITE_BRANCH: {bad!r} is not a valid")


# ------------------------------------------------- 16, 20: --repo a loop; no git on PATH

# Every task that reads a checkout, as `--repo R` completes it.
CHECKOUT_TASKS: list[list[str]] = [
    *(TASKS[t] for t in TASKS if t != "select-suites"),
    ["lint-pipelines"],
    ["shellcheck-steps", "--dry-run"],
    ["migrate"],
    ["migrate", "--check"],
]


@pytest.mark.parametrize("shape", ["loop", "too-long", "unknown-user"])
@pytest.mark.parametrize("args", CHECKOUT_TASKS, ids=lambda a: "-".join(a[:2]))
def test_a_repo_that_cannot_be_a_directory_is_one_line(
    args: list[str],
    shape: str,
    tmp_path: Path,
    build_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A symlink loop, a name the system refuses as too long (ENAMETOOLONG) and an
    unknown `~user` each gave a traceback; each is one `--repo` line."""
    loop = tmp_path / "loop"
    if shape == "loop":
        loop.symlink_to(tmp_path / "loop2")
        (tmp_path / "loop2").symlink_to(loop)
    elif shape == "too-long":
        loop = tmp_path / ("x" * 300)
    else:
        loop = Path("~no-such-user-32/x")
    code, _ = run(args, build_env, loop, monkeypatch)
    err = capfd.readouterr().err
    assert code == 2, err
    assert err.startswith(f"error: --repo: {loop}"), err
    assert len(err.splitlines()) == 1, err


@pytest.mark.parametrize("args", CHECKOUT_TASKS, ids=lambda a: "-".join(a[:2]))
def test_without_git_every_checkout_task_says_so_and_exits_127(
    args: list[str],
    checkout: GitRepo,
    tmp_path: Path,
    build_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, _ = run(args, build_env, checkout.path, monkeypatch)
    err = capfd.readouterr().err
    assert code == 127, err
    assert err.splitlines() == ["error: git: not found"], err


# ------------------------------------------------------------ 9, 15: a stuck or odd git


def stand_in_git(tmp_path: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `git` first on PATH that runs `script` (sh) instead of git."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("task", ["skip-ci", "plan", "bootstrap-cuda", "upload-pipeline"])
def test_a_git_that_hangs_times_out_and_says_which(
    task: str,
    checkout: GitRepo,
    tmp_path: Path,
    build_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    stand_in_git(tmp_path, "exec sleep 60", monkeypatch)
    env = {**build_env, "VLLM_OMNI_CI_GIT_TIMEOUT": "0.3"}
    code, _ = run(TASKS[task], env, checkout.path, monkeypatch)
    err = capfd.readouterr().err
    assert code == 124, err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert line.startswith("error: git ") and " timed out after 0.3s" in line, err


@pytest.mark.parametrize("value", ["0", "-1", "x", "nan", "1e99"])
def test_the_git_timeout_knob_is_checked(
    value: str,
    checkout: GitRepo,
    build_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    env = {**build_env, "VLLM_OMNI_CI_GIT_TIMEOUT": value}
    code, _ = run(TASKS["skip-ci"], env, checkout.path, monkeypatch)
    err = capfd.readouterr().err
    assert code == 2, err
    assert said(err, f"error: VLLM_OMNI_CI_GIT_TIMEOUT: {value!r} is not a number of seconds")


def test_a_probe_is_bounded_and_its_timeout_names_the_program() -> None:
    from ci import door

    assert door.capture.__kwdefaults__["timeout"] == door.CAPTURE_TIMEOUT
    result = door.capture(["sleep", "30"], timeout=0.2)
    assert result.timed_out and result.code == 124
    assert result.stderr.splitlines()[-1] == "sleep timed out after 0.2s"


@pytest.mark.parametrize("task", [*BUILD_TASKS, "check-marks"])
def test_a_git_that_prints_garbage_is_one_error_line(
    task: str,
    checkout: GitRepo,
    tmp_path: Path,
    build_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A `git` that answers nonsense and exits 0: an error or a normal outcome, no traceback."""
    stand_in_git(
        tmp_path, "printf 'garbage \\342\\230\\203 --x\\n../../etc\\0'; exit 0", monkeypatch
    )
    for env in (build_env, {k: v for k, v in build_env.items() if k != "BUILDKITE_COMMIT"}):
        skipci.clear_cache()
        code, _ = run(TASKS[task], env, checkout.path, monkeypatch)
        err = capfd.readouterr().err
        assert code in (0, 1, 2), err
        assert "Traceback" not in err


@pytest.mark.parametrize("args", [["plan"], ["step", "--", "true"]], ids=["plan", "step"])
def test_a_deleted_working_directory_is_one_line(
    args: list[str], tmp_path: Path, build_env: dict[str, str]
) -> None:
    """A working directory deleted under us gave a FileNotFoundError traceback. A process
    of its own: the test's own working directory must stay. The program is called by its
    path beside the interpreter (a version manager's shim cannot start in a deleted folder)."""
    import subprocess
    import sys

    gone = tmp_path / "gone"
    gone.mkdir()
    program = str(Path(sys.executable).parent / "vllm-omni-ci")
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    done = subprocess.run(
        ["bash", "-c", script, "-", str(gone), program, *args],
        env={**os.environ, **build_env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "error: the current directory cannot be read" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
