""".ci/tools-image.sh: which client it picks from doctor's report, and the exact argv.

The real build runs in .ci/run (and in test_sample_docker); here `vllm-omni-ci`
and `docker` are recording stand-ins, so every branch of the client choice is
covered without an engine.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, StandIns

SCRIPT = ROOT / ".ci" / "tools-image.sh"


def doctor_json(chosen: str, clients: list[dict[str, object]]) -> str:
    return json.dumps({"chosen": chosen, "clients": clients})


def client(path: Path, *, buildkit: bool, buildx: bool) -> dict[str, object]:
    return {"path": str(path), "buildkit_without_buildx": buildkit, "buildx": buildx}


def run_script(standins: StandIns, report: str) -> subprocess.CompletedProcess[str]:
    report_file = standins.bin_dir / "doctor.json"
    report_file.write_text(report)
    standins.add(
        "vllm-omni-ci",
        f'if [ "$1" = doctor ]; then cat {report_file}; fi',
        env_keys=("DOCKER_BUILDKIT",),
    )
    env = standins.env()
    env.pop("VLLM_OMNI_CI_TOOLS_IMAGE", None)
    return subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60
    )


def test_buildkit_client_builds_with_docker_buildkit_then_lists_offline(
    standins: StandIns,
) -> None:
    old = standins.add("docker-old", "exit 0")
    new = standins.add("docker", "exit 0", env_keys=("DOCKER_BUILDKIT",))
    report = doctor_json(
        str(old),
        [client(old, buildkit=False, buildx=False), client(new, buildkit=True, buildx=False)],
    )
    result = run_script(standins, report)
    assert result.returncode == 0, result.stderr
    assert standins.argvs("vllm-omni-ci") == [["wheelhouse"], ["doctor", "--json"]]
    assert standins.argvs("docker-old") == []
    build, run = standins.calls("docker")
    assert build["argv"] == [
        "build",
        "--pull",
        "--progress=plain",
        "-f",
        "docker/Dockerfile.tools",
        "-t",
        "vllm-omni-ci/tools:local",
        ".",
    ]
    assert build["env"] == {"DOCKER_BUILDKIT": "1"}
    assert build["cwd"] == str(ROOT)
    assert run["argv"] == [
        "run",
        "--rm",
        "--network",
        "none",
        "vllm-omni-ci/tools:local",
        "vllm-omni-ci",
        "--list",
    ]


def test_buildx_only_client_uses_buildx_load(standins: StandIns) -> None:
    docker = standins.add("docker", "exit 0")
    result = run_script(
        standins, doctor_json(str(docker), [client(docker, buildkit=False, buildx=True)])
    )
    assert result.returncode == 0, result.stderr
    assert standins.argvs("docker")[0][:3] == ["buildx", "build", "--load"]


def test_no_buildkit_client_fails_before_building(standins: StandIns) -> None:
    docker = standins.add("docker", "exit 0")
    result = run_script(
        standins, doctor_json(str(docker), [client(docker, buildkit=False, buildx=False)])
    )
    assert result.returncode == 1
    assert "error: no docker client here can build with BuildKit" in result.stderr
    assert standins.argvs("docker") == []


@pytest.mark.parametrize("failing", ["build", "run"])
def test_a_failing_docker_step_fails_the_script(standins: StandIns, failing: str) -> None:
    docker = standins.add("docker", f'[ "$1" = {failing} ] && exit 3; exit 0')
    result = run_script(
        standins, doctor_json(str(docker), [client(docker, buildkit=True, buildx=False)])
    )
    assert result.returncode == 3
