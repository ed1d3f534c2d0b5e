"""`tier NAME -- [options]`: the nox tier sessions' runner, for places without nox (CI pods)."""

from __future__ import annotations

from invoke.context import Context

from ci.taskkit import task

__all__ = ["tier"]


@task(help={"name": "ready, merge, nightly or weekly"})
def tier(c: Context, name: str) -> None:
    """Run one tier here, as `nox -s NAME -- ...` does; options go after `--`.

    `vllm-omni-ci tier ready -- --platform rocm --repo PATH [--image IMG] [--native]
    [--force] [--list] [--step TEXT] [--keep-going]`. A step is CPU-runnable only
    if every pytest -m in it has a positive `cpu` term; other steps report
    "needs <hardware>" unless --force. Exit 1 only when a blocking step fails.
    """
    from ci.argv import after_dashdash
    from ci.errors import Stop, UserError
    from ci.tiers.model import parse_tier
    from ci.tiers.session import run

    try:
        parse_tier(name)
    except UserError as exc:
        raise UserError(*(f"--name: {p}" for p in exc.problems)) from None
    code = run(name, after_dashdash(), prog=f"vllm-omni-ci tier {name} --")
    if code:
        raise Stop(code)
