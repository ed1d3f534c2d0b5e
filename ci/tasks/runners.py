"""`run-tests`: a job's test commands on its platform; `step`: one wrapped test command;
`cov-split`: per-mode coverage runs of one model's tests (was run_cov_split.sh); `tier NAME`:
the nox tier sessions' runner, for places without nox (CI pods)."""

from __future__ import annotations

from collections.abc import Sequence

from ci.taskdef import task


@task(
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
    with the XPU command table (ci/runner/xpu.py), stopping at the first
    failure; HF_CACHE (default ~/.cache/huggingface) mounted; VLLM_LOGGING_LEVEL,
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


@task(
    help={
        "timeout": "end the command after this long (e.g. 80m): TERM, then KILL; exit 124/137",
        "kill_after": "grace between TERM and KILL (default 2m)",
        "shard": "i/n (0-based i) appends --num-shards=n --shard-id=i; 'auto' reads "
        "BUILDKITE_PARALLEL_JOB / BUILDKITE_PARALLEL_JOB_COUNT, the default for a pytest "
        "command in a parallel step unless it already has --num-shards/--shard-id; "
        "'none' never shards",
        "shard_list": "a,b,c: append the shard's entry instead (index from --shard or "
        "BUILDKITE_PARALLEL_JOB)",
        "artifact_dir": "directory the command writes, inside the working directory; its text "
        "files are masked, then copied under $BUILDKITE_BUILD_CHECKOUT_PATH when the working "
        "directory differs, even on failure",
        "junit": "append --junitxml=FILE to the command",
        "summary_tail": "keep the output in ARTIFACT_DIR/pytest.log and its last N lines in "
        "ARTIFACT_DIR/pytest-summary.txt",
        "leak_check": "fail (exit 1) if the command leaves processes behind, and list them "
        "('leak check: …' lines on stderr; the original's lines in "
        "ARTIFACT_DIR/process-cleanup.txt)",
        "leak_scope": "tree (our descendants, default) or all (every visible process)",
        "leak_settle": "how long leftovers may take to exit before they count (default 5s)",
    },
)
def step(
    timeout: str = "",
    kill_after: str = "2m",
    shard: str = "",
    shard_list: str = "",
    artifact_dir: str = "",
    junit: str = "",
    summary_tail: int = 0,
    leak_check: bool = False,
    leak_scope: str = "tree",
    leak_settle: str = "5s",
    dry_run: bool = False,
    words: Sequence[str] = (),
) -> None:
    """Run `-- COMMAND...` with timeout, shard, artifacts and leak check; pass its exit code.

    Replaces the test YAMLs' inline idioms: `timeout … bash -c`, the shard
    arguments, artifact copies, `tee` + `tail` summaries and the ps/awk leak check.
    Exit: the command's status; 1 for a leak after a pass; 124 (137 if KILL was
    needed) on timeout; 2 for bad options, before anything runs. What the command
    leaves running is ended afterwards and listed on stderr.
    """
    options = {name: value for name, value in locals().items() if name not in ("dry_run", "words")}
    from ci.runner.step import StepOptions, run_step

    run_step(StepOptions(**options), words, dry_run=dry_run)


@task(
    # The script's grammar and messages: a value is the next word, whatever it is; a
    # repeated --model-id wins (the last one); errors say `run_cov_split.sh: …`.
    script="run_cov_split.sh",
    iterable=["offline", "online"],
    help={
        "model_id": "--model-id ID: names the reports: coverage-<id>-{offline,online}-<step "
        "id>.xml.gz (required)",
        "offline": "--offline PATH: one pytest path of the offline half (repeat for more)",
        "online": "--online PATH: one pytest path of the online half (repeat for more)",
    },
)
def cov_split(
    model_id: str = "",
    offline: list[str] | None = None,
    online: list[str] | None = None,
    dry_run: bool = False,
    words: Sequence[str] = (),
) -> None:
    """Run a model's tests once per mode with coverage on weekly main; else one plain pytest.

    Pytest arguments go after `--` and keep their quoting (`-- -m 'a and b'`).
    Coverage only when WEEKLY=1 and BUILDKITE_BRANCH=main; otherwise one
    `pytest -s -v <offline> <online> <args>` whose exit code is passed through
    (5 included). With coverage, per mode: pytest --cov=vllm_omni
    --cov-report=xml:coverage-<id>-<mode>-<BUILDKITE_STEP_ID or local>.xml, then
    gzip -9; then `buildkite-agent artifact upload`; any failure exits 1.
    Argument errors exit 2 with run_cov_split.sh's messages.
    """
    import os

    from ci import covsplit

    paths = tuple(offline or ()), tuple(online or ())
    request = covsplit.Request(model_id, *paths, pytest_args=tuple(words))
    covsplit.run(request, os.environ, dry_run=dry_run)


@task(
    iterable=["label"],
    help={
        "name": "ready, merge, nightly or weekly",
        "platform": "rocm (amd), cuda, npu or xpu (intel); default: every platform whose tier"
        " exists and whose CI image is present locally",
        "repo": "the target checkout (default: the sample under nox, else the git checkout here)",
        "image": "run every step in this image",
        "native": "run here, not in containers",
        "force": "also run steps that need hardware this host lacks: on the cards they ask"
        " for of any SKU, else on every device of their platform (VLLM_CI_EXPECTED_GPU_COUNT"
        " stays theirs), else with none (the no-GPU pre-flight); a false `if` still skips",
        "exact_sku": "run a GPU step only on devices whose name has its SKU (H100, MI300)",
        "cpu_only": "run no GPU step without --force, whatever devices this host has",
        "list": "print the steps; run nothing",
        "step": "only steps whose label contains this text",
        "keep_going": "go on after a blocking failure (without it, a blocking failure starts no"
        " new job; the jobs running then finish)",
        "jobs": "-j N: run up to N jobs at a time (default 0: one per CPU of this host); a GPU"
        " job also waits for free devices, a job for the steps it depends_on",
        "results": "write the logs and the JUnit into this folder itself (default: a folder of"
        " its own per run, build/tiers/<tier>-<platform>/<time>-<pid>/, and a `latest` link"
        " beside it)",
        "label": "extra container label, KEY=VALUE (repeatable)",
    },
)
def tier(
    name: str,
    platform: str = "",
    repo: str = "",
    image: str = "",
    native: bool = False,
    force: bool = False,
    exact_sku: bool = False,
    cpu_only: bool = False,
    list: bool = False,
    step: str = "",
    keep_going: bool = False,
    jobs: int = 0,
    results: str = "",
    label: list[str] | None = None,
) -> None:
    """Run one tier of a target repo here, as Buildkite would; `nox -s NAME -- ...` is the same.

    A step is CPU-runnable only if it has a pytest -m expression and every -m in
    it has a positive `cpu` term (not negated); those run here with the no-GPU
    pre-flight (VLLM_CI_EXPECTED_GPU_COUNT=0). Every other step needs hardware:
    it runs when this host has at least the devices its hardware asks for, else
    it is reported as `needs <hardware>: <why>` and does not run unless --force
    is given. The hardware is the step's agent_pool (rocm) or the preset the
    upload resolves (cuda, npu); its `_<n>` is the card count (mi300_4: 4). The
    devices are what nvidia-smi, rocm-smi, npu-smi or xpu-smi list, of the step's
    platform, another SKU too (the summary names it), narrowed by your own
    CUDA_VISIBLE_DEVICES (HIP_, ASCEND_RT_, ZE_AFFINITY_MASK): indices only,
    empty for none. The job gets n free devices and VLLM_CI_EXPECTED_GPU_COUNT=n;
    a job without devices is shown none. Containers run as you (HOME=/tmp).
    Group and step `if`s are evaluated as for a PR carrying the tier's label,
    with build.env() reading this environment (e.g. WEEKLY=1); a false one
    skips the step. Jobs run up to -j at a time; a step whose depends_on names
    a step of the tier waits for it, and is not run when that step did not
    pass. Exit 1 only when a blocking step fails.
    """
    options = {key: value for key, value in locals().items() if key != "label"}
    from ci.errors import Stop
    from ci.tiers.session import run

    code = run(**options, label=label or ())
    if code:
        raise Stop(code)
