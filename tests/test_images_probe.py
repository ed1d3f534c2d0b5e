"""`build-image` asks its registry first, and `--timeout` ends the whole build.

The registries are local stand-ins: a TCP server that accepts connections and
never says a word (the hang), and an HTTP server that answers `/v2/`. The
docker client is a recording stand-in (buildx cannot run here), so what the
build would have run is visible, and so is what it did not run.
"""

from __future__ import annotations

import http.server
import os
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import StandIns
from tests.inproc import run_task
from tests.test_images_rocm import COMMIT, NO_BUILD_ENV, make_f2, write

PROBE_ENV = "VLLM_OMNI_CI_REGISTRY_PROBE"


@dataclass
class Silent:
    """Accepts every connection and never answers (until the test ends)."""

    port: int
    accepted: list[socket.socket] = field(default_factory=list)


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    found = Silent(server.getsockname()[1])
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            found.accepted.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield found
    done.set()
    thread.join(timeout=10)
    for conn in found.accepted:
        conn.close()
    server.close()


@dataclass
class Answering:
    port: int
    status: int
    paths: list[str] = field(default_factory=list)


@pytest.fixture(params=[200, 401], ids=["200", "401-login-wanted"])
def answering(request: pytest.FixtureRequest) -> Iterator[Answering]:
    found = Answering(0, request.param)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found.paths.append(self.path)
            self.send_response(found.status)
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield found
    server.shutdown()
    server.server_close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    found = make_f2(tmp_path / "repo")
    write(found, "docker/Dockerfile.ci", "f\n")
    return found


def docker_standin(standins: StandIns, build: str = "exit 0") -> None:
    """A `docker` with buildx whose builder exists; `build` is what `buildx build` does."""
    standins.add(
        "docker",
        f"""
        case "$1 $2" in
          "version --format") echo 99.0-standin; exit 0 ;;
          "build --help") exit 0 ;;
          "buildx version") echo "github.com/docker/buildx v0.99.0 standin"; exit 0 ;;
          "buildx build") {build} ;;
        esac
        exit 0
        """,
    )


def builds(standins: StandIns) -> list[list[str]]:
    return [a for a in standins.argvs("docker") if a[:2] == ["buildx", "build"]]


def build_image(
    standins: StandIns, repo: Path, platform: str, *args: str, probe: bool = True
) -> tuple[int, str, str]:
    env = standins.env({**os.environ, **NO_BUILD_ENV})
    env.pop("VLLM_OMNI_CI_DOCKER", None)
    if probe:
        env.pop(PROBE_ENV)
    done = run_task(
        "build-image", "--platform", platform, "--repo", str(repo), "--commit", COMMIT, *args,
        env=env, timeout=120,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


PLATFORMS = pytest.mark.parametrize("platform", ["rocm", "cuda"])


# --------------------------------------------------------------------------- the probe


@PLATFORMS
def test_a_registry_that_never_answers_stops_the_build_before_it_starts(
    standins: StandIns, repo: Path, silent: Silent, platform: str
) -> None:
    docker_standin(standins)
    host = f"127.0.0.1:{silent.port}"
    code, out, err = build_image(standins, repo, platform, "--registry", f"{host}/omni/ci")
    assert code == 1, err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        f"error: registry {host} does not answer (http://{host}/v2/: no answer within 5s); "
        "the build pushes its image and cache there, and would hang or fail: start it (the "
        "sandbox's registry: `vllm-omni-ci sandbox up`) or name another with --registry "
        f"({PROBE_ENV}=0 skips this check)"
    ]
    assert silent.accepted  # it was asked
    assert builds(standins) == [] and out == ""
    assert not [a for a in standins.argvs("docker") if a[0] in ("login", "push")]


def test_a_local_cache_is_probed_under_no_push_too(
    standins: StandIns, repo: Path, silent: Silent
) -> None:
    """dockerd's --cache-from lookup on a silent registry stalls the build: asked first."""
    docker_standin(standins)
    host = f"127.0.0.1:{silent.port}"
    env_registry = {"ROCM_CI_IMAGE_REGISTRY": f"{host}/omni/rocm"}
    env = standins.env({**os.environ, **NO_BUILD_ENV, **env_registry})
    env.pop(PROBE_ENV)
    env.pop("VLLM_OMNI_CI_DOCKER", None)
    done = run_task(
        "build-image", "--platform", "rocm", "--repo", str(repo), "--commit", COMMIT,
        "--no-push", env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert "the build reads its cache there" in line
    assert "name another with ROCM_CI_IMAGE_REGISTRY" in line
    assert builds(standins) == []


@PLATFORMS
def test_an_answering_registry_is_said_and_the_build_runs(
    standins: StandIns, repo: Path, answering: Answering, platform: str
) -> None:
    docker_standin(standins)
    host = f"127.0.0.1:{answering.port}"
    code, _, err = build_image(standins, repo, platform, "--registry", f"{host}/omni/ci")
    assert code == 0, err
    assert (
        f"registry {host} answers (http://{host}/v2/: HTTP {answering.status}); "
        "the build pushes its image and cache there"
    ) in err.splitlines()
    assert answering.paths == ["/v2/"]
    assert len(builds(standins)) == 1


def test_no_push_with_a_remote_cache_asks_no_registry(standins: StandIns, repo: Path) -> None:
    """The default rocm/vllm-omni is Docker Hub, which a --no-push build never reads."""
    docker_standin(standins)
    code, _, err = build_image(standins, repo, "rocm", "--no-push")
    assert code == 0, err
    assert (
        "registry probe: none (--no-push, and the cache ref's registry is not on this machine: "
        "the build asks no registry)"
    ) in err.splitlines()
    assert "does not answer" not in err and len(builds(standins)) == 1


@PLATFORMS
def test_dry_run_opens_no_connection_and_says_so(
    standins: StandIns, repo: Path, silent: Silent, platform: str
) -> None:
    docker_standin(standins)
    host = f"127.0.0.1:{silent.port}"
    code, out, err = build_image(
        standins, repo, platform, "--registry", f"{host}/omni/ci", "--dry-run"
    )
    assert code == 0, err
    assert (
        f"# note: registry probe: a run first asks http://{host}/v2/ (5s) and stops if it does "
        "not answer; --dry-run opens no connection\n"
    ) in out
    assert silent.accepted == []
    _, local, _ = build_image(standins, repo, platform, "--no-push", "--dry-run")
    assert (
        "# note: registry probe: none (--no-push, and the cache ref's registry is not on this "
        "machine)\n"
    ) in local


def test_the_knob_skips_the_probe(standins: StandIns, repo: Path, silent: Silent) -> None:
    docker_standin(standins)
    host = f"127.0.0.1:{silent.port}"
    code, _, err = build_image(
        standins, repo, "rocm", "--registry", f"{host}/omni/rocm", probe=False
    )
    assert code == 0, err
    assert f"registry probe: skipped ({PROBE_ENV}=0)" in err
    assert silent.accepted == [] and len(builds(standins)) == 1


# --------------------------------------------------------------------------- --timeout


@PLATFORMS
def test_timeout_ends_the_whole_build_process_tree(
    standins: StandIns, repo: Path, tmp_path: Path, platform: str
) -> None:
    pid_file = tmp_path / "sleeper.pid"
    docker_standin(standins, build=f"sleep 300 & echo $! > {pid_file}; wait")
    code, _, err = build_image(
        standins, repo, platform, "--registry", "127.0.0.1:9/omni/ci", "--timeout", "2s",
        probe=False,
    )  # fmt: skip
    assert code in (124, 137), err
    last = err.splitlines()[-1]
    assert re.fullmatch(
        r"error: build-image --timeout 2s: the time ran out during `build and push "
        rf"127\.0\.0\.1:9/omni/ci:{COMMIT}`; its process tree was ended \(exit {code}\)",
        last,
    ), last
    sleeper = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # the build's child went with it
        os.kill(sleeper, 0)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("5x", "--timeout: '5x' is not a duration (examples: 90s, 80m, 1h30m)"),
        ("0", "--timeout: '0' must be longer than 0"),
    ],
)
def test_a_bad_timeout_is_one_error_line(
    standins: StandIns, repo: Path, value: str, problem: str
) -> None:
    docker_standin(standins)
    code, out, err = build_image(standins, repo, "rocm", "--timeout", value, probe=False)
    assert (code, out, err) == (2, "", f"error: {problem}\n")
    assert standins.calls() == []
