"""`tier NAME [options]`: the nox tier sessions' runner, for places without nox (CI pods)."""

from __future__ import annotations

from invoke.context import Context

from ci.taskkit import task

__all__ = ["tier"]


@task(
    iterable=["label"],
    help={
        "name": "ready, merge, nightly or weekly",
        "platform": "rocm (amd), cuda, npu or xpu (intel); default: every platform whose tier"
        " exists and whose CI image is present locally",
        "repo": "the target checkout (default: the sample under nox, else the git checkout here)",
        "image": "run every step in this image",
        "native": "run here, not in containers",
        "force": "also run steps that need hardware (with the no-GPU pre-flight when its"
        " devices are absent); a false `if` still skips",
        "list": "print the steps; run nothing",
        "step": "only steps whose label contains this text",
        "keep_going": "go on after a blocking failure",
        "results": "write the logs and the JUnit into this folder itself (default: a folder of"
        " its own per run, build/tiers/<tier>-<platform>/<time>-<pid>/, and a `latest` link"
        " beside it)",
        "label": "extra container label, KEY=VALUE (repeatable)",
    },
)
def tier(
    c: Context,
    name: str,
    platform: str = "",
    repo: str = "",
    image: str = "",
    native: bool = False,
    force: bool = False,
    list: bool = False,
    step: str = "",
    keep_going: bool = False,
    results: str = "",
    label: list[str] | None = None,
) -> None:
    """Run one tier of a target repo here, as Buildkite would; `nox -s NAME -- ...` is the same.

    A step is CPU-runnable only if it has a pytest -m expression and every -m in
    it has a positive `cpu` term (not negated); those run here with the no-GPU
    pre-flight (VLLM_CI_EXPECTED_GPU_COUNT=0). Every other step is reported as
    `needs <hardware>` and does not run unless --force is given. The hardware
    is the step's agent_pool (rocm) or the preset the upload resolves (cuda,
    npu). Group and step `if`s are evaluated as for a PR carrying the tier's
    label, with build.env() reading this environment (e.g. WEEKLY=1); a false
    one skips the step. A step whose depends_on names a step of the tier that
    did not pass is not run. Exit 1 only when a blocking step fails.
    """
    options = {key: value for key, value in locals().items() if key not in ("c", "label")}
    from ci.errors import Stop, UserError
    from ci.tiers.session import run

    if c.remainder:  # the form before the options were the task's own
        raise UserError(
            f"tier: options go before `--`: vllm-omni-ci tier {name} --platform rocm …"
            f" (under nox: nox -s {name} -- --platform rocm …)"
        )
    code = run(**options, label=label or ())
    if code:
        raise Stop(code)
