"""The exit-code table of the foundation issue, one test per row, through `vllm-omni-ci`.

Callers (Buildkite retry rules, shims, `if word=$(vllm-omni-ci skip-ci ...)`)
depend on these codes, so each row is checked end to end: the code, the
message on the right stream, and never a traceback. The area test files check
every message variant; this file is the table itself.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from tests.conftest import SAMPLE, StandIns, run_cli
from tests.gitrepo import GitRepo, buildkite_env, sample_checkout


def clean_env(**values: str) -> dict[str, str]:
    """The outer environment without anything that would steer the task under test."""
    env = buildkite_env()
    for name in ("CI", "DEBUG_TEST_YAML", "NIGHTLY", "MIRROR_HW", "VLLM_VERSION", "TEST_COMMANDS"):
        env.pop(name, None)
    env.pop("VLLM_CI_DOCKER_DISABLED", None)
    env.pop("ROCM_CI_IMAGE_REGISTRY", None)
    env.update(values)
    return env


def check(
    done: CompletedProcess[str], code: int, *, stderr_has: str = "", stdout: str | None = None
) -> None:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    if stderr_has:
        assert stderr_has in done.stderr.splitlines(), done.stderr
    if stdout is not None:
        assert done.stdout == stdout


@pytest.fixture(scope="module")
def sample_repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """A copy of the sample as its own repo: main pushed, then a PR branch `pr`."""
    repo = sample_checkout(tmp_path_factory.mktemp("exit-codes") / "repo", SAMPLE)
    repo.branch("pr")
    return repo


def pr_env(repo: GitRepo, **values: str) -> dict[str, str]:
    env = clean_env(
        BUILDKITE="true",
        BUILDKITE_BRANCH="pr",
        BUILDKITE_COMMIT=repo.sha(),
        BUILDKITE_PULL_REQUEST="42",
        BUILDKITE_PULL_REQUEST_BASE_BRANCH="main",
    )
    env.update(values)
    return env


def on_branch(repo: GitRepo, files: Mapping[str, str], tmp_path: Path) -> GitRepo:
    """A fresh clone of `repo` on a new branch with `files` committed."""
    clone = GitRepo(tmp_path / "clone")
    assert repo.origin is not None
    repo.git("clone", "-q", "--branch", "main", str(repo.origin), str(clone.path), cwd=tmp_path)
    clone.git("config", "commit.gpgsign", "false")
    clone.git("checkout", "-q", "-b", "pr")
    clone.commit_files(dict(files), "change")
    return clone


# ------------------------------------------------------------------- usage errors: 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["doctor", "--no-such-flag"],
            "error: doctor: unknown option '--no-such-flag'; options: --builder, --docker, --json"
            " (see `vllm-omni-ci doctor --help`)",
        ),
        (["no-such-task"], "error: no task named 'no-such-task' (see `vllm-omni-ci --list`)"),
        # A typo gets the closest name (difflib), for tasks and for options.
        (["paln"], "error: no task named 'paln'; did you mean 'plan'?"),
        (
            ["relase.publish-images"],
            "error: no task named 'relase.publish-images'; did you mean 'release.publish-images'?",
        ),
        (["--lsit"], "error: unknown option '--lsit'; did you mean '--list'?"),
        (
            ["doctor", "--jsno"],
            "error: doctor: unknown option '--jsno'; did you mean '--json'? (see `vllm-omni-ci"
            " doctor --help`)",
        ),
        # Invoke's -f/--config loaded a file no task reads: refused before the task starts.
        (
            ["-f", "vllm-omni-ci.yaml", "step", "--", "touch", "ran"],
            "error: -f/--config: config files are not supported (no task reads one); give settings"
            " as task options or environment variables (see `vllm-omni-ci <task> --help`)",
        ),
        (
            ["--config=ci.yml", "doctor"],
            "error: -f/--config: config files are not supported (no task reads one); give settings"
            " as task options or environment variables (see `vllm-omni-ci <task> --help`)",
        ),
        # An explicit empty choice (an unset variable) was silently the default.
        (
            ["upload-pipeline", "--pipeline", "x.yml", "--platform", "", "--dry-run"],
            "error: upload-pipeline: --platform: an empty value; allowed values are cuda, npu",
        ),
        (
            ["upload-pipeline", "--pipeline", "x.yml", "--scope=", "--dry-run"],
            "error: upload-pipeline: --scope: an empty value; allowed values are diff, all, e2e,"
            " auto",
        ),
        (
            ["build-image", "--platform", "npu", "--variant", " ", "--dry-run"],
            "error: build-image: --variant: an empty value; allowed values are a2, a3, a5, 310p",
        ),
        (
            ["plan", "--platform", "cuda", "--platform", ""],
            "error: plan: --platform: an empty value; allowed values are rocm (alias amd), cuda,"
            " npu, xpu (alias intel)",
        ),
        (
            ["plan", "--format", ""],
            "error: plan: --format: an empty value; allowed values are table, json, markdown",
        ),
        (
            ["release.publish-images", "--mode", "", "--commit", "abc", "--dry-run"],
            "error: release.publish-images: --mode: an empty value; allowed values are release,"
            " nightly",
        ),
        (
            ["run-tests", "--platform", "", "--", "touch ran"],
            "error: run-tests: --platform: an empty value; allowed values are rocm (alias amd),"
            " npu, xpu (alias intel)",
        ),
        (
            ["doctor", "extra"],
            "error: doctor: unexpected argument 'extra' (see `vllm-omni-ci doctor --help`)",
        ),
        (
            ["step", "--summary-tail", "x", "--", "true"],
            "error: step: --summary-tail: 'x' is not a whole number",
        ),
        (
            ["step", "--summary-tail=ten", "--", "true"],
            "error: step: --summary-tail: 'ten' is not a whole number",
        ),
        (
            ["step", "--timeout"],
            "error: step: --timeout needs a value (see `vllm-omni-ci step --help`)",
        ),
        (
            ["skip-ci", "--level"],
            "error: skip-ci: --level needs a value (see `vllm-omni-ci skip-ci --help`)",
        ),
        # A list option without its value ran the task with its defaults.
        (
            ["wheelhouse", "--dest"],
            "error: wheelhouse: --dest needs a value (see `vllm-omni-ci wheelhouse --help`)",
        ),
        (
            ["wheelhouse", "--dest", "--dry-run"],
            "error: wheelhouse: --dest needs a value (see `vllm-omni-ci wheelhouse --help`)",
        ),
        (
            ["plan", "--platform"],
            "error: plan: --platform needs a value (see `vllm-omni-ci plan --help`)",
        ),
        # A value option given twice: Invoke said "No idea what 'l3' is!".
        (
            ["skip-ci", "--platform", "cuda", "--level", "l2", "--level", "l3"],
            "error: skip-ci: --level is given twice; give it once",
        ),
        (
            ["step", "--timeout=1m", "--timeout", "2m", "--", "touch", "ran"],
            "error: step: --timeout is given twice; give it once",
        ),
        (
            ["bootstrap", "--platform", "cuda", "--platform", "npu", "--dry-run"],
            "error: bootstrap: --platform is given twice; give it once",
        ),
        # An explicit empty path (an unset variable) was the default: the cwd, auto-detection.
        (
            ["skip-ci", "--platform", "cuda", "--level", "l2", "--repo="],
            "error: skip-ci: --repo: an empty path; give one, or leave --repo out",
        ),
        (
            ["step", "--artifact-dir", " ", "--", "touch", "ran"],
            "error: step: --artifact-dir: an empty path; give one, or leave --artifact-dir out",
        ),
        (
            ["doctor", "--docker", ""],
            "error: doctor: --docker: an empty path; give one, or leave --docker out",
        ),
        # Invoke's core options for c.run(): `--dry` is not `--dry-run`, and ran the command.
        (
            ["step", "--dry", "--", "touch", "ran"],
            "error: --dry: not accepted: Invoke's option for shell commands, which no task runs"
            " (did you mean --dry-run?)",
        ),
        (
            ["-e", "step", "-R", "--", "touch", "ran"],
            "error: --echo: not accepted: Invoke's option for shell commands, which no task runs",
        ),
        (
            ["doctor", "-T", "3"],
            "error: --command-timeout: not accepted: Invoke's option for shell commands, which no"
            " task runs",
        ),
    ],
)
def test_bad_arguments_exit_2_under_vllm_omni_ci(
    args: list[str], message: str, tmp_path: Path
) -> None:
    check(run_cli(*args, cwd=tmp_path, env=clean_env()), 2, stderr_has=message, stdout="")
    assert not (tmp_path / "ran").exists()


def test_inv_refuses_dry_too(tmp_path: Path) -> None:
    """`inv` in the repo root runs the same program: `--dry` does not run the step."""
    import subprocess

    from tests.conftest import ROOT

    marker = tmp_path / "ran"
    done = subprocess.run(
        ["inv", "step", "--dry", "--", "touch", str(marker)],
        cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    check(done, 2, stdout="")
    assert done.stderr.startswith("error: --dry: not accepted: ")
    assert not marker.exists()


def test_inv_refuses_config_and_suggests_tasks_too(tmp_path: Path) -> None:
    """`inv` in the repo root runs the same program: the same lines, the same exit code."""
    import subprocess

    from tests.conftest import ROOT

    config = tmp_path / "bad.yaml"
    config.write_text("run: [unclosed\n")
    for args, line in (
        (["-f", str(config), "doctor", "--json"], "error: -f/--config: config files are not"),
        (["paln"], "error: no task named 'paln'; did you mean 'plan'?"),
    ):
        done = subprocess.run(
            ["inv", *args], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=60
        )
        check(done, 2, stdout="")
        assert done.stderr.startswith(line), done.stderr
        assert len(done.stderr.splitlines()) == 1


def test_an_unreadable_invoke_runtime_config_is_ignored(tmp_path: Path) -> None:
    """No task reads Invoke's config: `$INVOKE_RUNTIME_CONFIG` naming a bad file was a traceback."""
    bad = tmp_path / "no-such-config"
    done = run_cli(
        "step", "--", "touch", "ran", cwd=tmp_path, env=clean_env(INVOKE_RUNTIME_CONFIG=str(bad))
    )
    check(done, 0)
    assert (tmp_path / "ran").exists()


def test_empty_values_after_the_dashes_and_empty_free_values_are_not_refused(
    tmp_path: Path,
) -> None:
    """Only task options are checked; `--branch ''` (select-suites: not main) is a value."""
    done = run_cli(
        "step", "--", "bash", "-c", "touch ran", "-", "--platform", "",
        cwd=tmp_path, env=clean_env(),
    )  # fmt: skip
    check(done, 0)
    assert (tmp_path / "ran").exists()
    suites = run_cli("select-suites", "--branch", "", cwd=tmp_path, env=clean_env())
    assert suites.returncode != 2 or "an empty value" not in suites.stderr, suites.stderr
    assert "Traceback" not in suites.stderr


DEV_FULL = Path("/dev/full")


@pytest.mark.skipif(not DEV_FULL.exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ["--list"],
        ["--version"],
        ["step", "--dry-run", "--", "true"],
        ["select-suites", "--branch", "main"],
        ["release.publish-images", "--mode", "nightly", "--commit", "abc", "--dry-run"],
        ["upload-pipeline", ".buildkite/cuda/test-ready.yml", "--repo", str(SAMPLE), "--dry-run"],
        ["run-tests", "--platform", "npu", "--dry-run", "--", "true"],
    ],
    ids=lambda args: args[0].lstrip("-"),
)
def test_a_full_stdout_is_one_error_line_not_a_traceback(args: list[str], tmp_path: Path) -> None:
    """`… > /dev/full`: an OSError traceback before; now one line and exit 74 (EX_IOERR)."""
    import subprocess

    from tests.conftest import cli_path

    with DEV_FULL.open("w") as full:
        done = subprocess.run(
            [cli_path(), *args], stdout=full, stderr=subprocess.PIPE, text=True,
            cwd=tmp_path, env=clean_env(BUILDKITE_COMMIT="abc"), timeout=120,
        )  # fmt: skip
    assert done.returncode == 74, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert done.stderr.splitlines()[-1] == "error: cannot write to stdout: No space left on device"


def test_a_reader_that_leaves_early_ends_us_quietly(tmp_path: Path) -> None:
    """`vllm-omni-ci … | head`: no BrokenPipeError traceback, the shell's 141 (128+SIGPIPE)."""
    import subprocess

    from tests.conftest import cli_path

    read, write = os.pipe()
    os.close(read)  # the reader is already gone when the first line is written
    with os.fdopen(write, "w") as stdout:
        done = subprocess.run(
            [cli_path(), "--list"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=clean_env(),
            timeout=60,
        )
    assert done.returncode == 141, done.stderr
    assert done.stderr == ""


# ------------------------------------------------------------------ skip-ci: 0 / 1 / 2


@pytest.mark.parametrize(
    ("files", "args", "code", "stdout"),
    [
        ({"docs/extra.md": "more\n"}, ["--platform", "cuda", "--level", "l2"], 0, "skip-all\n"),
        ({"omni_sample/extra.py": "x = 1\n"}, ["--platform", "cuda", "--level", "l2"], 1, ""),
        ({"docs/extra.md": "more\n"}, ["--platform", "tpu", "--level", "l2"], 2, ""),
        ({"docs/extra.md": "more\n"}, ["--platform", "cuda", "--level", "l9"], 2, ""),
    ],
    ids=["stop", "run", "bad-platform", "bad-level"],
)
def test_skip_ci_stop_run_bad(
    sample_repo: GitRepo,
    tmp_path: Path,
    files: dict[str, str],
    args: list[str],
    code: int,
    stdout: str,
) -> None:
    clone = on_branch(sample_repo, files, tmp_path)
    done = run_cli("skip-ci", *args, env=pr_env(clone), cwd=clone.path)
    check(done, code, stdout=stdout)
    if code == 2:
        assert done.stderr.startswith("error: ")


# ------------------------------------------------------- native runner pre-flight: 1


def test_native_runner_preflight_failure_exits_1(tmp_path: Path) -> None:
    done = run_cli(
        "run-tests", "--platform", "rocm", "--", "touch ran",
        env=clean_env(BUILDKITE_JOB_ID="exit-codes"), cwd=tmp_path,
    )  # fmt: skip
    check(done, 1, stderr_has="Error: MI300 CI must run natively with Docker disabled.")
    assert not (tmp_path / "ran").exists()


# -------------------------------------------------------- uploader validation: 1


UPLOAD_YAML = """\
steps:
  - label: "Bad preset"
    commands: ["pytest tests -m 'core_model and cpu'"]
    mirror_hardwares: no_such_preset
  - label: "Bad key"
    commands: ["pytest tests -m 'core_model and cpu'"]
    source_file_dependencies: no_such_key
"""


def test_uploader_validation_errors_exit_1_all_at_once(
    sample_repo: GitRepo, tmp_path: Path
) -> None:
    clone = on_branch(sample_repo, {".buildkite/cuda/test-bad.yml": UPLOAD_YAML}, tmp_path)
    done = run_cli(
        "upload-pipeline", ".buildkite/cuda/test-bad.yml", "--repo", str(clone.path),
        env=clean_env(), cwd=clone.path,
    )  # fmt: skip
    check(done, 1, stdout="")
    assert "unknown mirror_hardwares 'no_such_preset' in step 'Bad preset'" in done.stderr
    assert "unknown source_file_dependencies 'no_such_key' in step 'Bad key'" in done.stderr


def test_uploader_bad_mirror_hw_exits_1() -> None:
    done = run_cli(
        "upload-pipeline", ".buildkite/cuda/test-ready.yml", "--repo", str(SAMPLE),
        env=clean_env(MIRROR_HW="h100"),
    )  # fmt: skip
    check(done, 1, stdout="")
    assert "unsupported MIRROR_HW='h100'; expected empty or 'b200'" in done.stderr


# ------------------------------------------------------------------ bootstrap: 1


def test_bootstrap_label_fetch_failure_exits_1(sample_repo: GitRepo) -> None:
    env = pr_env(sample_repo, VLLM_OMNI_CI_GITHUB_API="http://127.0.0.1:9")
    done = run_cli("bootstrap", "--platform", "rocm", "--repo", str(sample_repo.path), env=env)
    check(done, 1, stdout="")
    assert (
        "ERROR: Could not read PR labels; refusing to select an incorrect AMD test tier."
        in done.stderr
    )


def test_bootstrap_suite_selector_error_exits_1(sample_repo: GitRepo) -> None:
    env = pr_env(sample_repo, BUILDKITE_PULL_REQUEST="false", DEBUG_TEST_YAML="weekly")
    done = run_cli(
        "bootstrap", "--platform", "rocm", "--repo", str(sample_repo.path), "--dry-run", env=env
    )
    check(done, 1, stdout="")
    assert "DEBUG_TEST_YAML entries must be 'merge', 'nightly', or 'ready', got 'weekly'" in (
        done.stderr
    )


# --------------------------------------------------------- coverage split args: 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model-id"], "error: run_cov_split.sh: --model-id needs a value"),
        (["--bogus"], "error: run_cov_split.sh: unknown argument: --bogus"),
    ],
)
def test_cov_split_argument_errors_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    done = run_cli("cov-split", *args, env=clean_env(), cwd=tmp_path)
    check(done, 2, stderr_has=message, stdout="")


# ----------------------------------------------------------- nightly cleanup: 1


def test_nightly_cleanup_listing_error_exits_1(tmp_path: Path) -> None:
    """Docker Hub does not answer (a closed local port); a failed delete: test_release_cleanup."""
    env = clean_env(
        DOCKERHUB_USERNAME="someone", DOCKERHUB_TOKEN="t0ken-never-shown", HOME=str(tmp_path)
    )
    done = run_cli(
        "release.cleanup-nightly", "--hub-url", "http://127.0.0.1:9", env=env, cwd=tmp_path
    )
    check(done, 1)
    assert "t0ken-never-shown" not in done.stdout + done.stderr


# ------------------------------------------------------------ image builds: 2


def test_image_build_missing_commit_exits_2() -> None:
    done = run_cli(
        "build-image", "--platform", "rocm", "--repo", str(SAMPLE), "--dry-run",
        env=clean_env(BUILDKITE="true"),
    )  # fmt: skip
    check(done, 2, stderr_has="error: BUILDKITE_COMMIT is not set", stdout="")


def test_image_build_missing_cache_key_input_exits_2(tmp_path: Path) -> None:
    repo = tmp_path / "no-requirements"
    shutil.copytree(SAMPLE / "docker", repo / "docker")
    done = run_cli(
        "build-image", "--platform", "rocm", "--repo", str(repo), "--dry-run",
        env=clean_env(BUILDKITE_COMMIT="abc123"),
    )  # fmt: skip
    check(done, 2, stdout="")
    assert any(
        line.startswith("error: cache-key input does not exist: ")
        for line in done.stderr.splitlines()
    ), done.stderr


def test_image_build_bad_registry_ref_exits_2() -> None:
    done = run_cli(
        "build-image", "--platform", "rocm", "--repo", str(SAMPLE), "--dry-run",
        env=clean_env(BUILDKITE_COMMIT="abc123", ROCM_CI_IMAGE_REGISTRY="Bad Ref!"),
    )  # fmt: skip
    check(done, 2, stdout="")
    assert done.stderr.startswith("error: ROCM_CI_IMAGE_REGISTRY: 'Bad Ref!' is not a valid")


def test_image_build_missing_vllm_version_exits_2() -> None:
    done = run_cli(
        "build-image", "--platform", "xpu", "--repo", str(SAMPLE), "--dry-run",
        env=clean_env(BUILDKITE_COMMIT="abc123"),
    )  # fmt: skip
    check(done, 2, stderr_has="error: VLLM_VERSION must be set", stdout="")


def test_image_build_without_a_usable_backend_exits_2(standins: StandIns) -> None:
    """A docker client whose every subcommand fails: no buildx, no engine."""
    docker = standins.add("docker", "exit 1")
    env = clean_env(BUILDKITE_COMMIT="abc123", VLLM_OMNI_CI_DOCKER=str(docker))
    env["PATH"] = standins.env(env)["PATH"]
    done = run_cli(
        "build-image", "--platform", "rocm", "--repo", str(SAMPLE), "--builder", "buildx",
        "--no-push", env=env,
    )  # fmt: skip
    check(done, 2, stdout="")
    assert done.stderr.startswith("error: --builder buildx: `docker buildx` does not work")
    # Only probes ran (`--help`, `version`, `info`): no build, no builder created.
    assert all(
        argv[:2] in (["buildx", "version"], ["build", "--help"])
        or argv[0] in ("version", "--version", "info")
        for argv in standins.argvs("docker")
    ), standins.argvs("docker")


# ------------------------------------------------------ any other input error: 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["step", "--timeout", "ten", "--", "true"],
            "error: --timeout: 'ten' is not a duration (examples: 90s, 80m, 1h30m)",
        ),
        (
            ["doctor", "--docker", "/nope/docker"],
            "error: --docker: /nope/docker is not an executable docker client",
        ),
    ],
)
def test_other_input_errors_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    check(run_cli(*args, env=clean_env(), cwd=tmp_path), 2, stderr_has=message, stdout="")


def test_several_problems_give_one_error_line_each_then_exit(tmp_path: Path) -> None:
    """Not a git repo, no commit and no requirements/: every problem in one round."""
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_cli(
        "build-image", "--platform", "rocm", "--repo", str(empty), "--dry-run",
        env=clean_env(GIT_CEILING_DIRECTORIES=str(tmp_path)), cwd=tmp_path,
    )  # fmt: skip
    check(done, 2, stdout="")
    lines = done.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) >= 2, done.stderr
    assert any("BUILDKITE_COMMIT is not set" in line for line in errors)
    assert any("cache-key input does not exist" in line for line in errors)


# ------------------------------------------- fuzzed bad inputs: fail closed, nothing run
#
# Found by trying every task with empty, mistyped and unknown values (see the
# project guide's rule 3). Each row: the exit code, the exact error line, no
# traceback, and no stand-in program (docker, buildkite-agent, buildctl) started.

FUZZED = [
    pytest.param(
        ["build-image", "--platform", "cuda", "--commit", "abc", "--dry-run", "--docker", "/nope"],
        {},
        2,
        "error: --docker: /nope is not an executable docker client",
        id="build-image-dry-run-bad-docker",
    ),
    pytest.param(
        ["step", "--artifact-dir", "{tmp}/file", "--", "true"],
        {},
        2,
        "error: --artifact-dir: '{tmp}/file': {tmp}/file is a file, not a directory",
        id="step-artifact-dir-is-a-file",
    ),
    pytest.param(
        ["bootstrap", "--platform", "rocm"],
        {"VLLM_OMNI_CI_GITHUB_API": "not a url"},
        1,
        "ERROR: Could not read PR labels; refusing to select an incorrect AMD test tier. "
        "(VLLM_OMNI_CI_GITHUB_API='not a url': allowed values are http(s) URLs)",
        id="bootstrap-github-api-not-a-url",
    ),
    pytest.param(
        ["skip-ci", "--platform", "cuda", "--level", "l2", "--repo", "{tmp}"],
        {},
        2,
        "error: --repo: {tmp} is not a git checkout",
        id="skip-ci-repo-not-git",  # was exit 1 (run), as if the diff were merely unknown
    ),
]


@pytest.mark.parametrize(("args", "extra", "code", "line"), FUZZED)
def test_fuzzed_bad_input_fails_closed(
    sample_repo: GitRepo,
    standins: StandIns,
    tmp_path: Path,
    args: list[str],
    extra: dict[str, str],
    code: int,
    line: str,
) -> None:
    for name in ("docker", "buildkite-agent", "buildctl"):
        standins.add(name, "exit 0")
    (tmp_path / "file").write_text("not a directory\n")
    places = {"repo": str(sample_repo.path), "tmp": str(tmp_path)}
    env = standins.env(pr_env(sample_repo, **extra))
    done = run_cli(*(a.format(**places) for a in args), env=env, cwd=sample_repo.path)
    check(done, code, stderr_has=line.format(**places), stdout="")
    assert standins.calls() == []


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["lint-pipelines"], "error: {repo}/.buildkite/cuda/test-ready.yml: not UTF-8 text"),
        (
            ["shellcheck-steps", "--dry-run"],
            "error: .buildkite/cuda/test-ready.yml: not UTF-8 text",
        ),
        (
            ["tier", "--name", "ready", "--platform", "cuda", "--list", "--repo", "{repo}"],
            "error: .buildkite/cuda/test-ready.yml: not UTF-8 text",
        ),
        (
            ["upload-pipeline", "--pipeline", ".buildkite/cuda/test-ready.yml", "--dry-run"],
            "error: invalid pipeline YAML: {repo}/.buildkite/cuda/test-ready.yml ('utf-8' codec",
        ),
    ],
    ids=["lint-pipelines", "shellcheck-steps", "tier", "upload-pipeline"],
)
def test_a_pipeline_that_is_not_text_is_one_error_line(
    sample_repo: GitRepo, tmp_path: Path, args: list[str], line: str
) -> None:
    """A binary or Latin-1 YAML was a UnicodeDecodeError traceback in most readers."""
    clone = on_branch(sample_repo, {}, tmp_path)
    (clone.path / ".buildkite/cuda/test-ready.yml").write_bytes(b"steps:\n  - label: \xff\n")
    repo = str(clone.path)
    if args[0] != "tier":
        args = [*args, "--repo", repo]
    done = run_cli(*(a.format(repo=repo) for a in args), env=clean_env(), cwd=clone.path)
    check(done, 1, stdout=None)
    errors = [e for e in done.stderr.splitlines() if e.startswith("error: ")]
    assert errors and errors[0].startswith(line.format(repo=repo)), done.stderr


def without_dac_override(argv: list[str]) -> list[str]:
    """Run as we are, but unable to bypass file permissions (root otherwise writes anywhere)."""
    if os.geteuid() != 0:
        return argv
    caps = "-dac_override,-dac_read_search"
    assert shutil.which("setpriv"), "util-linux setpriv is needed to test permissions as root"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", *argv]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["step", "--artifact-dir", "{ro}", "--summary-tail", "3", "--", "touch", "{ran}"],
            "error: --artifact-dir: {ro} is not writable",
        ),
        (
            ["step", "--junit", "{ro}/sub/pytest.xml", "--", "touch", "{ran}"],
            "error: --junit: cannot create {ro}/sub: Permission denied",
        ),
        (["wheelhouse", "--dest", "{ro}/wheels"], "error: --dest: cannot create {ro}/wheels: "),
    ],
    ids=["artifact-dir", "junit", "wheelhouse-dest"],
)
def test_an_unwritable_output_is_exit_2_before_anything_runs(
    tmp_path: Path, args: list[str], line: str
) -> None:
    """Were PermissionError tracebacks (after the command ran, for the summary)."""
    import subprocess

    from tests.conftest import cli_path

    ro = tmp_path / "read-only"
    ro.mkdir()
    ro.chmod(0o555)
    places = {"ro": str(ro), "ran": str(tmp_path / "ran")}
    done = subprocess.run(
        without_dac_override([cli_path(), *(a.format(**places) for a in args)]),
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    check(done, 2, stdout="")
    assert done.stderr.splitlines()[-1].startswith(line.format(**places)), done.stderr
    assert not (tmp_path / "ran").exists()
