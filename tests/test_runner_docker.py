"""One program, two places: the rendered ROCm program gives the same exit codes
locally (`bash -c`) and inside a real container from the offline base image
(`docker run IMAGE bash -c`), for every row of the §1.9 truth table.

All rows run in one container through a small driver read from stdin (it is
larger than one argv string may be), so the test costs one container start;
the driver runs each rendered program with `bash -c`.
"""

from __future__ import annotations

import shlex
import subprocess
import uuid
from pathlib import Path

import pytest

from ci.platforms import Platform
from ci.runner.native import program_for
from tests.conftest import BASE_IMAGE, TEST_LABEL
from tests.test_runner import TRUTH_TABLE


def driver() -> str:
    """Run every row's program with ALLOW unset and =1; print one `@@code` line each."""
    lines = ['cd "$1"']
    for row in TRUTH_TABLE:
        program = program_for(Platform.ROCM, {"TEST_COMMANDS": "\n".join(row.lines)})
        for allow in ("", "1"):
            lines.append(
                f"VLLM_CI_ALLOW_NO_TESTS={allow} bash -c {shlex.quote(program)} >/dev/null 2>&1;"
                ' echo "@@$?"'
            )
    return "\n".join(lines) + "\n"


def codes(output: str) -> list[int]:
    return [int(line[2:]) for line in output.splitlines() if line.startswith("@@")]


ENV = {
    "VLLM_CI_DOCKER_DISABLED": "1",
    "VLLM_CI_EXPECTED_GPU_COUNT": "0",
    "HF_HOME": "/tmp/runner-parity-hf",
}


@pytest.mark.docker
@pytest.mark.usefixtures("docker_cleanup")
def test_same_program_same_codes_locally_and_in_a_container(
    docker_cli: str, tmp_path: Path
) -> None:
    script = driver()
    expected = [code for row in TRUTH_TABLE for code in row.target]
    job_id = f"runner-parity-{uuid.uuid4().hex[:8]}"
    env = {**ENV, "BUILDKITE_JOB_ID": job_id}

    local = subprocess.run(
        ["bash", "-s", str(tmp_path)],
        input=script,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", **env, "HF_HOME": str(tmp_path / "hf")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    subprocess.run(["rm", "-rf", f"/tmp/vllm-omni-native-{job_id}"], check=False)

    name = f"vllm-omni-ci-test-runner-{uuid.uuid4().hex[:8]}"
    env_flags = [flag for k, v in env.items() for flag in ("-e", f"{k}={v}")]
    container = subprocess.run(
        [
            docker_cli,
            "run",
            "--rm",
            "--label",
            TEST_LABEL,
            "-i",
            "--name",
            name,
            *env_flags,
            BASE_IMAGE,
            "bash",
            "-s",
            "/tmp",
        ],
        input=script,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert container.returncode == 0, container.stderr
    assert codes(local.stdout) == expected
    assert codes(container.stdout) == codes(local.stdout)


@pytest.mark.docker
@pytest.mark.usefixtures("docker_cleanup")
@pytest.mark.parametrize(
    ("commands", "allow", "code"),
    [
        ("false\nexit 5", "", 1),  # G27 TARGET
        ("(exit 5)", "1", 0),  # G21
        ("(exit 2)\nset -e\n(exit 5)", "", 2),  # G29 TARGET
        ("python3 -c 'import os; os.abort()'", "", 134),  # G34
    ],
    ids=["G27", "G21", "G29", "G34"],
)
def test_docker_run_image_bash_c_program(
    commands: str, allow: str, code: int, docker_cli: str, tmp_path: Path
) -> None:
    """The literal form a tier session uses: `docker run IMAGE bash -c PROGRAM`, program as argv."""
    program = program_for(Platform.ROCM, {"TEST_COMMANDS": commands})
    env = {**ENV, "BUILDKITE_JOB_ID": f"runner-argv-{uuid.uuid4().hex[:8]}"}
    env_flags = [
        flag
        for k, v in {**env, "VLLM_CI_ALLOW_NO_TESTS": allow}.items()
        for flag in ("-e", f"{k}={v}")
    ]
    name = f"vllm-omni-ci-test-runner-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [docker_cli, "run", "--rm", "--label", TEST_LABEL, "--name", name, *env_flags,
         BASE_IMAGE, "bash", "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    assert done.stdout.splitlines()[0] == "--- Native in-pod ROCm CI"
    local = subprocess.run(
        ["bash", "-c", program],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", **env, "HF_HOME": str(tmp_path / "hf"),
             "VLLM_CI_ALLOW_NO_TESTS": allow},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    subprocess.run(["rm", "-rf", f"/tmp/vllm-omni-native-{env['BUILDKITE_JOB_ID']}"], check=False)
    assert local.returncode == done.returncode
