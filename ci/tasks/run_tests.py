"""`run-tests`: a job's test commands on its platform (ci.runner)."""

from __future__ import annotations

from collections.abc import Sequence

from ci.taskdef import task


@task(
    replaces=("run-amd-test.sh", "run_npu_test.sh", "run-xpu-test.sh (test run)"),
    help={
        "platform": "rocm (amd), npu or xpu (intel) (required)",
        "dry_run": "print the rendered bash program and run nothing",
        "timeout": "xpu: kill the test container after this long, exit 124 (default 30m)",
        "prune": "xpu: also `docker system prune -f` after the run (shared hosts: off)",
    },
)
def run_tests(
    platform: str = "",
    dry_run: bool = False,
    timeout: str = "",
    prune: bool = False,
    words: Sequence[str] = (),
) -> None:
    """Run the job's commands: $TEST_COMMANDS, else the words after `--` joined by spaces.

    rocm (replaces run-amd-test.sh): defaults PYTHONFAULTHANDLER=1,
    HF_HOME=/home/buildkite-agent/huggingface, HF_HUB_DOWNLOAD_TIMEOUT=300,
    HF_HUB_ETAG_TIMEOUT=60, MIOPEN_DEBUG_CONV_DIRECT=0, MIOPEN_DEBUG_CONV_GEMM=0,
    VLLM_ROCM_USE_AITER=0, PYTHONPATH=.. (each only when unset or empty).
    Always overwritten: PYTORCH_ROCM_ARCH (forced empty), TMPDIR,
    TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, VLLM_CACHE_ROOT, XDG_CACHE_HOME,
    HF_DATASETS_CACHE (per-job dirs under /tmp/vllm-omni-native-<job id>).
    Pre-flight (exit 1): VLLM_CI_DOCKER_DISABLED=1 required; a non-negative
    integer VLLM_CI_EXPECTED_GPU_COUNT (checked before any folder is made); HF
    cache mount when VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE=1; rocminfo and torch
    with exactly VLLM_CI_EXPECTED_GPU_COUNT GPUs (0 = no-GPU pre-flight, skips both).
    Every command runs; the first failure is kept (a real one replaces 5), also
    past `exit N` and `set -e`; VLLM_CI_ALLOW_NO_TESTS=1 turns a final 5 into 0.
    npu: VLLM_WORKER_MULTIPROC_METHOD=spawn default; stops at the first failure.
    xpu (replaces run-xpu-test.sh): docker run of xpu/vllm-omni-ci:$BUILDKITE_COMMIT
    with the checkout's test list, .buildkite/intel/xpu-tests.txt (one shell
    command per line; missing: the built-in list of ci/runner/xpu.py, with a
    note; empty or unreadable: exit 1), stopping at the first failure;
    HF_CACHE (default ~/.cache/huggingface) mounted; VLLM_LOGGING_LEVEL,
    VLLM_OMNI_LOGGING_LEVEL, HF_TOKEN, ZE_AFFINITY_MASK passed by name; /dev/dri
    only when present; container and image removed on every exit.
    Exit: the commands' status; a command killed by signal N gives 128+N (SIGABRT
    134); SIGTERM, SIGINT, SIGHUP or SIGQUIT to run-tests end every descendant, then
    exit 143, 130, 129 or 131 (a second signal KILLs at once); --timeout 124.
    rocm/npu: what the job leaves running when it ends is ended (TERM, KILL after
    5s) and listed on stderr; the status is kept.
    """
    from ci.runner.native import run_tests as dispatch

    dispatch(platform, words, timeout=timeout, prune=prune, dry_run=dry_run)
