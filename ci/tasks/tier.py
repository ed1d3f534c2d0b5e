"""`tier NAME`: the nox tier sessions' runner, for places without nox (ci.tiers)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    replaces=("scripts/simple_test.sh",),
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
