"""`sandbox up | status | down`: the offline Docker sandbox of this machine (ci.sandbox)."""

from __future__ import annotations

from ci.taskdef import task


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
