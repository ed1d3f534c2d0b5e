"""The native runner: the rendered program, the §1.9 truth table, and golden scenarios.

The program runs for real under bash; only what cannot run here is a stand-in:
`rocminfo`, `findmnt` answers (recording stand-ins) and `torch` (a fake package
on PYTHONPATH). Cache roots live under /tmp as the contract says; every test
uses its own job id and removes its root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from ci.platforms import Platform
from ci.runner.native import program_for
from ci.runner.program import (
    REQUIRE_COMMANDS,
    SHELLS,
    Semantics,
    cache_dirs,
    render_program,
    shown_commands,
)
from tests.conftest import ROOT, StandIns
from tests.inproc import run_task

ALLOW_MESSAGE = (
    "Pytest collected no tests; VLLM_CI_ALLOW_NO_TESTS=1, treating exit code 5 as success."
)
GUARD_MESSAGE = "Error: MI300 CI must run natively with Docker disabled."
NO_COMMANDS = "Error: No test commands provided."
ROCM = SHELLS[Platform.ROCM]


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def job(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A passing no-GPU ROCm job environment with its own job id (cache root removed after)."""
    job_id = f"test-runner-{uuid.uuid4().hex[:10]}"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "VLLM_CI_DOCKER_DISABLED": "1",
        "VLLM_CI_EXPECTED_GPU_COUNT": "0",
        "BUILDKITE_JOB_ID": job_id,
        "HF_HOME": str(tmp_path / "hf"),
    }
    yield env
    shutil.rmtree(f"/tmp/vllm-omni-native-{job_id}", ignore_errors=True)


def bash(
    program: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", program], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def rocm(
    commands: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return bash(program_for(Platform.ROCM, {"TEST_COMMANDS": commands}), env, cwd)


# --------------------------------------------------------------------------- truth table


@dataclass(frozen=True)
class Row:
    lines: tuple[str, ...]
    target: tuple[int, int]  # (ALLOW unset, VLLM_CI_ALLOW_NO_TESTS=1)
    legacy: tuple[int, int] | None = None  # only where the original differs


TRUTH_TABLE = (
    Row(("true",), (0, 0)),
    Row(("false",), (1, 1)),
    Row(("false", "true"), (1, 1)),
    Row(("true", "false"), (1, 1)),
    Row(("(exit 5)",), (5, 0)),
    Row(("(exit 5)", "true"), (5, 0)),
    Row(("(exit 5)", "false"), (1, 1)),
    Row(("false", "(exit 5)"), (1, 1)),
    Row(("(exit 5)", "(exit 5)"), (5, 0)),
    Row(("(exit 3)", "(exit 7)"), (3, 3)),
    Row(("(exit 5)", "(exit 2)", "(exit 5)"), (2, 2)),
    Row(("(exit 5)", "(exit 1)", "(exit 5)"), (1, 1)),
    Row(("(exit 5) | tee log",), (5, 0)),
    Row(("false | true",), (1, 1)),
    Row(("true | false",), (1, 1)),
    Row(("false && true",), (1, 1)),
    Row(("false && true", "true"), (0, 0)),
    Row(("(exit 5)", "(exit 3) && true"), (3, 3)),
    Row(("(exit 5)", "(exit 3) && true", "true"), (5, 0)),
    Row(("false || true",), (0, 0)),
    Row(("if false; then :; fi",), (0, 0)),
    Row(("(false; true)",), (0, 0)),
    Row(("f(){ false; true; }", "f"), (1, 1)),
    Row(("false", "exit 5"), (1, 1), legacy=(5, 0)),
    Row(("false", "exit 0"), (1, 1), legacy=(0, 0)),
    Row(("(exit 5)", "exit 0"), (5, 0), legacy=(0, 0)),
    Row(("false", "exit"), (1, 1)),
    Row(("(exit 2)", "set -e", "(exit 5)"), (2, 2), legacy=(5, 0)),
    Row(("(exit 5)", "set -e", "false", "true"), (1, 1)),
    Row(("undefined_cmd",), (127, 127)),
    Row(("(exit 134)",), (134, 134)),
    Row(("kill -TERM $$",), (143, 143)),
    Row(("timeout 1 sleep 5",), (124, 124)),
    Row(("timeout --kill-after=1s 1s bash -c 'trap \"\" TERM; sleep 5'",), (137, 137)),
    Row(("(exit 256)",), (0, 0)),
)


def row_id(row: Row) -> str:
    return "; ".join(row.lines)


@pytest.mark.parametrize("separator", ["; ", "\n"], ids=["semicolons", "newlines"])
@pytest.mark.parametrize("row", TRUTH_TABLE, ids=row_id)
def test_truth_table(row: Row, separator: str, job: dict[str, str], tmp_path: Path) -> None:
    commands = separator.join(row.lines)
    unset = rocm(commands, job, tmp_path).returncode
    allowed = rocm(commands, {**job, "VLLM_CI_ALLOW_NO_TESTS": "1"}, tmp_path).returncode
    # Rows without `legacy` behave as the original did; the others follow §1.10.
    assert (unset, allowed) == row.target


@pytest.mark.parametrize("value", ["yes", "true", "01", ""])
def test_allow_no_tests_only_exact_1(value: str, job: dict[str, str]) -> None:
    done = rocm("(exit 5)", {**job, "VLLM_CI_ALLOW_NO_TESTS": value})
    assert done.returncode == 5
    assert ALLOW_MESSAGE not in done.stdout


def test_allow_no_tests_logs_the_message(job: dict[str, str]) -> None:
    done = rocm("(exit 5)", {**job, "VLLM_CI_ALLOW_NO_TESTS": "1"})
    assert done.returncode == 0
    assert ALLOW_MESSAGE in done.stdout.splitlines()


def test_deliberate_differences_are_documented() -> None:
    """Every row whose TARGET differs from legacy is listed in docs/differences.md."""
    text = (ROOT / "docs" / "differences.md").read_text()
    section = text.split("## Native test runner", 1)[1].split("\n## ", 1)[0]
    differing = [row for row in TRUTH_TABLE if row.legacy is not None]
    assert len(differing) == 4
    for row in differing:
        assert f"`{'; '.join(row.lines)}`" in section, row_id(row)


# --------------------------------------------------------------------------- renderer


def test_render_is_pure_and_deterministic() -> None:
    one = render_program(ROCM, "pytest a")
    assert one == render_program(ROCM, "pytest a")
    assert one != render_program(ROCM, "pytest b")
    assert render_program(ROCM, ["a", "b"]) == render_program(ROCM, "a\nb")


@pytest.mark.parametrize("platform", ["rocm", "npu", "xpu"])
def test_rendered_programs_are_shellcheck_clean(platform: str, tmp_path: Path) -> None:
    """The program a job runs passes shellcheck, whatever `$`, quotes or newlines it holds."""
    from ci.runner import xpu

    commands = 'export A="$HOME"\necho \'it\'"\'"\'s\' `date` $(pwd)\npytest -m "a and b" | tee log'
    semantics = SHELLS[Platform(platform)]
    program = render_program(replace(semantics, forced=(("EXTRA", "x y"),)), commands)
    script = tmp_path / f"{platform}.sh"
    script.write_text(program)
    done = subprocess.run(
        ["shellcheck", "--shell=bash", str(script)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout
    if platform == "xpu":
        script.write_text(xpu.program())
        again = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)
        assert again.returncode == 0, again.stdout


def test_env_exports_are_quoted(job: dict[str, str]) -> None:
    value = 'it\'s $HOME `x` "y"'
    semantics = Semantics(platform="test", forced=(("ODD", value),))
    program = render_program(semantics, 'printf "%s" "$ODD"')
    done = bash(program, job)
    assert done.returncode == 0
    assert done.stdout.endswith(value)


def test_bad_env_name_is_refused() -> None:
    with pytest.raises(ValueError, match="not valid environment variable names: A-B"):
        render_program(replace(ROCM, forced=(("A-B", "1"),)), "true")


def test_preflight_override(job: dict[str, str]) -> None:
    # Without the ROCm pre-flight the Docker guard is gone.
    program = render_program(replace(ROCM, preflight=(REQUIRE_COMMANDS,)), "true")
    done = bash(program, {k: v for k, v in job.items() if k != "VLLM_CI_DOCKER_DISABLED"})
    assert done.returncode == 0


def test_cache_prefix_is_a_parameter(job: dict[str, str], tmp_path: Path) -> None:
    prefix = f"{tmp_path}/native-"
    program = render_program(replace(ROCM, preflight=(cache_dirs(prefix),)), 'echo "$TMPDIR"')
    done = bash(program, {**job, "BUILDKITE_JOB_ID": "a/b c"})
    assert done.stdout.splitlines()[-1] == f"{prefix}a_b_c/tmp"
    assert (tmp_path / "native-a_b_c" / "tmp").is_dir()


def test_secrets_are_masked_in_the_commands_line(job: dict[str, str]) -> None:
    secret = "hf_s3cr3tvalue"
    commands = f'export HF_TOKEN="{secret}"\necho "len=${{#HF_TOKEN}}"'
    program = render_program(ROCM, commands, secrets=[secret])
    done = bash(program, job)
    assert done.returncode == 0
    assert secret not in done.stdout + done.stderr
    assert "Commands:export HF_TOKEN=[REDACTED]" in done.stdout
    assert f"len={len(secret)}" in done.stdout  # the real value was used


def test_shown_commands_keeps_references_and_plain_values() -> None:
    text = 'export HF_TOKEN="$VLLM_CI_HF_TOKEN"; FOO=bar; MY_KEY=abcdef123 pytest'
    assert (
        shown_commands(text)
        == 'export HF_TOKEN="$VLLM_CI_HF_TOKEN"; FOO=bar; MY_KEY=[REDACTED] pytest'
    )
    assert shown_commands("echo topsecretvalue", ["topsecretvalue"]) == "echo [REDACTED]"


def test_command_source() -> None:
    def text(environ: dict[str, str], positional: list[str]) -> str:
        return program_for(Platform.ROCM, environ, positional).split("\n")[4]

    assert text({"TEST_COMMANDS": "true"}, ["false"]) == "__omni_ci_commands=true"
    assert text({"TEST_COMMAND": "true"}, []) == "__omni_ci_commands=''"
    assert text({}, ["pytest a", "pytest b"]) == "__omni_ci_commands='pytest a pytest b'"
    assert text({"TEST_COMMANDS": ""}, ["x"]) == "__omni_ci_commands=x"


def test_rocm_env_defaults_and_overwrites(job: dict[str, str]) -> None:
    names = (
        "PYTHONFAULTHANDLER HF_HUB_DOWNLOAD_TIMEOUT HF_HUB_ETAG_TIMEOUT MIOPEN_DEBUG_CONV_DIRECT "
        "MIOPEN_DEBUG_CONV_GEMM VLLM_ROCM_USE_AITER PYTHONPATH PYTORCH_ROCM_ARCH"
    ).split()
    show = "; ".join(f'echo "{n}=${{{n}-unset}}"' for n in names)
    defaults = rocm(show, job).stdout
    for expected in (
        "PYTHONFAULTHANDLER=1",
        "HF_HUB_DOWNLOAD_TIMEOUT=300",
        "HF_HUB_ETAG_TIMEOUT=60",
        "MIOPEN_DEBUG_CONV_DIRECT=0",
        "MIOPEN_DEBUG_CONV_GEMM=0",
        "VLLM_ROCM_USE_AITER=0",
        "PYTHONPATH=..",
        "PYTORCH_ROCM_ARCH=",
    ):
        assert expected in defaults.splitlines()
    # Set values win, empty ones get the default, PYTORCH_ROCM_ARCH is forced empty.
    given = {
        **job,
        "VLLM_ROCM_USE_AITER": "1",
        "HF_HUB_ETAG_TIMEOUT": "",
        "PYTHONPATH": "/x",
        "PYTORCH_ROCM_ARCH": "gfx942",
        "TMPDIR": "/elsewhere",
    }
    out = rocm(show + '; echo "TMPDIR=$TMPDIR"', given).stdout.splitlines()
    assert "VLLM_ROCM_USE_AITER=1" in out
    assert "HF_HUB_ETAG_TIMEOUT=60" in out
    assert "PYTHONPATH=/x" in out
    assert "PYTORCH_ROCM_ARCH=" in out
    assert f"TMPDIR=/tmp/vllm-omni-native-{job['BUILDKITE_JOB_ID']}/tmp" in out


def test_cache_variables_and_dirs(job: dict[str, str]) -> None:
    root = f"/tmp/vllm-omni-native-{job['BUILDKITE_JOB_ID']}"
    expected = {
        "TMPDIR": f"{root}/tmp",
        "TORCHINDUCTOR_CACHE_DIR": f"{root}/torchinductor",
        "TRITON_CACHE_DIR": f"{root}/triton",
        "VLLM_CACHE_ROOT": f"{root}/vllm",
        "XDG_CACHE_HOME": f"{root}/xdg",
        "HF_DATASETS_CACHE": f"{root}/huggingface/datasets",
    }
    out = rocm("; ".join(f'echo "{n}=${n}"' for n in expected), job).stdout.splitlines()
    for name, path in expected.items():
        assert f"{name}={path}" in out
        assert Path(path).is_dir()
    assert Path(job["HF_HOME"]).is_dir()  # shared, created, not per job


# ------------------------------------------------------------- golden scenarios (CLI)


def cli(
    job: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return run_task("run-tests", "--platform", "rocm", *args, env=job, cwd=cwd)


@pytest.mark.parametrize(
    "value", [None, "true", "yes", "01"], ids=["G01-unset", "G02-true", "yes", "01"]
)
def test_g01_g02_docker_guard(value: str | None, job: dict[str, str], tmp_path: Path) -> None:
    env = {k: v for k, v in job.items() if k != "VLLM_CI_DOCKER_DISABLED"}
    if value is not None:
        env["VLLM_CI_DOCKER_DISABLED"] = value
    done = cli(env, "--", "touch executed", cwd=tmp_path)
    assert done.returncode == 1
    assert GUARD_MESSAGE in done.stderr.splitlines()
    assert not (tmp_path / "executed").exists()


def test_g03_no_commands(job: dict[str, str]) -> None:
    done = cli(job)
    assert done.returncode == 1
    assert NO_COMMANDS in done.stderr.splitlines()


def test_g04_test_commands_win(job: dict[str, str]) -> None:
    assert cli({**job, "TEST_COMMANDS": "true"}, "--", "false").returncode == 0


def test_g05_singular_test_command_is_ignored(job: dict[str, str]) -> None:
    done = cli({**job, "TEST_COMMAND": "true"})
    assert done.returncode == 1
    assert NO_COMMANDS in done.stderr.splitlines()


def test_g06_positional_args_join_with_spaces(job: dict[str, str]) -> None:
    done = cli(job, "--", "echo pytest a", "pytest b")
    assert done.returncode == 0
    assert "Commands:echo pytest a pytest b" in done.stderr
    assert "pytest a pytest b" in done.stderr.splitlines()


@pytest.mark.process  # the drop-in shim starts vllm-omni-ci
def test_shim_forwards_positional_args(job: dict[str, str]) -> None:
    shim = ROOT / "scripts" / "amd" / "run-amd-test.sh"
    done = subprocess.run(
        ["bash", str(shim), "echo one", "two"], env=job, capture_output=True, text=True
    )
    assert done.returncode == 0
    assert "one two" in done.stderr.splitlines()
    failed = subprocess.run(
        ["bash", str(shim)], env={**job, "TEST_COMMANDS": "false\ntrue"}, capture_output=True
    )
    assert failed.returncode == 1


@pytest.mark.parametrize(
    ("job_id", "parallel", "suffix"),
    [
        ("a/b c", None, "a_b_c"),  # G07
        ("", "2", "2"),  # G08
        (None, None, "local"),  # G09
        ("../etc", None, ".._etc"),  # G10
        ("x:y;z$", None, "x_y_z_"),  # G11
        ("a*b?[c]", None, "a_b__c_"),  # G11
        ("üñí", None, "___"),  # G12 (TARGET: per code point)
    ],
    ids=["G07", "G08", "G09", "G10", "G11-punct", "G11-glob", "G12"],
)
@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
def test_g07_g12_cache_root_sanitising(
    job_id: str | None, parallel: str | None, suffix: str, locale: str, job: dict[str, str]
) -> None:
    env = {k: v for k, v in job.items() if k != "BUILDKITE_JOB_ID"}
    env["LC_ALL"] = locale
    if job_id is not None:
        env["BUILDKITE_JOB_ID"] = job_id
    if parallel is not None:
        env["BUILDKITE_PARALLEL_JOB"] = parallel
    root = f"/tmp/vllm-omni-native-{suffix}"
    existed = os.path.exists(root)
    try:
        done = rocm('echo "TMPDIR=$TMPDIR"', env)
        assert done.returncode == 0, done.stderr
        assert f"TMPDIR={root}/tmp" in done.stdout.splitlines()
    finally:
        if not existed:
            shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- HF cache mount


def minimal_path(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only the named tools (symlinks), so a missing program stays missing."""
    bin_dir = tmp_path / "only-bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def test_g13_findmnt_missing(job: dict[str, str], tmp_path: Path) -> None:
    env = {**job, "VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE": "1"}
    env["PATH"] = minimal_path(tmp_path, "bash", "mkdir", "touch")
    done = subprocess.run(
        ["/bin/bash", "-c", program_for(Platform.ROCM, {"TEST_COMMANDS": "touch ran"})],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert (
        "Error: findmnt is required to verify the Hugging Face cache mount."
        in done.stderr.splitlines()
    )
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("answer", "ok"),
    [("/", False), ("", False), ("/home/buildkite-agent/huggingface", True), ("/mnt", True)],
    ids=["G14-root", "no-mount", "mount-itself", "ancestor"],
)
def test_g14_persistent_hf_cache(
    answer: str, ok: bool, job: dict[str, str], standins: StandIns, tmp_path: Path
) -> None:
    script = f"echo {answer}" if answer else "exit 1"
    standins.add("findmnt", script)
    env = standins.env({**job, "VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE": "1"})
    done = rocm("touch ran", env, tmp_path)
    assert standins.argvs("findmnt") == [["-n", "-T", job["HF_HOME"], "-o", "TARGET"]]
    if ok:
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "ran").exists()
    else:
        assert done.returncode == 1
        message = f"Error: MI300 CI requires a persistent volume at or above {job['HF_HOME']}."
        assert message in done.stderr.splitlines()
        assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("value", [None, "0", "true"])
def test_g15_mount_check_only_when_required(
    value: str | None, job: dict[str, str], standins: StandIns
) -> None:
    standins.add("findmnt", "echo /")
    env = standins.env(job)
    if value is not None:
        env["VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE"] = value
    assert rocm("true", env).returncode == 0
    assert standins.argvs("findmnt") == []


# --------------------------------------------------------------------------- GPU checks

FAKE_TORCH = '''\
"""A stand-in for torch: answers from FAKE_TORCH_* and records that it was imported."""
import os
from types import SimpleNamespace

with open(os.environ["FAKE_TORCH_LOG"], "a") as fh:
    fh.write("imported\\n")

version = SimpleNamespace(hip=os.environ.get("FAKE_TORCH_HIP") or None)


class cuda:
    @staticmethod
    def is_available():
        return os.environ.get("FAKE_TORCH_AVAILABLE", "1") == "1"

    @staticmethod
    def device_count():
        return int(os.environ.get("FAKE_TORCH_COUNT", "1"))
'''


@pytest.fixture
def gpu_job(job: dict[str, str], standins: StandIns, tmp_path: Path) -> dict[str, str]:
    """A job with a fake ROCm torch seeing one GPU and a recording rocminfo."""
    package = tmp_path / "fake-torch" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_TORCH)
    standins.add("rocminfo", "echo 'ROCk module is loaded'")
    env = standins.env(job)
    env.update(
        PYTHONPATH=str(package.parent),
        FAKE_TORCH_LOG=str(tmp_path / "torch.log"),
        FAKE_TORCH_HIP="6.2.41133",
        FAKE_TORCH_COUNT="1",
        VLLM_CI_EXPECTED_GPU_COUNT="1",
    )
    return env


def torch_imported(tmp_path: Path) -> bool:
    return (tmp_path / "torch.log").exists()


def test_gpu_check_passes(gpu_job: dict[str, str], standins: StandIns, tmp_path: Path) -> None:
    done = rocm("touch ran", gpu_job, tmp_path)
    assert done.returncode == 0, done.stderr
    assert standins.argvs("rocminfo") == [[]]
    assert torch_imported(tmp_path)
    assert (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"VLLM_CI_EXPECTED_GPU_COUNT": "2"}, "Expected 2 ROCm GPU(s), found 1"),  # G16
        ({"FAKE_TORCH_HIP": ""}, "PyTorch is not a ROCm build"),  # G17
        ({"FAKE_TORCH_AVAILABLE": "0"}, "ROCm GPU is not available to PyTorch"),
    ],
    ids=["G16", "G17", "unavailable"],
)
def test_g16_g17_gpu_check_fails(
    change: dict[str, str], message: str, gpu_job: dict[str, str], tmp_path: Path
) -> None:
    done = rocm("touch ran", {**gpu_job, **change}, tmp_path)
    assert done.returncode == 1
    assert f"AssertionError: {message}" in done.stderr
    assert not (tmp_path / "ran").exists()


def test_gpu_count_defaults_to_one(gpu_job: dict[str, str], tmp_path: Path) -> None:
    for value in (None, ""):
        env = {k: v for k, v in gpu_job.items() if k != "VLLM_CI_EXPECTED_GPU_COUNT"}
        if value is not None:
            env["VLLM_CI_EXPECTED_GPU_COUNT"] = value
        assert rocm("true", env, tmp_path).returncode == 0


def test_g18_rocminfo_absent(gpu_job: dict[str, str], standins: StandIns, tmp_path: Path) -> None:
    (standins.bin_dir / "rocminfo").unlink()
    env = {**gpu_job, "PATH": standins.bin_dir.as_posix() + ":" + minimal_path(tmp_path, "mkdir")}
    done = subprocess.run(
        ["/bin/bash", "-c", program_for(Platform.ROCM, {"TEST_COMMANDS": "true"})],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 127
    assert not torch_imported(tmp_path)


def test_rocminfo_failure_status_aborts(
    gpu_job: dict[str, str], standins: StandIns, tmp_path: Path
) -> None:
    standins.add("rocminfo", "exit 3")
    assert rocm("touch ran", gpu_job, tmp_path).returncode == 3
    assert not torch_imported(tmp_path)
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("value", ["two", "1.5", "-1", " 1"])
def test_non_integer_gpu_count_is_a_clear_error(
    value: str, gpu_job: dict[str, str], standins: StandIns, tmp_path: Path
) -> None:
    done = rocm("touch ran", {**gpu_job, "VLLM_CI_EXPECTED_GPU_COUNT": value}, tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: VLLM_CI_EXPECTED_GPU_COUNT must be a non-negative integer, got '{value}'."
    )
    assert "Traceback" not in done.stderr
    assert standins.argvs("rocminfo") == []
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("value", ["two", "-1"])
def test_a_bad_gpu_count_stops_before_any_folder_is_made(
    value: str, job: dict[str, str], tmp_path: Path
) -> None:
    """Issue 23 item 30d: the cache folders and HF_HOME were made before the count was checked."""
    hf_home = tmp_path / "hf-not-made"
    env = {**job, "VLLM_CI_EXPECTED_GPU_COUNT": value, "HF_HOME": str(hf_home)}
    done = run_task("run-tests", "--platform", "rocm", "--", "touch ran", env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: VLLM_CI_EXPECTED_GPU_COUNT must be a non-negative integer, got '{value}'."
    )
    assert not hf_home.exists()
    assert not Path(f"/tmp/vllm-omni-native-{job['BUILDKITE_JOB_ID']}").exists()
    assert not (tmp_path / "ran").exists()


def test_no_gpu_preflight_skips_rocminfo_and_torch(
    gpu_job: dict[str, str], standins: StandIns, tmp_path: Path
) -> None:
    done = rocm("touch ran", {**gpu_job, "VLLM_CI_EXPECTED_GPU_COUNT": "0"}, tmp_path)
    assert done.returncode == 0
    assert standins.argvs("rocminfo") == []
    assert not torch_imported(tmp_path)
    assert (tmp_path / "ran").exists()
    assert "no-GPU pre-flight" in done.stdout


def test_preflight_order(gpu_job: dict[str, str], standins: StandIns, tmp_path: Path) -> None:
    """Header, caches, mount check, rocminfo, torch, then `Commands:` and the commands."""
    standins.add("findmnt", "echo /mnt; echo findmnt-ran >&2")
    env = {**gpu_job, "VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE": "1"}
    done = rocm("echo run", env, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "--- Native in-pod ROCm CI"
    assert lines.index("ROCk module is loaded") < lines.index("Commands:echo run")
    assert lines[-1] == "run"
    assert [c["name"] for c in standins.calls()] == ["findmnt", "rocminfo"]


# ------------------------------------------------------------- command semantics (CLI)


@pytest.mark.parametrize(
    ("commands", "allow", "code"),
    [
        ("echo first; false\necho second; true", "", 1),  # G19
        ("(exit 5)", "", 5),  # G20
        ("(exit 5)", "1", 0),  # G21
        ("(exit 5)", "yes", 5),  # G22
        ("(exit 5)\nfalse", "1", 1),  # G23
        ("false\n(exit 5)", "", 1),  # G24
        ("(exit 3)\n(exit 7)", "", 3),  # G25
        ("(exit 5)\n(exit 2)\n(exit 5)", "", 2),  # G26
        ("false\nexit 5", "", 1),  # G27 TARGET
        ("false\nexit 5", "1", 1),  # G27 TARGET
        ("false\nexit 0", "", 1),  # G28 TARGET
        ("(exit 2)\nset -e\n(exit 5)", "", 2),  # G29 TARGET
        ("(exit 2)\nset -e\n(exit 5)", "1", 2),  # G29 TARGET
        ("false && true\ntrue", "", 0),  # G30
        ("python3 -c 'raise SystemExit(1)' | tee log", "", 1),  # G31
        ("(false; true)", "", 0),  # G32
        ("(exit 256)", "", 0),  # G37
    ],
    ids=[
        "G19", "G20", "G21", "G22", "G23", "G24", "G25", "G26", "G27", "G27-allow", "G28",
        "G29", "G29-allow", "G30", "G31", "G32", "G37",
    ],
)  # fmt: skip
def test_golden_command_semantics(
    commands: str, allow: str, code: int, job: dict[str, str], tmp_path: Path
) -> None:
    done = cli({**job, "TEST_COMMANDS": commands, "VLLM_CI_ALLOW_NO_TESTS": allow}, cwd=tmp_path)
    assert done.returncode == code, done.stderr
    if "echo second" in commands:
        assert {"first", "second"} <= set(done.stderr.splitlines())
    if allow == "1" and code == 0:
        assert ALLOW_MESSAGE in done.stderr.splitlines()


def test_g33_cd_to_missing_dir(job: dict[str, str], tmp_path: Path) -> None:
    done = cli({**job, "TEST_COMMANDS": "cd /nonexistent\npwd"}, cwd=tmp_path)
    assert done.returncode == 1
    assert str(tmp_path) in done.stderr.splitlines()


def test_long_command_text_runs_from_a_file(job: dict[str, str], tmp_path: Path) -> None:
    """120 kB of commands: too long for one `bash -c` argument once embedded twice."""
    filler = "\n".join(f": line {i} {'x' * 100}" for i in range(1100))
    commands = f"{filler}\ntouch ran\n(exit 3)"
    assert len(commands) > 120_000
    done = cli({**job, "TEST_COMMANDS": commands}, cwd=tmp_path)
    assert done.returncode == 3, done.stderr[-500:]
    assert (tmp_path / "ran").exists()


def test_g34_sigabrt_is_134(job: dict[str, str]) -> None:
    done = cli({**job, "TEST_COMMANDS": "python3 -c 'import os; os.abort()'"})
    assert done.returncode == 134


@pytest.mark.parametrize("signum", [6, 9, 11, 15])
def test_signal_n_gives_128_plus_n(signum: int, job: dict[str, str]) -> None:
    done = cli({**job, "TEST_COMMANDS": f"true; kill -{signum} $$"})
    assert done.returncode == 128 + signum


# --------------------------------------------------------------------------- NPU


def npu(commands: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_task("run-tests", "--platform", "npu", env={**env, "TEST_COMMANDS": commands})


def test_npu_stops_at_first_failure(job: dict[str, str]) -> None:
    done = npu("echo a\nfalse\necho b", job)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert "a" in lines and "b" not in lines


def test_npu_keeps_the_exact_status_and_ignores_allow(job: dict[str, str]) -> None:
    assert npu("(exit 5)", {**job, "VLLM_CI_ALLOW_NO_TESTS": "1"}).returncode == 5
    assert npu("false | true", job).returncode == 0  # no pipefail, like `bash -e -c`
    assert npu("set +e\nfalse\nEXIT=$?\necho after\nexit $EXIT", job).returncode == 1


def test_npu_env_and_no_rocm_preflight(job: dict[str, str]) -> None:
    env = {k: v for k, v in job.items() if k != "VLLM_CI_DOCKER_DISABLED"}
    done = npu('echo "m=$VLLM_WORKER_MULTIPROC_METHOD"', env)
    assert done.returncode == 0
    assert "m=spawn" in done.stderr.splitlines()
    kept = npu(
        'echo "m=$VLLM_WORKER_MULTIPROC_METHOD"', {**env, "VLLM_WORKER_MULTIPROC_METHOD": "fork"}
    )
    assert "m=fork" in kept.stderr.splitlines()
    assert not SHELLS[Platform.NPU].run_all


def test_npu_no_commands(job: dict[str, str]) -> None:
    done = run_task("run-tests", "--platform", "npu", env=job)
    assert done.returncode == 1
    assert NO_COMMANDS in done.stderr.splitlines()


@pytest.mark.parametrize(
    "agent", ["atlas-a2-001-1-2cards", "host-2-4cards", "badname"], ids=["G58", "G59", "G60"]
)
def test_g58_g60_legacy_npu_device_mapping_is_dropped(agent: str, job: dict[str, str]) -> None:
    """run_npu_test.sh mapped BUILDKITE_AGENT_NAME to `--device /dev/davinci<i>` (G58, G59) and
    failed with `parse error` on other names (G60). The NPU pod brings its devices now: the
    agent name is not read, and every name runs the commands."""
    done = npu('echo "ran on $BUILDKITE_AGENT_NAME"', {**job, "BUILDKITE_AGENT_NAME": agent})
    assert done.returncode == 0, done.stderr
    assert f"ran on {agent}" in done.stderr.splitlines()
    assert "parse error" not in done.stderr and "davinci" not in done.stderr


def test_what_run_npu_test_did_that_we_drop_is_listed() -> None:
    """docs/migration.md's run_npu_test.sh row names each dropped behaviour (spec §2.2)."""
    rows = (ROOT / "docs" / "migration.md").read_text().splitlines()
    row = next(
        r for r in rows if r.startswith("| `.buildkite/scripts/hardware_ci/run_npu_test.sh`")
    )
    for dropped in (
        "vllm-ascend:v0.11.0rc2",  # the inline-Dockerfile image build
        "pypi-cache",
        "cachebuilder<idx>",
        "PR-head clone",
        "BUILDKITE_AGENT_NAME",  # G58-G60
        "/dev/davinci",
        "`parse error`",
        "npu-smi",
        "/mnt/hf_cache<idx>",
        "--init",
        "docker system prune -f",
        "set -x",
    ):
        assert dropped in row, dropped


# --------------------------------------------------------------------------- task


@pytest.mark.process  # `inv` and `vllm-omni-ci` give the same result
def test_inv_gives_the_same_usage_errors(job: dict[str, str]) -> None:
    """`inv run-tests` in the repo root behaves as `vllm-omni-ci run-tests` (exit 2, one line)."""
    done = subprocess.run(
        ["inv", "run-tests", "--platform"], cwd=ROOT, env=job, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1
    missing = subprocess.run(
        ["inv", "run-tests", "--", "true"], cwd=ROOT, env=job, capture_output=True, text=True
    )
    assert (missing.returncode, missing.stderr) == (
        2,
        "error: --platform is required: rocm (alias amd), npu or xpu (alias intel)\n",
    )


def test_platform_is_required_and_help_works(job: dict[str, str]) -> None:
    done = run_task("run-tests", "--", "true", env=job)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --platform is required: rocm (alias amd), npu or xpu (alias intel)"
    )
    helped = run_task("run-tests", "--help", env=job)
    assert helped.returncode == 0
    text = " ".join(helped.stdout.split())
    assert "PYTORCH_ROCM_ARCH (forced empty)" in text
    for fact in (
        "TMPDIR, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, VLLM_CACHE_ROOT, XDG_CACHE_HOME, "
        "HF_DATASETS_CACHE",  # the other overwritten variables
        "0 = no-GPU pre-flight",
        "VLLM_CI_ALLOW_NO_TESTS=1 turns a final 5 into 0",
        "128+N (SIGABRT 134)",
        "ZE_AFFINITY_MASK passed by name",
    ):
        assert fact in text, fact


def test_unsupported_platform_is_a_usage_error(job: dict[str, str]) -> None:
    done = run_task("run-tests", "--platform", "cuda", "--", "true", env=job)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --platform: run-tests does not support cuda: allowed values are "
        "rocm (alias amd), npu, xpu (alias intel)"
    )
    bad = run_task("run-tests", "--platform", "arm", "--", "true", env=job)
    assert bad.returncode == 2
    assert "unknown platform 'arm'" in bad.stderr


def test_dry_run_prints_the_program_and_runs_nothing(job: dict[str, str], tmp_path: Path) -> None:
    env = {**job, "TEST_COMMANDS": "touch ran", "HF_TOKEN": "hf_dryrunsecret"}
    done = run_task("run-tests", "--platform", "amd", "--dry-run", env=env, cwd=tmp_path)
    assert done.returncode == 0
    assert not (tmp_path / "ran").exists()
    assert done.stdout.startswith("#!/usr/bin/env bash\n")
    assert done.stdout == program_for(Platform.ROCM, env)
    # Runnable as printed.
    assert bash(done.stdout, job, tmp_path).returncode == 0
    assert (tmp_path / "ran").exists()
