"""`run-tests --platform xpu`: the XPU job's tests in a container of the CI image.

Replaces the test half of `run-xpu-test.sh`: `docker run` of `xpu/vllm-omni-ci:<commit>`
with the script's devices, mounts, env and name, running `ci.runner.xpu_commands`.
Changed (docs/differences.md): only present devices are passed; the timeout kills
the container; container and image are removed on every ending; `docker system
prune -f` is opt-in (`--prune`). Kill and cleanup go through the SDK.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import string
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ci import door, door_docker
from ci.durations import parse_duration
from ci.errors import Stop, UserError
from ci.images import refs
from ci.runner import run_reporting, xpu_commands
from ci.runner.program import Mode, Section, Semantics, render_program
from ci.target import resolve_commit

if TYPE_CHECKING:
    from docker import DockerClient

XPU = Semantics(
    platform="xpu",
    preflight=(Section("Intel XPU tests"),),
    mode=Mode.FAIL_FAST,
    allow_no_tests=False,
)

IMAGE_REPO = refs.XPU_REPOSITORY
PASSTHROUGH = ("VLLM_LOGGING_LEVEL", "VLLM_OMNI_LOGGING_LEVEL", "HF_TOKEN", "ZE_AFFINITY_MASK")
CONTAINER_HF = "/root/.cache/huggingface"
DEFAULT_TIMEOUT = "30m"
# `timeout -k 30`: how long the docker client may take to end after the container was killed.
KILL_AFTER = 30.0
# On SIGTERM the client gets this long before KILL; the container is removed right after.
SIGNAL_GRACE = 3.0
# Where host devices are looked up; a test or an unusual host may point it elsewhere.
DEV_ROOT_ENV = "VLLM_OMNI_CI_DEV_ROOT"
TIMEOUT_CODE = 124


@dataclass(frozen=True)
class XpuRunSpec:
    """One container run, resolved."""

    image: str
    container: str
    hf_cache: str
    program: str
    timeout: float
    dev_root: str = "/dev"
    devices: tuple[str, ...] = ()  # the host device paths that exist (dri, dri/by-path)
    prune: bool = False
    docker: str = "docker"


def container_name(commit: str, suffix: str | None = None) -> str:
    """`xpu_<commit>_<10 random [A-Za-z0-9]>`, as the script named it."""
    if suffix is None:
        alphabet = string.ascii_letters + string.digits
        suffix = "".join(secrets.choice(alphabet) for _ in range(10))
    return f"xpu_{commit}_{suffix}"


def hf_cache_dir(env: Mapping[str, str]) -> str:
    """HF_CACHE, else `<real home>/.cache/huggingface`."""
    home = Path(os.path.realpath(os.path.expanduser("~")))
    return env.get("HF_CACHE", "") or str(home / ".cache" / "huggingface")


def _wanted(dev_root: str) -> tuple[str, str]:
    """The host devices the script passed: dri, and dri/by-path (mounted)."""
    return f"{dev_root}/dri", f"{dev_root}/dri/by-path"


def present_devices(
    dev_root: str, exists: Callable[[str], bool] = os.path.exists
) -> tuple[str, ...]:
    return tuple(p for p in _wanted(dev_root) if exists(p))


def program() -> str:
    """The bash program run in the container: the command table, stop at the first failure."""
    return render_program(XPU, xpu_commands.command_lines())


def docker_run_argv(spec: XpuRunSpec) -> tuple[str, ...]:
    """The script's `docker run`, flag for flag, minus absent devices, plus `--pull=never`."""
    dri, by_path = _wanted(spec.dev_root)
    # Never pull: a missing local image would otherwise be fetched from Docker Hub's
    # `xpu/` namespace, which we do not own, and be given HF_TOKEN.
    argv: list[str] = [spec.docker, "run", "--pull=never"]
    if dri in spec.devices:
        argv += ["--device", f"{dri}:/dev/dri"]
    argv += ["--net=host", "--ipc=host"]
    if by_path in spec.devices:
        argv += ["-v", f"{by_path}:/dev/dri/by-path"]
    argv += ["-v", f"{spec.hf_cache}:{CONTAINER_HF}"]
    argv += ["--security-opt", "seccomp=unconfined", "--entrypoint="]
    for name in PASSTHROUGH:
        argv += ["-e", name]
    return (*argv, "--name", spec.container, spec.image, "bash", "-c", spec.program)


def run_command(spec: XpuRunSpec) -> door.Command:
    return door.Command(
        docker_run_argv(spec),
        description=f"XPU tests in {spec.container} ({spec.image})",
        # Backstop only: at `timeout` the container itself is killed (see execute).
        timeout=spec.timeout + KILL_AFTER,
        grace=SIGNAL_GRACE,
    )


def prune_command(spec: XpuRunSpec) -> door.Command:
    return door.Command(
        (spec.docker, "system", "prune", "-f"), description="prune the shared host (--prune)"
    )


def plan_run(spec: XpuRunSpec) -> door.Plan:
    cleanup = f"remove container {spec.container}, remove image {spec.image}"
    commands = [run_command(spec)]
    if spec.prune:
        commands.append(prune_command(spec))
        cleanup += ", docker system prune -f"
    missing = [p for p in _wanted(spec.dev_root) if p not in spec.devices]
    return door.Plan(
        commands=tuple(commands),
        facts=(
            ("image", spec.image),
            ("container", spec.container),
            ("timeout", f"{spec.timeout:g}s, then the container is killed (exit 124)"),
            ("devices", ", ".join(spec.devices) or "none on this host"),
            ("not passed", ", ".join(missing) or "-"),
            ("always, also on failure/timeout/SIGTERM", cleanup),
        ),
        title="XPU tests (docker run)",
    )


def resolve(env: Mapping[str, str], *, timeout: str, prune: bool) -> XpuRunSpec:
    seconds = parse_duration(timeout or DEFAULT_TIMEOUT, name="--timeout")
    if seconds <= 0:
        raise UserError(f"--timeout: {timeout!r} must be longer than zero")
    commit = resolve_commit(Path.cwd(), None, env, message="BUILDKITE_COMMIT must be set")
    dev_root = env.get(DEV_ROOT_ENV, "") or "/dev"
    return XpuRunSpec(
        image=refs.image_ref(IMAGE_REPO, commit),
        container=container_name(commit),
        hf_cache=hf_cache_dir(env),
        program=program(),
        timeout=seconds,
        dev_root=dev_root,
        devices=present_devices(dev_root),
        prune=prune,
    )


# --------------------------------------------------------------------------- running


class Engine:
    """The docker SDK client for kill and cleanup, connected on first use, quietly: the
    cleanup runs on every ending, and an error's line must stay the first on stderr."""

    def __init__(self) -> None:
        self._client: DockerClient | None = None

    def client(self) -> DockerClient:
        if self._client is None:
            import docker

            connect = lambda: docker.from_env(timeout=20)  # noqa: E731
            self._client = door_docker.ask("connect to the engine", connect, quiet=True)
        return self._client

    def kill(self, name: str, *, again: bool = False) -> None:
        """`again`: a retry, already said once."""
        containers = self.client().containers
        door_docker.change(
            f"kill container {name}", lambda: containers.get(name).kill(), quiet=again
        )

    def remove(self, kind: str, name: str) -> None:
        """Remove a `container` or an `image`, quietly; one already gone is fine."""
        import docker

        client = self.client()
        action: Callable[[], object] = (
            (lambda: client.containers.get(name).remove(force=True))
            if kind == "container"
            else (lambda: client.images.remove(name, force=True))
        )
        with contextlib.suppress(docker.errors.NotFound):  # ImageNotFound is one too
            door_docker.change(f"remove {kind} {name}", action, quiet=True)


def _kill_at_deadline(
    spec: XpuRunSpec, engine: Engine, fired: threading.Event, finished: threading.Event
) -> None:
    """Kill the container; retry while it does not exist yet or is still starting."""
    fired.set()
    door.note(f"timeout: {spec.timeout:g}s passed; killing container {spec.container}")
    last: Exception | None = None
    while not finished.is_set():
        try:
            engine.kill(spec.container, again=last is not None)
            return
        except Exception as exc:  # not created / not running yet; the client backstop remains
            last = exc
            finished.wait(0.2)
    if last is not None:
        door.note(f"note: {spec.container} was not killed ({last}); the run had ended")


def cleanup(spec: XpuRunSpec, engine: Engine) -> None:
    """Each step runs whatever happened before it; failures are logged, never raised."""
    steps: list[tuple[str, Callable[[], object]]] = [
        (f"remove container {spec.container}", lambda: engine.remove("container", spec.container)),
        (f"remove image {spec.image}", lambda: engine.remove("image", spec.image)),
    ]
    if spec.prune:
        steps.append(("docker system prune -f", lambda: door.run(prune_command(spec))))
    for what, step in steps:
        try:
            step()
        except Exception as exc:
            door.note(f"warning: cleanup: {what} failed: {exc}")


def execute(spec: XpuRunSpec) -> int:
    """Run the container; return its exit status (124 after a timeout)."""
    engine = Engine()
    fired, finished = threading.Event(), threading.Event()
    timer = threading.Timer(spec.timeout, _kill_at_deadline, (spec, engine, fired, finished))
    timer.daemon = True
    started = time.monotonic()
    try:
        try:
            os.makedirs(spec.hf_cache, exist_ok=True)
        except OSError as exc:
            raise Stop(1, f"error: HF_CACHE: cannot create {spec.hf_cache}: {exc}") from None
        timer.start()
        result = run_reporting(run_command(spec))
        finished.set()
        timer.cancel()
        door.note(f"docker run ended with {result.code} after {time.monotonic() - started:.1f}s")
        return TIMEOUT_CODE if fired.is_set() else result.code
    finally:
        finished.set()
        timer.cancel()
        cleanup(spec, engine)


def run_tests(
    env: Mapping[str, str],
    *,
    timeout: str = "",
    prune: bool = False,
    positional: tuple[str, ...] = (),
    dry_run: bool = False,
) -> None:
    if positional:
        raise UserError(
            "run-tests --platform xpu runs the XPU command table (ci/runner/xpu_commands.py) "
            f"and takes no commands after `--` (got {' '.join(positional)!r})"
        )
    spec = resolve(env, timeout=timeout, prune=prune)
    if dry_run:
        door.execute(plan_run(spec), dry_run=True)
        return
    code = execute(spec)
    if code:
        raise Stop(code)
