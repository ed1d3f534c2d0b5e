"""Tasks about this tool and this machine."""

from __future__ import annotations

import sys

from invoke.context import Context

from ci.taskkit import task

__all__ = ["doctor"]


@task(
    help={
        "docker": "docker client to use (default: $VLLM_OMNI_CI_DOCKER, else auto-detected)",
        "json": "print the report as JSON",
    }
)
def doctor(c: Context, docker: str = "", json: bool = False) -> None:
    """Report the docker clients, engine, buildx, buildctl, registry and shellcheck here."""
    from ci import doctor as probe

    report = probe.probe(docker or None)
    sys.stdout.write(report.to_json() + "\n" if json else probe.render(report))
