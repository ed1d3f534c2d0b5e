"""`doctor` against the real engine, and with a stand-in `docker buildx`."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ci import doctor
from tests.conftest import TEST_LABEL, StandIns, run_cli
from tests.inproc import Outcome, run_task


@pytest.mark.docker
def test_doctor_reports_the_real_engine_and_clients(docker_cli: str) -> None:
    done = run_cli("doctor", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True and all(c["ok"] for c in report["checks"])
    assert report["engine_version"], report
    assert report["storage_driver"]
    assert report["registry"] is True
    paths = [c["path"] for c in report["clients"]]
    assert docker_cli in paths
    capable = [c for c in report["clients"] if c["buildkit_without_buildx"]]
    assert capable, "a client here builds with BuildKit (through the sandbox's buildx plugin)"
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
    done = run_task("doctor", "--docker", "/nope/docker")
    assert done.returncode == 2
    assert "error: --docker: /nope/docker is not an executable docker client" in done.stderr


@pytest.mark.parametrize(
    "named",
    ["/nope/docker", "/tmp", "no-such-docker-client", "x" * 300],  # 300: ENAMETOOLONG
    ids=["missing", "a-directory", "not-on-path", "too-long"],
)
def test_a_bad_docker_stops_before_any_client_runs(
    named: str, standins: StandIns, tmp_path: Path
) -> None:
    """A directory is not a client either; PATH's docker is never probed first."""
    standins.add("docker", "exit 0")
    for env in ({doctor.DOCKER_ENV: named}, {}):
        args = ["--docker", named] if not env else []
        done = run_task("doctor", *args, env={**standins.env(), **env}, cwd=tmp_path)
        source = doctor.DOCKER_ENV if env else "--docker"
        assert done.returncode == 2, done.stderr
        assert done.stderr == f"error: {source}: {named} is not an executable docker client\n"
        assert standins.argvs("docker") == []


def test_a_path_entry_the_system_refuses_is_skipped(
    tmp_path: Path, inproc: Callable[..., Outcome]
) -> None:
    """A PATH entry too long for the file system (ENAMETOOLONG) raised OSError out of
    pathlib while doctor listed the docker clients."""
    env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}{os.pathsep}/{'x' * 300}"}
    done = inproc("doctor", env=env, cwd=tmp_path)
    assert "Traceback" not in done.stderr
    assert done.code in (0, 1), done.stderr


def test_pick_docker_prefers_a_buildkit_capable_client() -> None:
    clients = [
        doctor.Client("/a/docker", "28.2.2", buildkit_without_buildx=False, buildx=False),
        doctor.Client("/b/docker", "20.10", buildkit_without_buildx=True, buildx=False),
    ]
    assert doctor.pick_docker(clients) == "/b/docker"


def test_env_var_chooses_the_client_and_every_probe_goes_to_it(standins: StandIns) -> None:
    """VLLM_OMNI_CI_DOCKER wins over auto-detection, even for a client that can do nothing."""
    chosen = standins.add("docker-from-env", "exit 1")
    done = run_task("doctor", "--json", env={**standins.env(), doctor.DOCKER_ENV: str(chosen)})
    assert done.returncode == 1  # judged: that client reaches no engine
    assert "error: engine: no engine answers" in done.stderr
    report = json.loads(done.stdout)
    assert report["chosen"] == str(chosen)
    assert report["engine_version"] is None and report["engine_error"]
    calls = standins.argvs("docker-from-env")
    assert ["build", "--help"] in calls and ["buildx", "version"] in calls
    assert ["info", "--format", "{{json .}}"] in calls


def test_docker_option_overrides_the_env_var(standins: StandIns) -> None:
    from_env = standins.add("docker-env", "exit 1")
    from_flag = standins.add("docker-flag", "exit 1")
    env = {**standins.env(), doctor.DOCKER_ENV: str(from_env)}
    done = run_task("doctor", "--json", "--docker", str(from_flag), env=env)
    assert done.returncode == 1, done.stderr  # a client that can do nothing fails the checks
    assert json.loads(done.stdout)["chosen"] == str(from_flag)
    assert ["info", "--format", "{{json .}}"] not in standins.argvs("docker-env")


def test_a_bad_env_var_is_an_input_error_naming_it() -> None:
    done = run_task("doctor", env={**os.environ, doctor.DOCKER_ENV: "/nope/docker"})
    assert done.returncode == 2
    assert (
        done.stderr
        == f"error: {doctor.DOCKER_ENV}: /nope/docker is not an executable docker client\n"
    )
    assert done.stdout == ""


@pytest.mark.docker
def test_probe_is_a_library_call_that_tells_the_truth(docker_cli: str) -> None:
    """What image builds rely on: the chosen client, a BuildKit client, and `type=image`."""
    report = doctor.probe(docker_cli)
    assert report.chosen == docker_cli
    assert report.engine and report.storage_driver
    assert report.buildkit_client() is not None
    assert report.registry is True
    # `--output type=image` support is what a real attempt says (20.10 engines: no).
    name = "vllm-omni-ci-doctor-test:output-image"
    attempt = subprocess.run(
        [docker_cli, "build", "--label", TEST_LABEL, "--output", f"type=image,name={name}", "-"],
        input=f"FROM scratch\nLABEL {TEST_LABEL}\n",
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    subprocess.run([docker_cli, "rmi", "-f", name], capture_output=True)
    assert report.output_image is (attempt.returncode == 0)
    text = doctor.render(report)
    assert f"engine: {report.engine_version} (storage driver {report.storage_driver})" in text
    assert f"engine supports --output type=image: {'yes' if report.output_image else 'no'}" in text
    for client in report.clients:
        assert f"{client.path}  version={client.version}" in text


def test_doctor_judges_an_unreachable_engine_exit_1_with_its_fix(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no.sock", "VLLM_OMNI_CI_DOCKER": ""}
    done = run_task("doctor", env=env)
    assert done.returncode == 1
    engine = [ln for ln in done.stderr.splitlines() if ln.startswith("error: engine: ")]
    assert len(engine) == 1 and "fix: run `vllm-omni-ci sandbox up`" in engine[0]
    as_json = run_task("doctor", "--json", env=env)
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["ok"] is False
    (check,) = [c for c in report["checks"] if c["name"] == "engine"]
    assert check["ok"] is False and check["fix"]


@pytest.mark.docker
def test_doctor_needs_buildx_only_for_builder_buildx(standins: StandIns, docker_cli: str) -> None:
    """A client whose buildx is broken: fine for the engine backend, exit 1 for buildx."""
    standins.add(
        "docker",
        f"""
        if [[ "$1" == buildx ]]; then echo "buildx: broken" >&2; exit 1; fi
        exec {docker_cli} "$@"
        """,
    )
    env = {**standins.env(), "VLLM_OMNI_CI_DOCKER": str(standins.bin_dir / "docker")}
    engine = run_cli("doctor", "--builder", "engine", env=env)
    assert "error: buildx:" not in engine.stderr
    buildx = run_cli("doctor", "--builder", "buildx", env=env)
    assert buildx.returncode == 1
    assert [ln for ln in buildx.stderr.splitlines() if ln.startswith("error: buildx: ")]
