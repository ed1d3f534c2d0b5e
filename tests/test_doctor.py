"""`doctor` against the real engine, and with a stand-in `docker buildx`."""

from __future__ import annotations

import json

import pytest

from ci import doctor
from tests.conftest import StandIns, run_cli


@pytest.mark.docker
def test_doctor_reports_the_real_engine_and_clients(docker_cli: str) -> None:
    done = run_cli("doctor", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["engine_version"], report
    assert report["storage_driver"]
    assert report["registry"] is True
    paths = [c["path"] for c in report["clients"]]
    assert docker_cli in paths
    capable = [c for c in report["clients"] if c["buildkit_without_buildx"]]
    assert capable, "this machine's Debian client builds with BuildKit without buildx"
    # The text form names every probe.
    text = run_cli("doctor").stdout
    for needle in (
        "engine:",
        "--output type=image",
        "docker buildx works",
        "buildctl",
        "registry",
        "shellcheck",
    ):
        assert needle in text


@pytest.mark.docker
def test_doctor_sees_a_working_buildx(standins: StandIns, docker_cli: str) -> None:
    """A stand-in client whose `buildx version` works; everything else goes to the real one."""
    standins.add(
        "docker",
        f"""
        if [[ "$1" == buildx && "$2" == version ]]; then
          echo "github.com/docker/buildx v0.99.0"; exit 0
        fi
        exec {docker_cli} "$@"
        """,
    )
    done = run_cli("doctor", "--json", env={**standins.env(), "VLLM_OMNI_CI_DOCKER": ""})
    report = json.loads(done.stdout)
    first = report["clients"][0]
    assert first["path"] == str(standins.bin_dir / "docker")
    assert first["buildx"] is True
    assert report["chosen"] == first["path"]


def test_explicit_docker_that_does_not_exist_is_an_input_error() -> None:
    done = run_cli("doctor", "--docker", "/nope/docker")
    assert done.returncode == 2
    assert "error: --docker: /nope/docker is not an executable docker client" in done.stderr


def test_pick_docker_prefers_a_buildkit_capable_client() -> None:
    clients = [
        doctor.Client("/a/docker", "28.2.2", buildkit_without_buildx=False, buildx=False),
        doctor.Client("/b/docker", "20.10", buildkit_without_buildx=True, buildx=False),
    ]
    assert doctor.pick_docker(clients) == "/b/docker"
