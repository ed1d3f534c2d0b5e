"""`tier NAME [options]`: the nox tier sessions' runner, for places without nox (CI pods)."""

from __future__ import annotations

from invoke.context import Context

from ci.taskkit import task


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

    Only CPU steps run (every pytest -m has a positive `cpu` term), with the no-GPU
    pre-flight; every other step shows as `needs <hardware>` unless --force. `if`s
    are evaluated as for a PR carrying the tier's label; a false one, or a
    depends_on step that did not pass, skips the step. Exit 1 only when a blocking
    step fails.
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
