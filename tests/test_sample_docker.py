"""Every sample Dockerfile builds offline, and the ROCm deps stage does real work.

Real engine, real local registry: builds run with `--pull` against
127.0.0.1:5000 and install vllm-omni-ci from the wheelhouse with --no-index,
through the BuildKit-capable client that `doctor` picks (`picked`).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BASE_IMAGE, ROOT, SAMPLE, TEST_LABEL, run_cli

pytestmark = pytest.mark.docker

DEPS_FLOOR_BYTES = 50 * 1024 * 1024
DEPS_FLOOR_SECONDS = 20.0


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    """The sample's wheelhouse, as `vllm-omni-ci wheelhouse` writes it (network on the host)."""
    result = run_cli("wheelhouse", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = sorted((SAMPLE / "wheelhouse").glob("vllm_omni_ci-*.whl"))
    assert found
    return SAMPLE / "wheelhouse"


def build(docker_cli: str, *args: str, context: Path = SAMPLE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [docker_cli, "build", "--pull", "--progress=plain", "--label", TEST_LABEL, *args, "."],
        cwd=context,
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )


def docker(docker_cli: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([docker_cli, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def picked() -> str:
    """The client `doctor` picks for BuildKit builds, as image builds and .ci do."""
    from ci import doctor

    client = doctor.probe(engine=False).buildkit_client()
    assert client is not None, "doctor found no client that builds with BuildKit"
    return client


@pytest.fixture
def tag() -> Iterator[str]:
    yield f"omni-sample-test/image:{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize(
    ("dockerfile", "extra", "workdir"),
    [
        (
            "Dockerfile.rocm",
            ("--target", "test", "--build-arg", "ARG_PYTORCH_ROCM_ARCH=gfx942"),
            "/app/vllm-omni",
        ),
        ("Dockerfile.ci", (), "/opt/vllm-omni"),
        ("Dockerfile.npu.ci", (), "/vllm-workspace/vllm-omni"),
        (
            "Dockerfile.xpu",
            ("--build-arg", f"VLLM_BASE={BASE_IMAGE}", "--build-arg", "VLLM_VERSION=v0.30.0"),
            "/workspace/vllm-omni",
        ),
    ],
)
def test_sample_dockerfile_builds_offline_and_runs_the_cpu_tests(
    picked: str,
    docker_cleanup: None,
    wheelhouse: Path,
    tag: str,
    dockerfile: str,
    extra: tuple[str, ...],
    workdir: str,
) -> None:
    result = build(picked, "-f", f"docker/{dockerfile}", "-t", tag, *extra)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "omni_sample 0.0.1 installed" in result.stderr
    run = docker(
        picked,
        "run",
        "--rm",
        "--network",
        "none",
        "--label",
        TEST_LABEL,
        "--entrypoint",
        "bash",
        tag,
        "-c",
        "pwd && vllm-omni-ci --list >/dev/null"
        " && pytest -q -p no:cacheprovider -m 'core_model and cpu'",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.stdout.splitlines()[0] == workdir
    assert re.search(r"\d+ passed", run.stdout)


def test_rocm_deps_stage_meets_the_size_and_time_floor(
    picked: str, docker_cleanup: None, tag: str
) -> None:
    """Cold (--no-cache) deps build: RUN steps ≥ 20 s in total, ≥ 50 MB over the base."""
    started = time.monotonic()
    result = build(
        picked,
        "--no-cache",
        "-f",
        "docker/Dockerfile.rocm",
        "--target",
        "deps",
        "--build-arg",
        "ARG_PYTORCH_ROCM_ARCH=gfx942",
        "-t",
        tag,
    )
    wall = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-4000:]
    log = result.stderr
    run_steps = set(re.findall(r"^#(\d+) \[deps\s+\d+/\d+\] RUN ", log, re.MULTILINE))
    assert len(run_steps) >= 3
    durations = {
        step: float(seconds)
        for step, seconds in re.findall(r"^#(\d+) DONE ([\d.]+)s$", log, re.MULTILINE)
    }
    run_seconds = sum(durations[step] for step in run_steps)
    assert not run_steps & set(re.findall(r"^#(\d+) CACHED", log, re.MULTILINE))
    size = int(docker(picked, "image", "inspect", "-f", "{{.Size}}", tag).stdout)
    base = int(docker(picked, "image", "inspect", "-f", "{{.Size}}", BASE_IMAGE).stdout)
    print(
        f"deps stage: RUN steps {run_seconds:.1f}s (wall {wall:.1f}s),"
        f" {(size - base) / 2**20:.1f} MiB over the base"
    )
    assert run_seconds >= DEPS_FLOOR_SECONDS
    assert size - base >= DEPS_FLOOR_BYTES


def test_tools_image_dockerfile_builds_from_the_wheelhouse(
    picked: str, docker_cleanup: None, wheelhouse: Path, tag: str
) -> None:
    assert (ROOT / "wheelhouse").is_dir()
    result = build(picked, "-f", "docker/Dockerfile.tools", "-t", tag, context=ROOT)
    assert result.returncode == 0, result.stderr[-4000:]
    run = docker(picked, "run", "--rm", "--network", "none", "--label", TEST_LABEL, tag)
    assert run.returncode == 0, run.stderr
    assert "wheelhouse" in run.stdout and "build-image" in run.stdout
    leftover = docker(picked, "run", "--rm", "--label", TEST_LABEL, tag, "ls", "/tmp")
    assert "wheelhouse" not in leftover.stdout
