"""`build-image` across platforms: options that do not apply, help text, and the dry-run
on a machine with no engine and no buildctl (issues 4, 5, 6 "done when").

The no-engine runs strip PATH to git and the Python running the CLI (no docker,
no buildctl, no aws) and point DOCKER_HOST at a socket nobody listens on.
The expected command lines are written out from the old scripts (spec
image-builds.md §1.3, §2.3, §3.4, §4.1), not derived from our planners.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from ci.images.cachekey import cuda_key, rocm_key
from tests.conftest import SAMPLE, StandIns
from tests.inproc import run_task

COMMIT = "0123456789abcdef0123456789abcdef01234567"
SWR = "swr.cn-southwest-2.myhuaweicloud.com/modelfoundry/vllm-omni-ci-npu"
NPU_TLS = (
    "--addr=tcp://buildkitd-service.buildkitd:1234 --tlscacert=/home/user/.docker/ca.pem"
    " --tlscert=/home/user/.docker/cert.pem --tlskey=/home/user/.docker/key.pem build"
    " --frontend dockerfile.v0 --local context=. --local dockerfile=./docker"
    " --opt filename=Dockerfile.npu.ci"
)


@pytest.fixture
def no_engine(tmp_path: Path) -> dict[str, str]:
    """An environment with git and Python only, and a DOCKER_HOST that answers nothing."""
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("git", "bash", "env"):
        found = shutil.which(tool)
        assert found
        (bare / tool).symlink_to(found)
    path = f"{bare}{os.pathsep}{Path(sys.executable).parent}"
    for tool in ("docker", "buildctl"):
        assert shutil.which(tool, path=path) is None, f"{tool} must not be on the stripped PATH"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BUILDKITE", "DOCKER_", "VLLM_", "ROCM_", "PYTORCH_", "IMAGE_"))
    }
    env.update(PATH=path, DOCKER_HOST=f"unix://{tmp_path}/nobody-listens.sock")
    return env


def dry_run(env: dict[str, str], *args: str) -> str:
    done = run_task(
        "build-image", "--repo", str(SAMPLE), "--commit", COMMIT, "--dry-run", *args, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.startswith("# plan: ")
    return done.stdout


def test_rocm_and_cuda_dry_run_without_engine(no_engine: dict[str, str]) -> None:
    key = rocm_key(SAMPLE, "gfx942").key
    cache = f"rocm/vllm-omni:rocm-deps-cache-{key}"
    out = dry_run(no_engine, "--platform", "rocm")
    assert (
        "docker buildx build --builder vllm-omni-rocm-builder --push --pull --progress=plain"
        " --target test --build-arg ARG_PYTORCH_ROCM_ARCH=gfx942"
        f" --cache-from type=registry,ref={cache}"
        f" --cache-to type=registry,ref={cache},mode=max,compression=zstd,ignore-error=true"
        f" --file docker/Dockerfile.rocm --tag rocm/vllm-omni:{COMMIT} ."
    ) in out
    key = cuda_key(SAMPLE).key
    repo = "public.ecr.aws/q9t5s3a7/vllm-ci-test-repo"
    out = dry_run(no_engine, "--platform", "cuda")
    assert "aws ecr-public get-login-password --region us-east-1" in out
    (login,) = [ln for ln in out.splitlines() if "docker login" in ln]
    assert "docker login --username AWS --password-stdin public.ecr.aws/q9t5s3a7" in login
    assert "stdin" in login and "secret" in login  # the password is never shown
    assert (
        "docker buildx build --builder vllm-omni-builder --push --progress=plain"
        f" --cache-from type=registry,ref={repo}:deps-cache-{key}"
        f" --cache-to type=registry,ref={repo}:deps-cache-{key},mode=max,compression=zstd"
        f" --file docker/Dockerfile.ci -t {repo}:{COMMIT} ."
    ) in out


@pytest.mark.parametrize(
    ("variant", "suffix"), [("a2", ""), ("a3", "-a3"), ("a5", "-a5"), ("310p", "-310p")]
)
def test_npu_dry_run_without_engine_or_buildctl(
    no_engine: dict[str, str], variant: str, suffix: str
) -> None:
    out = dry_run(no_engine, "--platform", "npu", "--variant", variant)
    device = f" --opt build-arg:VLLM_ASCEND_DEVICE_SUFFIX={suffix}" if suffix else ""
    assert (
        f"DOCKER_CONFIG=/home/user/.docker buildctl {NPU_TLS}{device}"
        " --secret id=dockerconfig,src=/home/user/.docker/config.json"
        f" --output type=image,name={SWR}:{COMMIT}{suffix},push=true --progress=plain"
    ) in out
    assert "VLLM_ASCEND_DEVICE_SUFFIX" not in out or suffix
    assert "# buildctl: not on PATH: a real run stops (pass --install-buildctl)" in out


def test_xpu_dry_run_without_engine_prints_the_ordered_fallbacks(
    no_engine: dict[str, str],
) -> None:
    out = dry_run(no_engine, "--platform", "xpu", "--vllm-version", "v0.30.0")
    assert "(no engine answered: ordered fallbacks)" in out
    export = "compression=zstd,compression-level=3,force-compression=true"
    expected = [
        "docker pull vllm/vllm-openai-xpu:v0.30.0",
        "git clone --depth 1 --branch v0.30.0 -- https://github.com/vllm-project/vllm '<tmp>/vllm'",
        "DOCKER_BUILDKIT=1 docker build"
        f" --output type=image,name=xpu/vllm-omni-ci-base:v0.30.0,{export}"
        " --target vllm-openai -f '<tmp>/vllm/docker/Dockerfile.xpu' '<tmp>/vllm'",
        "DOCKER_BUILDKIT=1 docker build"
        f" --output type=image,name=xpu/vllm-omni-ci:{COMMIT},{export}"
        " --build-arg VLLM_BASE=vllm/vllm-openai-xpu:v0.30.0 --build-arg VLLM_VERSION=v0.30.0"
        " -f docker/Dockerfile.xpu .",
    ]
    commands = [line for line in out.splitlines() if line.startswith("   ")]
    assert len(commands) == len(expected)
    for line, command in zip(commands, expected, strict=True):
        assert command in line
    assert str(SAMPLE) in commands[-1]  # the CI image builds in the checkout
    assert "# export: " in out
    assert "Connection aborted" not in out and "FileNotFoundError" not in out


# --------------------------------------------------------------------------- misplaced options


@pytest.mark.parametrize(
    ("platform", "args", "errors"),
    [
        (
            "rocm",
            ("--variant", "a3", "--vllm-version", "v1", "--install-buildctl"),
            [
                "--variant: applies to --platform npu only",
                "--install-buildctl: applies to --platform npu only",
                "--vllm-version: applies to --platform xpu only",
            ],
        ),
        ("cuda", ("--arch", "gfx942"), ["--arch: applies to --platform rocm only"]),
        (
            "npu",
            ("--arch", "gfx942", "--builder", "engine", "--docker", "/usr/bin/docker"),
            [
                "--docker: applies to --platform rocm or cuda or xpu only",
                "--arch: applies to --platform rocm only",
                "--builder: applies to --platform rocm or cuda only",
            ],
        ),
        (
            "xpu",
            ("--vllm-version", "v1", "--registry", "r/x", "--tag", "t", "--tls-dir", "/t"),
            [
                "--registry: applies to --platform rocm or cuda or npu only",
                "--tag: applies to --platform npu only",
                "--tls-dir: applies to --platform npu only",
            ],
        ),
    ],
)
def test_an_option_of_another_platform_is_an_input_error(
    standins: StandIns, platform: str, args: tuple[str, ...], errors: list[str]
) -> None:
    """Fail closed: an option the platform does not use is never silently ignored."""
    for tool in ("docker", "buildctl", "git", "aws"):
        standins.add(tool, "exit 99")
    done = run_task(
        "build-image", "--platform", platform, "--repo", str(SAMPLE), "--commit", COMMIT,
        *args, env=standins.env(),
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [f"error: {e}" for e in errors]
    assert standins.calls() == []


def test_every_problem_of_an_npu_build_at_once(standins: StandIns) -> None:
    standins.add("buildctl", "exit 99")
    done = run_task(
        "build-image", "--platform", "npu", "--repo", str(SAMPLE), "--variant", "a9",
        "--tag", "bad tag", "--arch", "x", "--dry-run", env=standins.env(),
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        "error: --arch: applies to --platform rocm only",
        "error: --variant: unknown NPU variant 'a9': allowed values are a2, a3, a5, 310p",
        "error: --tag: 'bad tag' is not an image tag ([A-Za-z0-9_][A-Za-z0-9_.-], max 128)",
    ]


def test_every_problem_of_an_xpu_build_at_once(standins: StandIns, tmp_path: Path) -> None:
    standins.add("docker", "exit 99")
    env = {k: v for k, v in standins.env().items() if k not in ("VLLM_VERSION", "BUILDKITE")}
    done = run_task(
        "build-image", "--platform", "xpu", "--repo", str(tmp_path), "--commit", "-bad",
        "--upstream-repo", "Bad Repo", "--arch", "x", env=env,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        "error: --arch: applies to --platform rocm only",
        "error: VLLM_VERSION must be set",
        f"error: --repo: {tmp_path}/docker/Dockerfile.xpu does not exist",
        "error: --commit: '-bad' is not a valid image tag "
        "(allowed: letters, digits, '_', '.', '-'; not starting with '.' or '-'; at most 128)",
        "error: --upstream-repo: 'Bad Repo' is not a valid image repository "
        "(expected [host[:port]/]path, lowercase path components, no tag or digest)",
    ]
    assert standins.calls() == []


# --------------------------------------------------------------------------- help


@pytest.mark.parametrize(
    ("task", "options"),
    [
        (
            "build-image",
            [
                "platform", "repo", "commit", "dry-run", "no-push", "docker", "timeout", "registry",
                "arch",
                "builder", "variant", "tag", "dockerfile", "tls-dir", "docker-config",
                "install-buildctl", "upstream-repo", "vllm-version",
            ],
        ),
        ("release.publish-images", ["mode", "commit", "release-version", "dry-run"]),
        ("release.cleanup-nightly", ["hub-url", "keep", "delete-interval", "dry-run"]),
    ],
)  # fmt: skip
def test_every_option_has_help_text(task: str, options: list[str]) -> None:
    text = run_task(task, "--help").stdout
    lines = text.splitlines()
    for option in options:
        (line,) = [ln for ln in lines if re.match(rf"\s*(-\w( [A-Z]+)?, )?--{option}(=|\s|$)", ln)]
        flag = line.split()[0]
        assert line.strip() != flag, f"--{option} has no help text:\n{text}"
    assert "--=" not in text  # no short flag made of a dash


@pytest.mark.parametrize(
    ("platform", "extra"),
    [("rocm", ()), ("cuda", ()), ("npu", ("--variant", "a5")), ("xpu", ("--vllm-version", "v1"))],
)
def test_a_repo_that_is_not_a_directory_is_one_error_line(
    standins: StandIns, tmp_path: Path, platform: str, extra: tuple[str, ...]
) -> None:
    for tool in ("docker", "buildctl", "git"):
        standins.add(tool, "exit 99")
    missing = tmp_path / "no-checkout"
    done = run_task(
        "build-image", "--platform", platform, "--repo", str(missing), "--commit", COMMIT,
        *extra, env=standins.env(),
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"error: --repo: {missing} is not a directory\n"
    assert standins.calls() == []
