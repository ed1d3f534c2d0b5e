"""`build-image`: the CI image of one platform (ci.images)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    replaces=(
        "amd/scripts/build-ci-image.sh",
        "cuda/scripts/build-ci-image.sh",
        "build-npu-image.sh",
        "run-xpu-test.sh (image build)",
    ),
    help={
        "platform": "rocm (amd), cuda, npu or xpu (intel)",
        "commit": "image tag commit (default: $BUILDKITE_COMMIT, else git HEAD outside Buildkite)",
        "dry_run": "print the plan (key, refs, every command) and run nothing; needs no engine"
        " and no buildctl (rocm/cuda/xpu only probe, read-only, what the run would pick)",
        "no_push": "build locally, push nothing (buildx --load, no cache export, no --pull, a"
        " cache ref only from a registry on this machine; npu: push=false)",
        "docker": "rocm/cuda/xpu: docker client to use (default: $VLLM_OMNI_CI_DOCKER, else auto)",
        "timeout": "end the whole build after this long (e.g. 45m, 1h30m): TERM, then KILL to"
        " its process tree; exit 124, or 137 when KILL was needed (default: no limit)",
        "registry": "image repository: rocm $ROCM_CI_IMAGE_REGISTRY else rocm/vllm-omni; cuda"
        " public.ecr.aws/q9t5s3a7/vllm-ci-test-repo; npu $IMAGE_REGISTRY else"
        " swr.cn-southwest-2.myhuaweicloud.com/modelfoundry",
        "arch": "rocm: PYTORCH_ROCM_ARCH (default: $PYTORCH_ROCM_ARCH, else gfx942)",
        "builder": "rocm/cuda: auto (buildx if `docker buildx` works, else engine), buildx, or"
        " engine (DOCKER_BUILDKIT=1 docker build; inline cache, mode=min)",
        "buildx_builder": "rocm/cuda: an existing buildx builder instead of the platform's own"
        " (default: $VLLM_OMNI_CI_BUILDX_BUILDER), e.g. `default`, the engine's own",
        "variant": "npu: a2 (default), a3, a5 or 310p",
        "tag": "npu: override the variant's tag",
        "dockerfile": "npu: override the variant's Dockerfile",
        "tls_dir": "npu: dir of buildkitd ca.pem, cert.pem, key.pem (/home/user/.docker)",
        "docker_config": "npu: docker config.json, a build secret (/home/user/.docker/config.json)",
        "install_buildctl": "npu: download buildctl when missing (says what and where); "
        "also VLLM_OMNI_CI_INSTALL_BUILDCTL=1",
        "upstream_repo": "xpu: upstream vLLM XPU image repository (default vllm/vllm-openai-xpu)",
        "vllm_version": "xpu: vLLM version (default: $VLLM_VERSION; required)",
    },
)
def build_image(
    platform: str,
    repo: str = "",
    commit: str = "",
    dry_run: bool = False,
    no_push: bool = False,
    docker: str = "",
    timeout: str = "",
    registry: str = "",
    arch: str = "",
    builder: str = "auto",
    buildx_builder: str = "",
    variant: str = "",
    tag: str = "",
    dockerfile: str = "",
    tls_dir: str = "",
    docker_config: str = "",
    install_buildctl: bool = False,
    upstream_repo: str = "",
    vllm_version: str = "",
) -> None:
    """Build (and push) the platform's CI image, as the platform's old build script did.

    rocm: .buildkite/amd/scripts/build-ci-image.sh (registry-keyed BuildKit cache);
    cuda: .buildkite/cuda/scripts/build-ci-image.sh (ECR login, same backends);
    npu: .buildkite/npu/scripts/build-npu-image.sh (buildctl, remote buildkitd);
    xpu: the base resolution and image build of run-xpu-test.sh (local image).
    Input errors exit 2, one `error:` line each, before any command runs.
    """
    options = {name: value for name, value in locals().items() if name != "no_push"}
    from ci.images.dispatch import build
    from ci.images.options import BuildOptions
    from ci.platforms import platform_option

    build(BuildOptions(**{**options, "platform": platform_option(platform), "push": not no_push}))
