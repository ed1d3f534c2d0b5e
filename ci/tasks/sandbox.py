"""`sandbox up | status | down`: the offline Docker sandbox of this machine (ci.sandbox)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    help={
        "action": "up (bring every part up, reusing what works), status, or down",
        "json": "status: print the parts, the settings and what up changes outside the root,"
        " as JSON",
        "purge": "down: also remove the buildx plugin link and the unpacked packages",
        "root": "the sandbox's folder (default: $VLLM_OMNI_CI_SANDBOX, else "
        "~/.local/share/vllm-omni-ci/sandbox)",
        "registry_port": "up: the registry's port on 127.0.0.1 (default: what up recorded, "
        "else 5000)",
        "socket": "up: the engine's unix socket (default: what up recorded, else $DOCKER_HOST's "
        "unix socket, else /var/run/docker.sock)",
    },
)
def sandbox(
    action: str,
    json: bool = False,
    purge: bool = False,
    root: str = "",
    registry_port: str = "",
    socket: str = "",
) -> None:
    """Make this machine able to run every task offline: `up`, `status` (exit 1: missing), `down`.

    `up` brings up, in order: a Docker engine with the containerd image store
    (pinned Debian trixie packages unpacked into the sandbox when none is
    there) on its socket, the buildx plugin, the registry on 127.0.0.1 (port
    5000 unless told), the offline base image, and the builder the e2e tests
    use. Each part prints one line: reused, started or installed. `up` records
    the socket and port; `status` and `down` use them. `down` stops only what
    `up` started.
    """
    from ci.sandbox import run

    run.sandbox(
        action,
        root=root,
        as_json=json,
        purge=purge,
        registry_port=registry_port,
        socket=socket,
    )
