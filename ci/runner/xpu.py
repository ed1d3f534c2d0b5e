"""`run-tests --platform xpu`: the XPU job's tests in a container of the CI image.

Replaces the test half of `run-xpu-test.sh`: `docker run` of `xpu/vllm-omni-ci:<commit>`
with the script's devices, mounts, env and name, running the checkout's test list.
The list belongs to vLLM-Omni, as the script's commands did: `.buildkite/intel/xpu-tests.txt`
in the job's checkout (the nearest folder at or above the working directory holding
`.git`), one shell command per line, `#` comments and blank lines skipped
(`ci.runner.xputests`; `migrate` writes it from the checkout's script). `COMMANDS` below
is only the fallback for a checkout without the file, said in one `note:` line; a file
that is there but empty or unreadable is an error (exit 1).
Changed (docs/differences.md): only present devices are passed; the timeout kills
the container; container and image are removed on every ending; `docker system
prune -f` is opt-in (`--prune`). Kill and cleanup go through the SDK.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import string
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ci import door, door_docker
from ci.durations import parse_duration
from ci.errors import Stop, UserError
from ci.images import refs
from ci.platforms import Platform
from ci.runner import run_reporting, xputests
from ci.runner.program import SHELLS, render_program
from ci.runner.xputests import XpuTests
from ci.target import resolve_commit, working_directory

if TYPE_CHECKING:
    from docker import DockerClient

# The fallback XPU test commands, for a checkout without `xputests.TESTS_FILE` (the
# runner and the XPU tier both read that file first): the last step of
# `.buildkite/intel/scripts/run-xpu-test.sh` at the seed level. tblib is installed
# first for pytest-xdist tracebacks.
_PATHS = "tests/diffusion tests/dfx tests/e2e"
WORKDIR = "/workspace/vllm-omni"  # the checkout in the XPU image
COMMANDS = (
    'echo "${ZE_AFFINITY_MASK:-}"',
    "pip install tblib==3.1.0",
    f"cd {WORKDIR}",
    f'pytest -v -s {_PATHS} -m "core_model and xpu and B60"',
    "pytest -v -s tests/diffusion/quantization/test_mxfp8_config.py",
    f'pytest -v -s {_PATHS} -m "advanced_model and xpu and B60"',
    f'pytest -v -s {_PATHS} -m "omni and xpu and B60"',
)

BUILT_IN = "ci/runner/xpu.py, COMMANDS"  # how the fallback is named in notes and plans


def load_tests(checkout: Path) -> XpuTests:
    """The checkout's XPU test list, else `COMMANDS` with a `note:` line (`xputests.load`)."""
    return xputests.load(checkout, COMMANDS, BUILT_IN)


PASSTHROUGH = ("VLLM_LOGGING_LEVEL", "VLLM_OMNI_LOGGING_LEVEL", "HF_TOKEN", "ZE_AFFINITY_MASK")
# `timeout -k 30`: how long the docker client may take to end after the container was killed.
KILL_AFTER = 30.0
# On SIGTERM the client gets this long before KILL; the container is removed right after.
SIGNAL_GRACE = 3.0
# Where host devices are looked up; a test or an unusual host may point it elsewhere.
DEV_ROOT_ENV = "VLLM_OMNI_CI_DEV_ROOT"


@dataclass(frozen=True)
class XpuRunSpec:
    """One container run, resolved."""

    image: str
    container: str
    hf_cache: str
    timeout: float
    dev_root: str = "/dev"
    devices: tuple[str, ...] = ()  # the host device paths that exist (dri, dri/by-path)
    prune: bool = False
    commands: tuple[str, ...] = COMMANDS  # the test list run in the container


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


def present_devices(dev_root: str) -> tuple[str, ...]:
    return tuple(p for p in _wanted(dev_root) if os.path.exists(p))


def program(commands: Sequence[str] = COMMANDS) -> str:
    """The bash program run in the container: the test list, stop at the first failure."""
    return render_program(SHELLS[Platform.XPU], commands)


def docker_run_argv(spec: XpuRunSpec) -> tuple[str, ...]:
    """The script's `docker run`, flag for flag, minus absent devices, plus `--pull=never`."""
    dri, by_path = _wanted(spec.dev_root)
    # Never pull: a missing local image would otherwise be fetched from Docker Hub's
    # `xpu/` namespace, which we do not own, and be given HF_TOKEN.
    argv: list[str] = ["docker", "run", "--pull=never"]
    if dri in spec.devices:
        argv += ["--device", f"{dri}:/dev/dri"]
    argv += ["--net=host", "--ipc=host"]
    if by_path in spec.devices:
        argv += ["-v", f"{by_path}:/dev/dri/by-path"]
    argv += ["-v", f"{spec.hf_cache}:/root/.cache/huggingface"]
    argv += ["--security-opt", "seccomp=unconfined", "--entrypoint="]
    for name in PASSTHROUGH:
        argv += ["-e", name]
    return (*argv, "--name", spec.container, spec.image, "bash", "-c", program(spec.commands))


def run_command(spec: XpuRunSpec) -> door.Command:
    return door.Command(
        docker_run_argv(spec),
        description=f"XPU tests in {spec.container} ({spec.image})",
        # Backstop only: at `timeout` the container itself is killed (see execute).
        timeout=spec.timeout + KILL_AFTER,
        grace=SIGNAL_GRACE,
    )


PRUNE = door.Command(
    ("docker", "system", "prune", "-f"), description="prune the shared host (--prune)"
)


def cleanup(spec: XpuRunSpec, client: Callable[[], DockerClient]) -> None:
    """Each step runs whatever happened before it; one already gone is fine; failures
    are logged, never raised."""
    import docker

    container = lambda: client().containers.get(spec.container).remove(force=True)  # noqa: E731
    image = lambda: client().images.remove(spec.image, force=True)  # noqa: E731
    steps: list[tuple[str, Callable[[], object]]] = [
        (f"remove container {spec.container}", container),
        (f"remove image {spec.image}", image),
        *((("docker system prune -f", lambda: door.run(PRUNE)),) if spec.prune else ()),
    ]
    for what, step in steps:
        try:
            with contextlib.suppress(docker.errors.NotFound):  # ImageNotFound is one too
                door_docker.change(what, step, quiet=True)
        except Exception as exc:
            door.note(f"warning: cleanup: {what} failed: {exc}")


def execute(spec: XpuRunSpec) -> int:
    """Run the container; return its exit status (124 after a timeout)."""

    def connect() -> DockerClient:
        import docker

        return docker.from_env(timeout=20)

    # The SDK client for kill and cleanup, connected on first use, quietly: the cleanup
    # runs on every ending, and an error's line must stay the first on stderr.
    client = functools.cache(lambda: door_docker.ask("connect to the engine", connect, quiet=True))
    fired, finished = threading.Event(), threading.Event()

    def kill_at_deadline() -> None:
        """Kill the container; retry while it does not exist yet or is still starting."""
        if finished.wait(spec.timeout):
            return
        fired.set()
        door.note(f"timeout: {spec.timeout:g}s passed; killing container {spec.container}")
        kill = lambda: client().containers.get(spec.container).kill()  # noqa: E731
        last: Exception | None = None
        while not finished.is_set():
            try:  # said once; the retries are quiet
                door_docker.change(f"kill container {spec.container}", kill, quiet=bool(last))
                return
            except Exception as exc:  # not created / not running yet; the client backstop remains
                last = exc
                finished.wait(0.2)
        if last is not None:
            door.note(f"note: {spec.container} was not killed ({last}); the run had ended")

    started = time.monotonic()
    try:
        try:
            os.makedirs(spec.hf_cache, exist_ok=True)
        except OSError as exc:
            raise Stop(1, f"error: HF_CACHE: cannot create {spec.hf_cache}: {exc}") from None
        threading.Thread(target=kill_at_deadline, daemon=True).start()
        result = run_reporting(run_command(spec))
        finished.set()
        door.note(f"docker run ended with {result.code} after {time.monotonic() - started:.1f}s")
        return 124 if fired.is_set() else result.code
    finally:
        finished.set()
        cleanup(spec, client)


def run_tests(
    *, timeout: str = "", prune: bool = False, positional: Sequence[str] = (), dry_run: bool = False
) -> None:
    env = os.environ
    if positional:
        raise UserError(
            f"run-tests --platform xpu runs the checkout's {xputests.TESTS_FILE} (else the"
            f" built-in list) and takes no commands after `--` (got {' '.join(positional)!r})"
        )
    seconds = parse_duration(timeout or "30m", name="--timeout")
    if seconds <= 0:
        raise UserError(f"--timeout: {timeout!r} must be longer than zero")
    cwd = Path(working_directory())
    commit = resolve_commit(cwd, None, env, message="BUILDKITE_COMMIT must be set")
    tests = load_tests(xputests.checkout_of(cwd))
    dev_root = env.get(DEV_ROOT_ENV, "") or "/dev"
    spec = XpuRunSpec(
        commands=tests.commands,
        image=refs.image_ref(refs.XPU_REPOSITORY, commit),
        container=container_name(commit),
        hf_cache=hf_cache_dir(env),
        timeout=seconds,
        dev_root=dev_root,
        devices=present_devices(dev_root),
        prune=prune,
    )
    if dry_run:
        removed = f"remove container {spec.container}, remove image {spec.image}"
        removed += ", docker system prune -f" if spec.prune else ""
        missing = [p for p in _wanted(spec.dev_root) if p not in spec.devices]
        plan = door.Plan(
            commands=(run_command(spec), PRUNE) if spec.prune else (run_command(spec),),
            facts=(
                ("tests from", tests.source),
                *((f"test {i}", line) for i, line in enumerate(tests.commands, 1)),
                ("image", spec.image),
                ("container", spec.container),
                ("timeout", f"{spec.timeout:g}s, then the container is killed (exit 124)"),
                ("devices", ", ".join(spec.devices) or "none on this host"),
                ("not passed", ", ".join(missing) or "-"),
                ("always, also on failure/timeout/SIGTERM", removed),
            ),
            title="XPU tests (docker run)",
        )
        door.execute(plan, dry_run=True)
    elif code := execute(spec):
        raise Stop(code)
