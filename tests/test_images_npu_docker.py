"""NPU variants against the sample's real `docker/Dockerfile.npu.ci`, on the real engine.

buildctl and the remote buildkitd cannot run here, so the planner tests check
buildctl's argv with a stand-in. What a stand-in cannot show is that a
variant row's build args make the Dockerfile pick that variant's base
(`<VLLM_ASCEND_IMAGE>:<VLLM_ASCEND_VERSION><VLLM_ASCEND_DEVICE_SUFFIX>`). Here each
suffixed variant (a2, no suffix, is built by test_sample_docker.py) builds the
sample with exactly the build args its row gives buildctl, over bases that
this test tags `bookworm-a3`, `bookworm-a5`, `bookworm-310p` in a repository of
its own, each labelled with the variant it stands for.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci.images import npu, variants
from ci.images.options import BuildOptions
from ci.platforms import Platform
from tests.conftest import BASE_IMAGE, TEST_LABEL, sample_with_wheelhouse

pytestmark = pytest.mark.docker

VARIANT_LABEL = "vllm-omni-ci.npu-variant"


@pytest.fixture(scope="module")
def sample_repo(tmp_path_factory: pytest.TempPathFactory, session_wheelhouse: Path) -> Path:
    """The sample with the session's wheelhouse (its Dockerfile installs from one), in a tmp dir."""
    return sample_with_wheelhouse(tmp_path_factory.mktemp("npu-sample"), session_wheelhouse)


@pytest.fixture
def base_repo(docker_cli: str) -> Iterator[str]:
    """A repository name of this test's own for the variant bases (removed afterwards)."""
    name = f"omni-ci-test/npu-base-{uuid.uuid4().hex[:10]}"
    yield name
    tags = subprocess.run(
        [docker_cli, "images", "--format", "{{.Repository}}:{{.Tag}}", name],
        capture_output=True,
        text=True,
    ).stdout.split()
    if tags:
        subprocess.run([docker_cli, "rmi", "-f", *tags], capture_output=True)


def docker_build(docker_cli: str, *args: str, stdin: str | None = None, cwd: Path | None = None):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [docker_cli, "build", "--progress=plain", "--label", TEST_LABEL, *args],
        input=stdin,
        cwd=cwd,
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.parametrize("name", ["a3", "a5", "310p"])
def test_variant_build_args_pick_the_variants_base(
    docker_cli: str, docker_cleanup: None, sample_repo: Path, base_repo: str, name: str
) -> None:
    row = variants.variant(name)
    # The base this variant's image must come from, told apart by a label.
    base = f"{base_repo}:bookworm{row.suffix}"
    made = docker_build(
        docker_cli, "-t", base, "-",
        stdin=f"FROM {BASE_IMAGE}\nLABEL {VARIANT_LABEL}={name}\n",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    # A decoy for the variant without a suffix: picking it would be the drift the table prevents.
    decoy = docker_build(
        docker_cli, "-t", f"{base_repo}:bookworm", "-",
        stdin=f"FROM {BASE_IMAGE}\nLABEL {VARIANT_LABEL}=a2\n",
    )  # fmt: skip
    assert decoy.returncode == 0, decoy.stderr[-3000:]

    # The build args the planner gives buildctl for this variant, as docker build args.
    job = npu.resolve(
        BuildOptions(platform=Platform.NPU, repo=str(sample_repo), commit="c0ffee", variant=name),
        env={},
    )
    argv = npu.buildctl_argv(job)
    build_args = [a.removeprefix("build-arg:") for a in argv if a.startswith("build-arg:")]
    assert build_args == [f"VLLM_ASCEND_DEVICE_SUFFIX={row.suffix}"]
    assert f"filename={job.dockerfile}" in argv and job.dockerfile == "Dockerfile.npu.ci"

    tag = f"{base_repo}:image-{job.tag}"
    built = docker_build(
        docker_cli,
        "-f", f"docker/{job.dockerfile}",
        "--build-arg", f"VLLM_ASCEND_IMAGE={base_repo}",
        *(x for arg in build_args for x in ("--build-arg", arg)),
        "-t", tag, ".",
        cwd=sample_repo,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-4000:]
    assert f"FROM docker.io/{base}" in built.stderr or f"FROM {base}" in built.stderr
    inspect = subprocess.run(
        [docker_cli, "image", "inspect", "--format", "{{json .Config}}", tag],
        capture_output=True,
        text=True,
        check=True,
    )
    config = json.loads(inspect.stdout)
    assert config["Labels"][VARIANT_LABEL] == name
    assert "VLLM_TARGET_DEVICE=npu" in config["Env"]
    assert config["WorkingDir"] == "/vllm-workspace/vllm-omni"
