"""`doctor`: what this machine has for the tasks, judged (ci.doctor)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    help={
        "docker": "docker client to use (default: $VLLM_OMNI_CI_DOCKER, else auto-detected)",
        "json": "print the report (and the judged checks, under `checks`) as JSON",
        "builder": "the backend you mean to build with: auto (default), buildx (then"
        " `docker buildx` must work) or engine",
    }
)
def doctor(docker: str = "", json: bool = False, builder: str = "auto") -> None:
    """Report the docker clients, engine, buildx, buildctl, registry and shellcheck here.

    Then judge: exit 1, with one `error:` line and its fix per problem, when the
    tasks cannot run here (no engine, no registry, no base image in it, no
    BuildKit client, or no buildx for `--builder buildx`).
    """
    from ci import doctor as probe
    from ci.images.backends import parse_builder

    probe.doctor(docker or None, as_json=json, builder=parse_builder(builder))
