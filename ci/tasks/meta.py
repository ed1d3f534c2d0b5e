"""Tasks about this machine: `doctor`, `sandbox up | status | down`, and `wheelhouse`
(the wheels of the offline image builds: sample images, tools image)."""

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


@task(
    help={
        "action": "up (bring every part up, reusing what works), status, or down",
        "json": "status: print the parts as JSON",
        "purge": "down: also remove the buildx plugin link and the unpacked packages",
        "root": "the sandbox's folder (default: $VLLM_OMNI_CI_SANDBOX, else "
        "~/.local/share/vllm-omni-ci/sandbox)",
    },
)
def sandbox(action: str, json: bool = False, purge: bool = False, root: str = "") -> None:
    """Make this machine able to run every task offline: `up`, `status` (exit 1: missing), `down`.

    `up` brings up, in order: a Docker engine with the containerd image store
    (pinned Debian trixie packages unpacked into the sandbox when none is
    there), the buildx plugin, the registry at 127.0.0.1:5000, the offline base
    image, and the builder the e2e tests use. Each part prints one line:
    reused, started or installed. `down` stops only what `up` started.
    """
    from ci.errors import UserError
    from ci.sandbox import run

    chosen = run.parse_action(action)
    problems = []
    if json and chosen != "status":
        problems.append("--json: applies to `sandbox status` only")
    if purge and chosen != "down":
        problems.append("--purge: applies to `sandbox down` only")
    UserError.collect(problems)
    if chosen == "up":
        run.up(root)
    elif chosen == "status":
        run.status(root, as_json=json)
    else:
        run.down(root, purge=purge)


@task(
    iterable=["dest"],
    help={
        "dest": "output directory, repeatable (default: ./wheelhouse and "
        "examples/omni-sample/wheelhouse of this checkout)",
        "python_version": "CPython version of the images (default: 3.11, Debian bookworm)",
    },
)
def wheelhouse(
    dest: list[str] | None = None,
    python_version: str = "",
    dry_run: bool = False,
) -> None:
    """Build vllm-omni-ci's wheel and download its dependency wheels for offline images."""
    import os
    from pathlib import Path

    from ci import wheelhouse as wh
    from ci.errors import UserError

    if any(not d.strip() for d in dest or ()):
        raise UserError("--dest: an empty path; give a directory (or leave --dest out)")
    root = wh.project_root()
    # os.path's resolution: a symlink loop stays a path (pathlib's raises RuntimeError).
    dests = tuple(Path(os.path.realpath(d)) for d in dest or ()) or wh.default_dests(root)
    version = python_version or wh.DEFAULT_PYTHON_VERSION
    wh.build(wh.WheelhouseOptions(root, dests, version), dry_run=dry_run)
