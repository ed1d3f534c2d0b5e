"""Shared fixtures: the Docker engine gate, recording stand-ins, and the CLI runner.

Docker-marked tests skip with a reason when no engine answers, except under
CI=true, where they fail: CI promised an engine, so its absence is a defect.
Everything a test creates in Docker carries TEST_LABEL, and fixtures remove it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SAMPLE = ROOT / "examples" / "omni-sample"
REGISTRY = "127.0.0.1:5000"
BASE_IMAGE = f"{REGISTRY}/omni-ci/python-base:bookworm"
TEST_LABEL_KEY = "vllm-omni-ci.test"
TEST_LABEL = f"{TEST_LABEL_KEY}=1"


@cache
def engine_client() -> str | None:
    """A docker client whose engine answers, preferring one that builds with BuildKit."""
    from ci import doctor

    for path in doctor.docker_clients():
        probe = subprocess.run(
            [path, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if probe.returncode == 0 and probe.stdout.strip():
            build = subprocess.run(
                [path, "build", "--help"],
                capture_output=True,
                env={**os.environ, "DOCKER_BUILDKIT": "1"},
                timeout=20,
            )
            if build.returncode == 0:
                return path
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is None:
        return
    if engine_client() is None:
        message = "no Docker engine answers (start dockerd, as .ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {message}")
        pytest.skip(message)


@pytest.fixture
def docker_cli() -> str:
    client = engine_client()
    assert client is not None
    return client


@pytest.fixture
def docker_cleanup(docker_cli: str) -> Iterator[None]:
    """Remove the containers and images carrying TEST_LABEL that this test created.

    Only what appeared during the test goes: another test (or another checkout's
    test run on the same engine) may own the rest.
    """

    def labelled(kind: str) -> set[str]:
        listing = (
            [docker_cli, "ps", "-aq"] if kind == "containers" else [docker_cli, "images", "-q"]
        )
        found = subprocess.run(
            [*listing, "--no-trunc", "--filter", f"label={TEST_LABEL_KEY}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        return set(found)

    before = {"containers": labelled("containers"), "images": labelled("images")}
    yield
    containers = labelled("containers") - before["containers"]
    if containers:
        subprocess.run([docker_cli, "rm", "-f", *sorted(containers)], capture_output=True)
    images = labelled("images") - before["images"]
    if images:
        subprocess.run([docker_cli, "rmi", "-f", *sorted(images)], capture_output=True)


# --------------------------------------------------------------------------- stand-ins


@dataclass
class StandIns:
    """Recording stand-ins for programs that cannot run here (buildx, buildctl, agent...).

    Each stand-in appends its argv (and selected env) as one JSON line to a log,
    then runs an optional bash snippet that decides its output and exit code.
    """

    bin_dir: Path
    log: Path

    def add(self, name: str, script: str = "exit 0", *, env_keys: tuple[str, ...] = ()) -> Path:
        path = self.bin_dir / name
        keys = json.dumps(list(env_keys))
        path.write_text(
            "#!/usr/bin/env bash\n"
            f'{shlex.quote(sys.executable)} - "$0" "$@" <<\'PY\'\n'
            "import json, os, sys\n"
            f"keys = {keys}\n"
            "entry = {'name': os.path.basename(sys.argv[1]), 'argv': sys.argv[2:],\n"
            "         'env': {k: os.environ.get(k) for k in keys}, 'cwd': os.getcwd()}\n"
            f"with open({str(self.log)!r}, 'a') as fh:\n"
            "    fh.write(json.dumps(entry) + '\\n')\n"
            "PY\n" + textwrap.dedent(script) + "\n"
        )
        path.chmod(0o755)
        return path

    def calls(self, name: str | None = None) -> list[dict[str, object]]:
        if not self.log.exists():
            return []
        entries = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [e for e in entries if name is None or e["name"] == name]

    def argvs(self, name: str) -> list[list[str]]:
        return [list(c["argv"]) for c in self.calls(name)]  # type: ignore[call-overload]

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment with the stand-ins first on PATH."""
        source = dict(os.environ if base is None else base)
        source["PATH"] = f"{self.bin_dir}{os.pathsep}{source.get('PATH', '')}"
        return source


@pytest.fixture
def standins(tmp_path: Path) -> StandIns:
    bin_dir = tmp_path / "standin-bin"
    bin_dir.mkdir()
    return StandIns(bin_dir, tmp_path / "standin-calls.jsonl")


# --------------------------------------------------------------------------- CLI


def cli_path() -> str:
    found = shutil.which("vllm-omni-ci") or str(Path(sys.executable).parent / "vllm-omni-ci")
    return found


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = 300,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `vllm-omni-ci ARGS` as a user would, capturing both streams."""
    return subprocess.run(
        [cli_path(), *args],
        env=dict(os.environ if env is None else env),
        cwd=str(cwd or ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )


def sample_with_wheelhouse(parent: Path) -> Path:
    """A copy of the sample under `parent`, with the wheelhouse its Dockerfiles install from.

    The sample's own wheelhouse is reused when `vllm-omni-ci wheelhouse` has
    filled it (.ci/run does, before the tests): downloading ~35 wheels again
    costs ~20 s and tests nothing. Without one, a fresh one is built.
    """
    repo = parent / "omni-sample"
    shutil.copytree(SAMPLE, repo, symlinks=True)
    if not list((repo / "wheelhouse").glob("vllm_omni_ci-*.whl")):
        shutil.rmtree(repo / "wheelhouse", ignore_errors=True)
        done = run_cli("wheelhouse", "--dest", str(repo / "wheelhouse"), timeout=900)
        assert done.returncode == 0, done.stderr[-4000:]
    return repo


@pytest.fixture
def cli() -> object:
    return run_cli
