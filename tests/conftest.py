"""Shared fixtures: the Docker engine gate, recording stand-ins, the CLI runner,
the session's wheelhouse, and the ../shared gate.

Docker-marked tests skip with a reason when no engine answers, except under
CI=true, where they fail: CI promised an engine, so its absence is a defect.
Everything a test creates in Docker carries TEST_LABEL, and fixtures remove it.

Tests that read ../shared (the vLLM-Omni corpus, specs, seeds, schemas) get
their paths through `need_shared`, and collection-time lists through
`from_shared` / `shared_params`: without ../shared, collection still works and
each such test fails with one line naming the missing path.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.gitrepo import copy_tracked
from tests.inproc import Outcome, run_inproc

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SAMPLE = ROOT / "examples" / "omni-sample"
REGISTRY = "127.0.0.1:5000"
BASE_IMAGE = f"{REGISTRY}/omni-ci/python-base:bookworm"
TEST_LABEL_KEY = "vllm-omni-ci.test"
TEST_LABEL = f"{TEST_LABEL_KEY}=1"
NEEDS_SHARED = "needs_shared"

T = TypeVar("T")


# --------------------------------------------------------------------------- ../shared


def need_shared(path: Path = SHARED) -> Path:
    """`path` (SHARED or a path inside it), or fail the calling test in one line.

    Call it where a test, fixture or helper first touches ../shared; the line
    names ../shared itself when it is missing, else the missing path in it.
    """
    if not SHARED.is_dir():
        pytest.fail(f"needs ../shared ({SHARED}): not found", pytrace=False)
    if not path.exists():
        pytest.fail(f"needs ../shared ({SHARED}): {path} not found", pytrace=False)
    return path


def from_shared(build: Callable[[], T], fallback: T) -> T:
    """A module-level value read from ../shared: `build()`, or `fallback` without ../shared.

    For collection time, where `need_shared` cannot fail a test: the tests that
    use the value call `need_shared` (or run under `shared_params`) themselves.
    """
    return build() if SHARED.is_dir() else fallback


def shared_params(build: Callable[[], Iterable[Any]], arity: int = 1) -> list[Any]:
    """Parametrize values read from ../shared at collection time.

    Without ../shared: a single `needs-shared` parameter (of `arity` values),
    whose test fails with `need_shared`'s line instead of the empty set
    pytest would skip.
    """
    if SHARED.is_dir():
        return list(build())
    missing = (None,) * arity
    return [pytest.param(*missing, id="needs-shared", marks=pytest.mark.needs_shared)]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/** from today's output instead of comparing (test_golden.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{NEEDS_SHARED}: a parameter standing in for values read from ../shared"
    )


# Tests run on both cores (pytest-xdist, `--dist loadgroup`; the nox `tests` session asks for
# it). A group runs on one worker, one test after another:
# - every Docker test is in one group: they share the engine, its build cache (some prune it
#   all), the registry and the builder;
# - every other test is in its module's group, so a module's or the session's fixtures (the
#   migrate matrix, git templates) are built once, not once per worker;
# - the modules in SHARED_GROUPS share a fixed path outside their tmp_path (the native
#   runner's /tmp/vllm-omni-native-<job id>, a contract of the runner) and take one group.
DOCKER_GROUP = "docker"
SHARED_GROUPS = {"test_runner": "native-runner", "test_runner_legacy": "native-runner"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("docker") is not None:
            group = DOCKER_GROUP
        else:
            module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
            group = SHARED_GROUPS.get(module, module)
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Under `--dist loadgroup`, every test a worker collected carries its group (xdist
    appends `@group` to its id); without them the Docker tests would run on two workers
    at once and flake, so the run stops here instead, saying why."""
    if node.config.getoption("dist", None) != "loadgroup":
        return
    lost = [nodeid for nodeid in ids if "@" not in nodeid]
    if lost:
        pytest.exit(
            f"error: pytest-xdist applied no group to {len(lost)} tests (e.g. {lost[0]}):"
            " this pytest and pytest-xdist disagree on test ids; install the versions"
            " pyproject.toml allows, or run with -n 0",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> None:
    # In the call phase, so that the test fails (a fixture would make it an error).
    if pyfuncitem.get_closest_marker(NEEDS_SHARED) is not None:
        need_shared()


@cache
def engine_client() -> str | None:
    """A docker client whose engine answers, preferring one that builds with BuildKit."""
    from ci import doctor

    for path in doctor.docker_clients():
        probe = subprocess.run(
            [path, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if probe.returncode == 0 and probe.stdout.strip():
            build = subprocess.run(
                [path, "build", "--help"],
                capture_output=True,
                env={**os.environ, "DOCKER_BUILDKIT": "1"},
                timeout=20,
            )
            if build.returncode == 0:
                return path
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is None:
        return
    if engine_client() is None:
        message = "no Docker engine answers (start dockerd, as .ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {message}")
        pytest.skip(message)


@pytest.fixture
def docker_cli() -> str:
    client = engine_client()
    assert client is not None
    return client


@pytest.fixture
def docker_cleanup(docker_cli: str) -> Iterator[None]:
    """Remove the containers and images carrying TEST_LABEL that this test created.

    Only what appeared during the test goes: another test (or another checkout's
    test run on the same engine) may own the rest.
    """

    def labelled(kind: str) -> set[str]:
        listing = (
            [docker_cli, "ps", "-aq"] if kind == "containers" else [docker_cli, "images", "-q"]
        )
        found = subprocess.run(
            [*listing, "--no-trunc", "--filter", f"label={TEST_LABEL_KEY}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        return set(found)

    before = {"containers": labelled("containers"), "images": labelled("images")}
    yield
    containers = labelled("containers") - before["containers"]
    if containers:
        subprocess.run([docker_cli, "rm", "-f", *sorted(containers)], capture_output=True)
    images = labelled("images") - before["images"]
    if images:
        subprocess.run([docker_cli, "rmi", "-f", *sorted(images)], capture_output=True)


# --------------------------------------------------------------------------- stand-ins


@dataclass
class StandIns:
    """Recording stand-ins for programs that cannot run here (buildx, buildctl, agent...).

    Each stand-in appends its argv (and selected env) as one JSON line to a log,
    then runs an optional bash snippet that decides its output and exit code.
    """

    bin_dir: Path
    log: Path

    def add(self, name: str, script: str = "exit 0", *, env_keys: tuple[str, ...] = ()) -> Path:
        path = self.bin_dir / name
        keys = json.dumps(list(env_keys))
        path.write_text(
            "#!/usr/bin/env bash\n"
            f'{shlex.quote(sys.executable)} - "$0" "$@" <<\'PY\'\n'
            "import json, os, sys\n"
            f"keys = {keys}\n"
            "entry = {'name': os.path.basename(sys.argv[1]), 'argv': sys.argv[2:],\n"
            "         'env': {k: os.environ.get(k) for k in keys}, 'cwd': os.getcwd()}\n"
            f"with open({str(self.log)!r}, 'a') as fh:\n"
            "    fh.write(json.dumps(entry) + '\\n')\n"
            "PY\n" + textwrap.dedent(script) + "\n"
        )
        path.chmod(0o755)
        return path

    def calls(self, name: str | None = None) -> list[dict[str, object]]:
        if not self.log.exists():
            return []
        entries = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [e for e in entries if name is None or e["name"] == name]

    def argvs(self, name: str) -> list[list[str]]:
        return [list(c["argv"]) for c in self.calls(name)]  # type: ignore[call-overload]

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment with the stand-ins first on PATH."""
        source = dict(os.environ if base is None else base)
        source["PATH"] = f"{self.bin_dir}{os.pathsep}{source.get('PATH', '')}"
        return source


@pytest.fixture
def standins(tmp_path: Path) -> StandIns:
    bin_dir = tmp_path / "standin-bin"
    bin_dir.mkdir()
    return StandIns(bin_dir, tmp_path / "standin-calls.jsonl")


# --------------------------------------------------------------------------- CLI


def cli_path() -> str:
    found = shutil.which("vllm-omni-ci") or str(Path(sys.executable).parent / "vllm-omni-ci")
    return found


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = 300,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `vllm-omni-ci ARGS` as a user would, capturing both streams."""
    return subprocess.run(
        [cli_path(), *args],
        env=dict(os.environ if env is None else env),
        cwd=str(cwd or ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )


# --------------------------------------------------------------------------- wheelhouse

_SESSION: pytest.FixtureRequest | None = None


@pytest.fixture(scope="session", autouse=True)
def _session_request(request: pytest.FixtureRequest) -> Iterator[None]:
    """Lets helpers called without fixtures (`sample_with_wheelhouse`) reach session fixtures.

    Nothing is built here: `session_wheelhouse` runs only when a test first needs it.
    """
    global _SESSION
    _SESSION = request
    yield
    _SESSION = None


@pytest.fixture(scope="session")
def session_wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheelhouse, built once per test session with `vllm-omni-ci wheelhouse --dest`.

    Into a temporary directory: tests never depend on an earlier `vllm-omni-ci
    wheelhouse` having filled ./wheelhouse or the sample's, and never write there.
    Tests get copies (`copy_wheelhouse`); this one stays as built.
    """
    dest = tmp_path_factory.mktemp("session-wheelhouse") / "wheelhouse"
    done = run_cli("wheelhouse", "--dest", str(dest), timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert list(dest.glob("vllm_omni_ci-*.whl")), f"no vllm_omni_ci wheel in {dest}"
    return dest


def copy_wheelhouse(wheelhouse: Path, dest: Path) -> Path:
    """`dest` becomes a copy of `wheelhouse` (a build context needs real files, not links)."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(wheelhouse, dest)
    return dest


def _the_session_wheelhouse() -> Path:
    assert _SESSION is not None, "sample_with_wheelhouse runs only inside a test session"
    found: Path = _SESSION.getfixturevalue("session_wheelhouse")
    return found


def sample_with_wheelhouse(parent: Path, wheelhouse: Path | None = None) -> Path:
    """A copy of the sample under `parent`, with the wheelhouse its Dockerfiles install from.

    The wheels are a copy of `wheelhouse`, by default the session's
    (`session_wheelhouse`, built once per session); the sample's own
    wheelhouse directory, filled or not, is never used.
    """
    repo = copy_tracked(SAMPLE, parent / "omni-sample")
    copy_wheelhouse(wheelhouse or _the_session_wheelhouse(), repo / "wheelhouse")
    return repo


@pytest.fixture
def cli() -> object:
    return run_cli


@pytest.fixture
def inproc() -> Callable[..., Outcome]:
    """`run_inproc`: a task run in this process, the default way for a test to run one."""
    return run_inproc
