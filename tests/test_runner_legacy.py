"""The original run-amd-test.sh, run next to our rendered program on the same inputs.

The seed holds the script whole (tests/seeds.py rebuilds it at test time), so
the truth table's `legacy` column and the golden pre-flight scenarios are
checked against the original itself, not against a table typed in by hand:
rows without a `legacy` value must give the original's codes, rows with one
must differ from TARGET exactly as docs/differences.md says. Both programs get
the same stand-ins (`rocminfo`, `findmnt`) and the same fake `torch`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from ci.platforms import Platform
from ci.runner.native import program_for
from tests.conftest import StandIns
from tests.seeds import RUN_AMD_TEST, write_script
from tests.test_runner import FAKE_TORCH, TRUTH_TABLE, Row, minimal_path, row_id

ALLOW = "VLLM_CI_ALLOW_NO_TESTS"


@pytest.fixture(scope="module")
def legacy_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_script(RUN_AMD_TEST, tmp_path_factory.mktemp("legacy") / "run-amd-test.sh")


@pytest.fixture
def env(standins: StandIns, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A passing MI300 job as the original needs it: one GPU seen by a fake ROCm torch."""
    package = tmp_path / "fake-torch" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_TORCH)
    standins.add("rocminfo", "echo 'ROCk module is loaded'")
    job_id = f"test-runner-legacy-{uuid.uuid4().hex[:10]}"
    made = standins.env(
        {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
            "VLLM_CI_DOCKER_DISABLED": "1",
            "BUILDKITE_JOB_ID": job_id,
            "HF_HOME": str(tmp_path / "hf"),
            "PYTHONPATH": str(package.parent),
            "FAKE_TORCH_LOG": str(tmp_path / "torch.log"),
            "FAKE_TORCH_HIP": "6.2.41133",
            "FAKE_TORCH_COUNT": "1",
        }
    )
    yield made
    shutil.rmtree(f"/tmp/vllm-omni-native-{job_id}", ignore_errors=True)


def run_legacy(
    script: Path, env: Mapping[str, str], args: Sequence[str] = (), cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", str(script), *args],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def run_ours(
    env: Mapping[str, str], args: Sequence[str] = (), cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", "-c", program_for(Platform.ROCM, env, args)],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


# --------------------------------------------------------------------------- truth table


@pytest.mark.parametrize("separator", ["; ", "\n"], ids=["semicolons", "newlines"])
@pytest.mark.parametrize("row", TRUTH_TABLE, ids=row_id)
def test_legacy_column_is_what_the_original_does(
    row: Row, separator: str, legacy_script: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """Rows where legacy equals TARGET: the original gives TARGET. Others: it gives `legacy`."""
    commands = separator.join(row.lines)
    job = {**env, "TEST_COMMANDS": commands}
    got = (
        run_legacy(legacy_script, job, cwd=tmp_path).returncode,
        run_legacy(legacy_script, {**job, ALLOW: "1"}, cwd=tmp_path).returncode,
    )
    if row.legacy is None:
        assert got == row.target
    else:
        assert got == row.legacy
        assert row.legacy != row.target  # a `legacy` value marks a real difference


# --------------------------------------------------------------------------- golden scenarios

# (id, env changes, positional args, what is compared)
SAME = [
    ("G01", {"VLLM_CI_DOCKER_DISABLED": None, "TEST_COMMANDS": "touch ran"}, ()),
    ("G02", {"VLLM_CI_DOCKER_DISABLED": "true", "TEST_COMMANDS": "touch ran"}, ()),
    ("G02-yes", {"VLLM_CI_DOCKER_DISABLED": "yes", "TEST_COMMANDS": "touch ran"}, ()),
    ("G02-01", {"VLLM_CI_DOCKER_DISABLED": "01", "TEST_COMMANDS": "touch ran"}, ()),
    ("G03", {}, ()),
    ("G04", {"TEST_COMMANDS": "true"}, ("false",)),
    ("G05", {"TEST_COMMAND": "true"}, ()),
    ("G06", {}, ("echo pytest a", "pytest b")),
    ("G07", {"BUILDKITE_JOB_ID": "a/b c", "TEST_COMMANDS": 'echo "$TMPDIR"'}, ()),
    (
        "G08",
        {"BUILDKITE_JOB_ID": "", "BUILDKITE_PARALLEL_JOB": "2", "TEST_COMMANDS": 'echo "$TMPDIR"'},
        (),
    ),
    ("G09", {"BUILDKITE_JOB_ID": None, "TEST_COMMANDS": 'echo "$TMPDIR"'}, ()),
    ("G10", {"BUILDKITE_JOB_ID": "../etc", "TEST_COMMANDS": 'echo "$TMPDIR"'}, ()),
    ("G11", {"BUILDKITE_JOB_ID": "x:y;z$", "TEST_COMMANDS": 'echo "$TMPDIR"'}, ()),
    ("G11-glob", {"BUILDKITE_JOB_ID": "a*b?[c]", "TEST_COMMANDS": 'echo "$TMPDIR"'}, ()),
    ("G12-utf8", {"BUILDKITE_JOB_ID": "üñí", "TEST_COMMANDS": 'echo "$TMPDIR"'}, ()),
    ("G16", {"VLLM_CI_EXPECTED_GPU_COUNT": "2", "TEST_COMMANDS": "touch ran"}, ()),
    ("G17", {"FAKE_TORCH_HIP": "", "TEST_COMMANDS": "touch ran"}, ()),
    ("unavailable", {"FAKE_TORCH_AVAILABLE": "0", "TEST_COMMANDS": "touch ran"}, ()),
    ("G19", {"TEST_COMMANDS": "echo first; false\necho second; true"}, ()),
    ("G21", {"TEST_COMMANDS": "(exit 5)", ALLOW: "1"}, ()),
    ("G33", {"TEST_COMMANDS": "cd /nonexistent\npwd"}, ()),
    (
        "defaults",
        {
            "TEST_COMMANDS": "env | grep -E '^(PYTHONFAULTHANDLER|HF_|MIOPEN|VLLM_ROCM|"
            "PYTORCH_ROCM_ARCH|TMPDIR|TORCHINDUCTOR|TRITON|VLLM_CACHE|XDG_CACHE)' | sort",
            "VLLM_ROCM_USE_AITER": "1",
            "HF_HUB_ETAG_TIMEOUT": "",
            "PYTORCH_ROCM_ARCH": "gfx942",
            "TMPDIR": "/elsewhere",
        },
        (),
    ),
]


def apply(env: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    out = dict(env)
    for name, value in changes.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def scrub(text: str, tmp: Path) -> str:
    return text.replace(str(tmp), "<tmp>")


def errors(stderr: str) -> list[str]:
    """The stderr lines a user reads, without what only says where the text lives.

    bash prefixes its diagnostics with the script and line (`_: line 3: cd: …`),
    and a torch check failure is a traceback whose source lines differ (ours
    raises instead of `assert`, which `python3 -O` would skip): its last line is
    the message.
    """
    lines = [re.sub(r"^[^:]*: line \d+: ", "", line) for line in stderr.splitlines()]
    if any(line.startswith("Traceback") for line in lines):
        return lines[-1:]
    return lines


@pytest.mark.parametrize(("changes", "args"), [s[1:] for s in SAME], ids=[s[0] for s in SAME])
def test_same_as_the_original(
    changes: dict[str, str | None],
    args: tuple[str, ...],
    legacy_script: Path,
    env: dict[str, str],
    tmp_path: Path,
) -> None:
    """Exit code, stdout and the stderr error lines match the original's, line for line."""
    job = apply(env, changes)
    roots = {f"/tmp/vllm-omni-native-{s}" for s in ("a_b_c", "2", "local", ".._etc", "x_y_z_")}
    roots |= {"/tmp/vllm-omni-native-a_b__c_", "/tmp/vllm-omni-native-___"}
    existed = {r for r in roots if os.path.exists(r)}
    try:
        (tmp_path / "old").mkdir()
        (tmp_path / "new").mkdir()
        old = run_legacy(legacy_script, job, args, cwd=tmp_path / "old")
        new = run_ours(job, args, cwd=tmp_path / "new")
    finally:
        for root in roots - existed:
            shutil.rmtree(root, ignore_errors=True)
    assert new.returncode == old.returncode, (old.stderr, new.stderr)
    assert scrub(new.stdout, tmp_path / "new") == scrub(old.stdout, tmp_path / "old")
    assert errors(new.stderr) == errors(old.stderr)
    assert (tmp_path / "new" / "ran").exists() == (tmp_path / "old" / "ran").exists()


def test_g13_findmnt_missing_same_as_the_original(
    legacy_script: Path, env: dict[str, str], tmp_path: Path
) -> None:
    job = {**env, "VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE": "1", "TEST_COMMANDS": "touch ran"}
    job["PATH"] = minimal_path(tmp_path, "mkdir", "touch")
    old, new = run_legacy(legacy_script, job, cwd=tmp_path), run_ours(job, cwd=tmp_path)
    assert (old.returncode, old.stderr) == (1, new.stderr)
    assert new.stderr == "Error: findmnt is required to verify the Hugging Face cache mount.\n"
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("answer", "code"), [("/", 1), ("", 1), ("/mnt", 0)], ids=["G14", "no-mount", "ancestor"]
)
def test_g14_g15_mount_check_same_as_the_original(
    answer: str,
    code: int,
    legacy_script: Path,
    env: dict[str, str],
    standins: StandIns,
    tmp_path: Path,
) -> None:
    standins.add("findmnt", f"echo {answer}" if answer else "exit 1")
    for required in ("1", "0"):  # G15: not required, not asked
        job = {**env, "VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE": required, "TEST_COMMANDS": "true"}
        old, new = run_legacy(legacy_script, job), run_ours(job)
        assert (new.returncode, new.stderr) == (old.returncode, old.stderr)
        assert new.returncode == (code if required == "1" else 0)
    assert len(standins.argvs("findmnt")) == 2  # once per program, only when required


def test_g18_rocminfo_status_same_as_the_original(
    legacy_script: Path, env: dict[str, str], standins: StandIns, tmp_path: Path
) -> None:
    job = {**env, "TEST_COMMANDS": "touch ran"}
    standins.add("rocminfo", "exit 3")
    assert run_legacy(legacy_script, job, cwd=tmp_path).returncode == 3
    assert run_ours(job, cwd=tmp_path).returncode == 3
    (standins.bin_dir / "rocminfo").unlink()
    job["PATH"] = f"{standins.bin_dir}:{minimal_path(tmp_path, 'mkdir', 'python3', 'touch')}"
    assert run_legacy(legacy_script, job, cwd=tmp_path).returncode == 127
    assert run_ours(job, cwd=tmp_path).returncode == 127
    assert not (tmp_path / "ran").exists()


# --------------------------------------------------------------- the documented differences


def test_g12_c_locale_is_the_documented_difference(
    legacy_script: Path, env: dict[str, str]
) -> None:
    """docs/differences.md "Job ids are sanitised per character, in any locale"."""
    job = {**env, "LC_ALL": "C", "BUILDKITE_JOB_ID": "üñí", "TEST_COMMANDS": 'echo "$TMPDIR"'}
    made = [p for p in ("______", "___") if not os.path.exists(f"/tmp/vllm-omni-native-{p}")]
    try:
        old, new = run_legacy(legacy_script, job), run_ours(job)
    finally:
        for p in made:
            shutil.rmtree(f"/tmp/vllm-omni-native-{p}", ignore_errors=True)
    assert old.stdout.splitlines()[-1] == "/tmp/vllm-omni-native-______/tmp"
    assert new.stdout.splitlines()[-1] == "/tmp/vllm-omni-native-___/tmp"


@pytest.mark.parametrize("value", ["two", "1.5", ""])
def test_bad_gpu_count_is_the_documented_difference(
    value: str, legacy_script: Path, env: dict[str, str], standins: StandIns, tmp_path: Path
) -> None:
    """docs/differences.md "A bad `VLLM_CI_EXPECTED_GPU_COUNT` is one error line…"."""
    job = {**env, "VLLM_CI_EXPECTED_GPU_COUNT": value, "TEST_COMMANDS": "touch ran"}
    old = run_legacy(legacy_script, job, cwd=tmp_path)
    assert old.returncode == 1
    assert "ValueError: invalid literal for int()" in old.stderr  # a traceback, after rocminfo
    assert standins.argvs("rocminfo") == [[]]
    new = run_ours(job, cwd=tmp_path)
    if value:
        assert new.returncode == 1
        assert new.stderr == (
            f"error: VLLM_CI_EXPECTED_GPU_COUNT must be a non-negative integer, got '{value}'.\n"
        )
        assert standins.argvs("rocminfo") == [[]]  # ours stopped before rocminfo
    else:
        assert new.returncode == 0  # empty means the default, 1
        assert (tmp_path / "ran").exists()


def test_no_gpu_preflight_is_new(legacy_script: Path, env: dict[str, str]) -> None:
    """docs/differences.md "`VLLM_CI_EXPECTED_GPU_COUNT=0` is the no-GPU pre-flight"."""
    job = {**env, "VLLM_CI_EXPECTED_GPU_COUNT": "0", "TEST_COMMANDS": "true"}
    old, new = run_legacy(legacy_script, job), run_ours(job)
    assert old.returncode == 1
    assert "AssertionError: Expected 0 ROCm GPU(s), found 1" in old.stderr
    assert new.returncode == 0


def test_gpu_check_holds_under_pythonoptimize(legacy_script: Path, env: dict[str, str]) -> None:
    """docs/differences.md "The GPU check holds under `PYTHONOPTIMIZE`": the original's
    `assert` statements vanish under -O, so a job inheriting PYTHONOPTIMIZE ran on no GPU."""
    job = {**env, "PYTHONOPTIMIZE": "1", "FAKE_TORCH_COUNT": "0", "TEST_COMMANDS": "true"}
    old, new = run_legacy(legacy_script, job), run_ours(job)
    assert old.returncode == 0  # the check was skipped
    assert new.returncode == 1
    assert errors(new.stderr) == ["AssertionError: Expected 1 ROCm GPU(s), found 0"]
