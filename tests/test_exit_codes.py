"""The exit-code shapes no area file covers: one table, run in-process where it can be.

Callers (Buildkite retry rules, shims, `if word=$(vllm-omni-ci skip-ci ...)`) depend on
the README's exit codes. Each task's own codes and messages are checked in its area file
(tests/test_<area>.py); what is left here is what belongs to no one task:

- `USAGE`: the command line itself (unknown tasks and options, empty, missing, repeated
  and ill-typed values, Invoke's own options): exit 2, one exact `error:` line, nothing run;
- `ACCEPTED`: what must not be refused (an empty word after `--`, a missing Invoke config);
- `INPUTS`: a few input errors of tasks whose area files test other shapes;
- a pipeline that is not text, for each reader of pipelines;
- and, as subprocesses because the process is the subject: `inv` giving the same answer, a
  full or closed stdout, and outputs that the process may not write (without root's
  capabilities).

Removed rows, each with the test that covers its behaviour, are listed in the commit that
folded this file (issue 33, item 5): a row belongs here only while no area test has it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLE, StandIns, cli_path
from tests.gitrepo import GitRepo, buildkite_env, sample_checkout
from tests.inproc import Outcome


def clean_env(**values: str) -> dict[str, str]:
    """The outer environment without anything that would steer the task under test."""
    env = buildkite_env()
    for name in (
        "CI",
        "DEBUG_TEST_YAML",
        "NIGHTLY",
        "MIRROR_HW",
        "VLLM_VERSION",
        "TEST_COMMANDS",
        "VLLM_CI_DOCKER_DISABLED",
        "ROCM_CI_IMAGE_REGISTRY",
    ):
        env.pop(name, None)
    env.update(values)
    return env


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


@pytest.fixture(scope="module")
def sample_repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """A copy of the sample as its own repo: main pushed, then a PR branch `pr`."""
    repo = sample_checkout(tmp_path_factory.mktemp("exit-codes") / "repo", SAMPLE)
    repo.branch("pr")
    return repo


def pr_env(repo: GitRepo) -> dict[str, str]:
    return clean_env(
        BUILDKITE="true",
        BUILDKITE_BRANCH="pr",
        BUILDKITE_COMMIT=repo.sha(),
        BUILDKITE_PULL_REQUEST="42",
        BUILDKITE_PULL_REQUEST_BASE_BRANCH="main",
    )


# ------------------------------------------------------------- the command line: 2

USAGE = [
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
    # Invoke's -f/--config loaded a file no task reads (`inv` refuses it: see below).
    (
        ["-f", "vllm-omni-ci.yaml", "step", "--", "touch", "ran"],
        "error: unknown option '-f' (see `vllm-omni-ci --help`)",
    ),
    # An explicit empty choice (an unset variable) was silently the default.
    (
        ["upload-pipeline", "--pipeline", "x.yml", "--platform", "", "--dry-run"],
        "error: upload-pipeline: --platform: an empty value; allowed values are cuda, npu",
    ),
    (
        ["upload-pipeline", "--pipeline", "x.yml", "--scope=", "--dry-run"],
        "error: upload-pipeline: --scope: an empty value; allowed values are diff, all, e2e, auto",
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
    # Invoke's core option for c.run(): `--dry` is not `--dry-run`, and ran the command.
    (
        ["step", "--dry", "--", "touch", "ran"],
        "error: step: unknown option '--dry'; did you mean '--dry-run'? (see `vllm-omni-ci step"
        " --help`)",
    ),
    # Words after `--` that no task takes were ignored (tier took them for options).
    (
        ["doctor", "--", "touch", "ran"],
        "error: doctor: takes no words after `--`; its options go before (see `vllm-omni-ci"
        " doctor --help`)",
    ),
    (["step", "--dry-run=yes", "--", "touch", "ran"], "error: step: --dry-run takes no value"),
    # cov-split keeps the script's own words; an unknown word comes before a missing --model-id.
    (["cov-split", "--bogus"], "error: run_cov_split.sh: unknown argument: --bogus"),
]


@pytest.mark.parametrize(("args", "message"), USAGE)
def test_bad_arguments_exit_2(
    args: list[str], message: str, tmp_path: Path, inproc: Callable[..., Outcome]
) -> None:
    done = inproc(*args, cwd=tmp_path, env=clean_env())
    assert (done.code, done.stdout) == (2, ""), done.stderr
    assert message in error_lines(done.stderr), done.stderr
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(("args", "message"), USAGE)
def test_inv_gives_the_same_exit_code(
    args: list[str], message: str, tmp_path: Path, inproc: Callable[..., Outcome]
) -> None:
    """The Invoke front end (`ci.inv`) over the same definitions: exit 2 with one `error:`
    line, nothing run. Its words are Invoke's where Invoke's parser found the problem."""
    done = inproc(*args, cwd=tmp_path, env=clean_env(), front="inv")
    assert (done.code, done.stdout) == (2, ""), done.stderr
    assert error_lines(done.stderr), done.stderr
    assert not (tmp_path / "ran").exists()


# ------------------------------------------------------------ not refused: 0

ACCEPTED = [
    # No task reads Invoke's config: `$INVOKE_RUNTIME_CONFIG` naming no file was a traceback.
    pytest.param(
        ["step", "--", "touch", "ran"],
        {"INVOKE_RUNTIME_CONFIG": "{tmp}/no-such-config"},
        id="invoke-runtime-config-missing",
    ),
    # Only task options are checked for empty values; the words after `--` are the command's.
    pytest.param(
        ["step", "--", "bash", "-c", "touch ran", "-", "--platform", ""],
        {},
        id="empty-word-after-the-dashes",
    ),
]


@pytest.mark.parametrize("front", ["vllm-omni-ci", "inv"])
@pytest.mark.parametrize(("args", "extra"), ACCEPTED)
def test_what_is_not_refused_runs(
    args: list[str],
    extra: dict[str, str],
    front: str,
    tmp_path: Path,
    inproc: Callable[..., Outcome],
) -> None:
    env = clean_env(**{k: v.format(tmp=tmp_path) for k, v in extra.items()})
    done = inproc(*args, cwd=tmp_path, env=env, front=front)
    assert done.code == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert (tmp_path / "ran").exists()


# --------------------------------------------------- input errors no area file has

INPUTS = [
    pytest.param(
        ["build-image", "--platform", "cuda", "--commit", "abc", "--dry-run", "--docker", "/nope"],
        "error: --docker: /nope is not an executable docker client",
        id="build-image-bad-docker",
    ),
    pytest.param(
        ["skip-ci", "--platform", "cuda", "--level", "l2", "--repo", "{tmp}"],
        "error: --repo: {tmp} is not a git checkout",
        id="skip-ci-repo-not-git",  # was exit 1 (run), as if the diff were merely unknown
    ),
]


@pytest.mark.parametrize(("args", "line"), INPUTS)
def test_an_input_error_exits_2_and_starts_nothing(
    args: list[str],
    line: str,
    sample_repo: GitRepo,
    standins: StandIns,
    tmp_path: Path,
    inproc: Callable[..., Outcome],
) -> None:
    for name in ("docker", "buildkite-agent", "buildctl"):
        standins.add(name, "exit 0")
    env = standins.env(pr_env(sample_repo))
    done = inproc(*(a.format(tmp=tmp_path) for a in args), env=env, cwd=sample_repo.path)
    assert (done.code, done.stdout) == (2, ""), done.stderr
    assert line.format(tmp=tmp_path) in error_lines(done.stderr), done.stderr
    assert standins.calls() == []


def test_several_problems_give_one_error_line_each(
    tmp_path: Path, inproc: Callable[..., Outcome]
) -> None:
    """Not a git repo (so no commit) and no cache-key inputs: every problem in one round."""
    empty = tmp_path / "empty"
    empty.mkdir()
    done = inproc(
        "build-image", "--platform", "rocm", "--repo", str(empty), "--dry-run",
        env=clean_env(GIT_CEILING_DIRECTORIES=str(tmp_path)), cwd=tmp_path,
    )  # fmt: skip
    assert (done.code, done.stdout) == (2, ""), done.stderr
    errors = error_lines(done.stderr)
    assert any(line.startswith("error: BUILDKITE_COMMIT is not set") for line in errors), errors
    assert any(line.startswith("error: cache-key input does not exist") for line in errors)


# ------------------------------------------------ a pipeline that is not text: 1


@pytest.fixture(scope="module")
def latin1_repo(sample_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """A clone of the sample whose CUDA ready pipeline is not UTF-8 (uncommitted)."""
    folder = tmp_path_factory.mktemp("not-text")
    clone = GitRepo(folder / "clone")
    assert sample_repo.origin is not None
    origin = str(sample_repo.origin)
    clone.git("clone", "-q", "--branch", "main", origin, str(clone.path), cwd=folder)
    (clone.path / ".buildkite/cuda/test-ready.yml").write_bytes(b"steps:\n  - label: \xff\n")
    return clone


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["lint-pipelines"], "error: {repo}/.buildkite/cuda/test-ready.yml: not UTF-8 text"),
        (
            ["shellcheck-steps", "--dry-run"],
            "error: .buildkite/cuda/test-ready.yml: not UTF-8 text",
        ),
        (
            ["tier", "--name", "ready", "--platform", "cuda", "--list"],
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
    latin1_repo: GitRepo, args: list[str], line: str, inproc: Callable[..., Outcome]
) -> None:
    """A binary or Latin-1 YAML was a UnicodeDecodeError traceback in most readers."""
    repo = str(latin1_repo.path)
    done = inproc(*args, "--repo", repo, env=clean_env(), cwd=repo)
    assert done.code == 1, done.stderr
    errors = error_lines(done.stderr)
    assert errors and errors[0].startswith(line.format(repo=repo)), done.stderr


# ================================================ the process is the subject
# `inv` and `vllm-omni-ci` giving the same answer, a full or closed stdout, and a process
# that may not write where it is told: these run the real program.


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["step", "--dry", "--", "touch", "{ran}"], "error: --dry: not accepted: "),
        (["-e", "step", "--", "touch", "{ran}"], "error: --echo: not accepted: "),
        (["-f", "{tmp}/bad.yaml", "doctor", "--json"], "error: -f/--config: config files are not"),
        (["doctor", "--nope"], "error: No idea what '--nope' is!"),
    ],
    ids=["dry", "echo", "config", "unknown"],
)
def test_inv_refuses_invokes_own_options(args: list[str], line: str, tmp_path: Path) -> None:
    """`inv` in the repo root: tasks.py hands the command line to our Invoke Program, which
    refuses Invoke's `c.run()` and config options and exits 2 on a usage error (Invoke: 1)."""
    (tmp_path / "bad.yaml").write_text("run: [unclosed\n")
    places = {"tmp": str(tmp_path), "ran": str(tmp_path / "ran")}
    done = subprocess.run(
        ["inv", *(a.format(**places) for a in args)],
        cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.startswith(line) and len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "ran").exists()


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
    with DEV_FULL.open("w") as full:
        done = subprocess.run(
            [cli_path(), *args], stdout=full, stderr=subprocess.PIPE, text=True,
            cwd=tmp_path, env=clean_env(BUILDKITE_COMMIT="abc"), timeout=120,
        )  # fmt: skip
    assert done.returncode == 74, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert done.stderr.splitlines()[-1] == "error: cannot write to stdout: No space left on device"


def test_a_reader_that_leaves_early_ends_us_quietly(tmp_path: Path) -> None:
    """`vllm-omni-ci … | head`: the shell's 141 (128+SIGPIPE), and not a word on stderr
    (test_sample_readme's row 141 checks the code; this, the silence)."""
    read, write = os.pipe()
    os.close(read)  # the reader is already gone when the first line is written
    with os.fdopen(write, "w") as stdout:
        done = subprocess.run(
            [cli_path(), "--list"], stdout=stdout, stderr=subprocess.PIPE, text=True,
            cwd=tmp_path, env=clean_env(), timeout=60,
        )  # fmt: skip
    assert done.returncode == 141, done.stderr
    assert done.stderr == ""


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
    ro = tmp_path / "read-only"
    ro.mkdir()
    ro.chmod(0o555)
    places = {"ro": str(ro), "ran": str(tmp_path / "ran")}
    done = subprocess.run(
        without_dac_override([cli_path(), *(a.format(**places) for a in args)]),
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(line.format(**places)), done.stderr
    assert not (tmp_path / "ran").exists()
