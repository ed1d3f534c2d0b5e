"""Tasks about this tool and this machine."""

from __future__ import annotations

import sys

from invoke.context import Context

from ci.taskkit import task

__all__ = ["doctor"]


@task(
    help={
        "docker": "docker client to use (default: $VLLM_OMNI_CI_DOCKER, else auto-detected)",
        "json": "print the report (and the judged checks, under `checks`) as JSON",
        "builder": "the backend you mean to build with: auto (default), buildx (then"
        " `docker buildx` must work) or engine",
    }
)
def doctor(c: Context, docker: str = "", json: bool = False, builder: str = "auto") -> None:
    """Report the docker clients, engine, buildx, buildctl, registry and shellcheck here.

    Then judge: exit 1, with one `error:` line and its fix per problem, when the
    tasks cannot run here (no engine, no registry, no base image in it, no
    BuildKit client, or no buildx for `--builder buildx`).
    """
    import dataclasses
    import json as jsonlib

    from ci import doctor as probe
    from ci.errors import FAILURE, Stop
    from ci.images.backends import parse_builder

    wanted = parse_builder(builder)
    report = probe.probe(docker or None)
    base = report.registry and probe.base_image_in_registry()
    findings = probe.judge(report, base, wanted)
    if json:
        data = jsonlib.loads(report.to_json())
        data["checks"] = [dataclasses.asdict(f) for f in findings]
        data["ok"] = all(f.ok for f in findings)
        sys.stdout.write(jsonlib.dumps(data, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(probe.render(report))
    sys.stdout.flush()
    problems = probe.render_findings(findings)
    if problems:
        sys.stderr.write(problems)
        raise Stop(FAILURE)
