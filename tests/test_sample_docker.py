"""Every sample Dockerfile builds offline, and the ROCm deps stage does real work.

Real engine, real local registry: builds run with `--pull` against
127.0.0.1:5000 and install vllm-omni-ci from the session's wheelhouse
(`session_wheelhouse`) with --no-index, through the BuildKit-capable client
that `doctor` picks (`picked`). Builds run in copies, never in the checkout.
How long the deps stage takes is benchmarks/rocm_cache.py's concern, not a test's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import (
    BASE_IMAGE,
    ROOT,
    SAMPLE,
    TEST_LABEL,
    copy_wheelhouse,
    sample_with_wheelhouse,
)

pytestmark = pytest.mark.docker

DEPS_FLOOR_BYTES = 50 * 1024 * 1024


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory, session_wheelhouse: Path) -> Path:
    """A copy of the sample with the session's wheelhouse (its Dockerfiles install from it)."""
    return sample_with_wheelhouse(tmp_path_factory.mktemp("sample-docker"), session_wheelhouse)


@pytest.fixture(scope="module")
def tools_context(tmp_path_factory: pytest.TempPathFactory, session_wheelhouse: Path) -> Path:
    """The tools image's build context as in the checkout: its Dockerfile and ./wheelhouse."""
    context = tmp_path_factory.mktemp("tools-context")
    (context / "docker").mkdir()
    for name in ("Dockerfile.tools", "Dockerfile.tools.dockerignore"):
        shutil.copy2(ROOT / "docker" / name, context / "docker" / name)
    copy_wheelhouse(session_wheelhouse, context / "wheelhouse")
    return context


def build(docker_cli: str, *args: str, context: Path) -> subprocess.CompletedProcess[str]:
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
    sample: Path,
    tag: str,
    dockerfile: str,
    extra: tuple[str, ...],
    workdir: str,
) -> None:
    result = build(picked, "-f", f"docker/{dockerfile}", "-t", tag, *extra, context=sample)
    assert result.returncode == 0, result.stderr[-4000:]
    # Checked in the image, not in the build log: an identical earlier build of the
    # sample (another test's) makes the install step CACHED, and then it prints nothing.
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
        " && python3 -c 'import omni_sample; print(\"omni_sample\", omni_sample.__version__)'"
        " && pytest -q -p no:cacheprovider -m 'core_model and cpu'",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.stdout.splitlines()[0] == workdir
    assert run.stdout.splitlines()[1] == "omni_sample 0.0.1"
    assert re.search(r"\d+ passed", run.stdout)


def test_rocm_deps_stage_does_real_work_and_meets_the_size_floor(
    picked: str, docker_cleanup: None, tag: str
) -> None:
    """Cold (--no-cache) deps build: every RUN step runs (none cached), ≥ 50 MB over the base.

    The deps stage reads only cache-key inputs, so it builds from the checkout's sample.
    """
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
        context=SAMPLE,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    log = result.stderr
    run_steps = set(re.findall(r"^#(\d+) \[deps\s+\d+/\d+\] RUN ", log, re.MULTILINE))
    assert len(run_steps) >= 3
    assert run_steps <= set(re.findall(r"^#(\d+) DONE ", log, re.MULTILINE))
    assert not run_steps & set(re.findall(r"^#(\d+) CACHED", log, re.MULTILINE))
    assert "weights: ['shard-0.bin', 'shard-1.bin', 'shard-2.bin']" in log
    size = int(docker(picked, "image", "inspect", "-f", "{{.Size}}", tag).stdout)
    base = int(docker(picked, "image", "inspect", "-f", "{{.Size}}", BASE_IMAGE).stdout)
    assert size - base >= DEPS_FLOOR_BYTES


def test_tools_image_dockerfile_builds_from_the_wheelhouse(
    picked: str, docker_cleanup: None, tools_context: Path, tag: str
) -> None:
    result = build(picked, "-f", "docker/Dockerfile.tools", "-t", tag, context=tools_context)
    assert result.returncode == 0, result.stderr[-4000:]
    run = docker(picked, "run", "--rm", "--network", "none", "--label", TEST_LABEL, tag)
    assert run.returncode == 0, run.stderr
    assert "wheelhouse" in run.stdout and "build-image" in run.stdout
    leftover = docker(picked, "run", "--rm", "--label", TEST_LABEL, tag, "ls", "/tmp")
    assert "wheelhouse" not in leftover.stdout
