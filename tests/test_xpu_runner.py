"""`run-tests --platform xpu`: spec runners-and-tiers.md §2.1, golden scenarios G56-G57.

The container runs for real on a small test image (the offline base, tblib
3.1.0 from a wheel fetched on the host, and a tiny test tree at the command
table's path whose tests pass, fail or hang as ZE_AFFINITY_MASK says, which
also proves the pass-through); the job's checkout holds that table as its
`.buildkite/intel/xpu-tests.txt`. The exact `docker run` argv is checked with a
recording stand-in.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ci.platforms import Platform
from ci.runner import xpu, xputests
from ci.runner.program import SHELLS, render_program
from tests.conftest import BASE_IMAGE, ROOT, TEST_LABEL, StandIns, cli_path, run_cli
from tests.inproc import run_task

# --------------------------------------------------------------------------- table and program


def test_command_table_is_the_scripts() -> None:
    assert xpu.COMMANDS == (
        'echo "${ZE_AFFINITY_MASK:-}"',
        "pip install tblib==3.1.0",
        "cd /workspace/vllm-omni",
        'pytest -v -s tests/diffusion tests/dfx tests/e2e -m "core_model and xpu and B60"',
        "pytest -v -s tests/diffusion/quantization/test_mxfp8_config.py",
        'pytest -v -s tests/diffusion tests/dfx tests/e2e -m "advanced_model and xpu and B60"',
        'pytest -v -s tests/diffusion tests/dfx tests/e2e -m "omni and xpu and B60"',
    )


def test_program_stops_at_the_first_failure(tmp_path: Path) -> None:
    """The XPU semantics are `bash -e`: the first failing line's status ends the job."""
    text = render_program(SHELLS[Platform.XPU], ["echo one", "(exit 3)", "echo two"])
    done = subprocess.run(["bash", "-c", text], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 3
    lines = done.stdout.splitlines()
    assert "one" in lines and "two" not in lines
    assert "--- Intel XPU tests" in done.stdout


def test_program_runs_the_table() -> None:
    text = xpu.program()
    for line in xpu.COMMANDS:
        assert line in text


def test_container_name_and_defaults(tmp_path: Path) -> None:
    assert xpu.container_name("abc", "0123456789") == "xpu_abc_0123456789"
    assert re.fullmatch(r"xpu_abc_[A-Za-z0-9]{10}", xpu.container_name("abc"))
    assert xpu.container_name("abc") != xpu.container_name("abc")
    assert xpu.hf_cache_dir({"HF_CACHE": "/x"}) == "/x"
    home = os.path.realpath(os.path.expanduser("~"))
    assert xpu.hf_cache_dir({}) == f"{home}/.cache/huggingface"
    (tmp_path / "dri" / "by-path").mkdir(parents=True)
    assert xpu.present_devices(str(tmp_path)) == (f"{tmp_path}/dri", f"{tmp_path}/dri/by-path")
    assert xpu.present_devices(str(tmp_path / "none")) == ()


def spec(devices: tuple[str, ...] = ()) -> xpu.XpuRunSpec:
    return xpu.XpuRunSpec(
        image="xpu/vllm-omni-ci:c",
        container="xpu_c_0123456789",
        hf_cache="/h",
        timeout=1800,
        devices=devices,
    )


def expected_argv(dev: str | None, hf: str, name: str, image: str, program: str) -> list[str]:
    argv = ["run", "--pull=never"]
    if dev:
        argv += ["--device", f"{dev}/dri:/dev/dri"]
    argv += ["--net=host", "--ipc=host"]
    if dev:
        argv += ["-v", f"{dev}/dri/by-path:/dev/dri/by-path"]
    argv += ["-v", f"{hf}:/root/.cache/huggingface", "--security-opt", "seccomp=unconfined"]
    argv += ["--entrypoint=", "-e", "VLLM_LOGGING_LEVEL", "-e", "VLLM_OMNI_LOGGING_LEVEL"]
    argv += ["-e", "HF_TOKEN", "-e", "ZE_AFFINITY_MASK", "--name", name, image, "bash", "-c"]
    return [*argv, program]


def test_docker_run_argv_with_and_without_devices() -> None:
    both = ("/dev/dri", "/dev/dri/by-path")
    assert list(xpu.docker_run_argv(spec(both))) == [
        "docker",
        *expected_argv("/dev", "/h", "xpu_c_0123456789", "xpu/vllm-omni-ci:c", xpu.program()),
    ]
    assert list(xpu.docker_run_argv(spec())) == [
        "docker",
        *expected_argv(None, "/h", "xpu_c_0123456789", "xpu/vllm-omni-ci:c", xpu.program()),
    ]
    only_dri = xpu.docker_run_argv(spec(("/dev/dri",)))
    assert "--device" in only_dri and "/dev/dri/by-path:/dev/dri/by-path" not in only_dri


# --------------------------------------------------------------------------- CLI with a stand-in


def runner_env(base: dict[str, str], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith(("BUILDKITE", "HF_", "ZE_"))}
    env.update(extra)
    return env


@pytest.mark.parametrize("with_devices", [True, False])
def test_cli_docker_run_argv_exact(with_devices: bool, tmp_path: Path, standins: StandIns) -> None:
    standins.add("docker", "exit 3")
    dev = tmp_path / "dev"
    if with_devices:
        (dev / "dri" / "by-path").mkdir(parents=True)
    hf = tmp_path / "hf"
    env = runner_env(
        standins.env(),
        BUILDKITE_COMMIT="c0ffee",
        HF_CACHE=str(hf),
        VLLM_OMNI_CI_DEV_ROOT=str(dev),
    )
    done = run_task("run-tests", "--platform", "intel", env=env, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    calls = standins.argvs("docker")
    assert len(calls) == 1
    name = calls[0][calls[0].index("--name") + 1]
    assert re.fullmatch(r"xpu_c0ffee_[A-Za-z0-9]{10}", name)
    assert calls[0] == expected_argv(
        str(dev) if with_devices else None, str(hf), name, "xpu/vllm-omni-ci:c0ffee", xpu.program()
    )
    assert hf.is_dir()


def test_differences_from_the_script_are_recorded() -> None:
    """Issue 12's five differences each have an entry in docs/differences.md."""
    text = (ROOT / "docs" / "differences.md").read_text()
    section = " ".join(text.split("\n## XPU test runner", 1)[1].split("\n## ", 1)[0].split())
    for needed in (
        "### Devices only when the host has them",
        "### The timeout kills the container, exit 124",
        "### The container and image are removed on every exit",
        "early failures left state behind",  # cleanup even when an earlier step failed
        "### `docker system prune -f` is opt-in (`--prune`)",
    ):
        assert needed in section, needed


def test_missing_docker_client_says_so(tmp_path: Path) -> None:
    env = runner_env(dict(os.environ), BUILDKITE_COMMIT="c", HF_CACHE=str(tmp_path / "hf"))
    env["PATH"] = str(tmp_path / "empty-bin")
    done = run_task("run-tests", "--platform", "xpu", env=env, cwd=tmp_path)
    assert done.returncode == 127, done.stderr
    assert "error: command not found: docker" in done.stderr.splitlines()


def test_prune_is_opt_in(tmp_path: Path, standins: StandIns) -> None:
    standins.add("docker", "exit 0")
    env = runner_env(standins.env(), BUILDKITE_COMMIT="c", HF_CACHE=str(tmp_path / "hf"))
    assert run_task("run-tests", "--platform", "xpu", env=env, cwd=tmp_path).returncode == 0
    assert [a[0] for a in standins.argvs("docker")] == ["run"]
    done = run_task("run-tests", "--platform", "xpu", "--prune", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [a[:3] for a in standins.argvs("docker")][1:] == [
        ["run", "--pull=never", "--net=host"],
        ["system", "prune", "-f"],
    ]


@pytest.mark.parametrize(
    ("args", "env_extra", "message"),
    [
        (("--timeout", "soon"), {"BUILDKITE_COMMIT": "c"}, "error: --timeout: 'soon'"),
        ((), {"BUILDKITE": "true"}, "error: BUILDKITE_COMMIT must be set"),
        (("--", "pytest"), {"BUILDKITE_COMMIT": "c"}, "error: run-tests --platform xpu runs"),
    ],
)
def test_input_errors_exit_2_before_docker(
    args: tuple[str, ...],
    env_extra: dict[str, str],
    message: str,
    tmp_path: Path,
    standins: StandIns,
) -> None:
    standins.add("docker")
    env = runner_env(standins.env(), **env_extra)
    done = run_task("run-tests", "--platform", "xpu", *args, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(message), done.stderr
    assert standins.calls() == []


def test_xpu_options_are_refused_for_other_platforms(tmp_path: Path) -> None:
    done = run_task("run-tests", "--platform", "rocm", "--timeout", "5m", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "error: --timeout and --prune are for --platform xpu, not rocm\n"


def test_dry_run_prints_the_plan(tmp_path: Path, standins: StandIns) -> None:
    standins.add("docker")
    env = runner_env(standins.env(), BUILDKITE_COMMIT="c", HF_CACHE=str(tmp_path / "hf"))
    done = run_task("run-tests", "--platform", "xpu", "--dry-run", "--prune", env=env)
    assert done.returncode == 0, done.stderr
    assert "docker run --pull=never --net=host --ipc=host" in done.stdout
    assert "# always, also on failure/timeout/SIGTERM: remove container xpu_c_" in done.stdout
    assert "docker system prune -f" in done.stdout
    assert standins.calls() == []
    assert not (tmp_path / "hf").exists()


# --------------------------------------------------------------------------- the checkout's list

LIST = xputests.TESTS_FILE
NOTE = f"note: {LIST} is missing in "


def write_list(checkout: Path, text: str) -> Path:
    """A checkout (`.git` marks its top) whose test list file holds `text`."""
    (checkout / ".git").mkdir(parents=True, exist_ok=True)
    path = checkout / LIST
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def ran_program(standins: StandIns) -> str:
    (call,) = standins.argvs("docker")
    return call[-1]  # `bash -c PROGRAM`


def test_the_file_is_parsed_one_command_a_line() -> None:
    text = "# the XPU tests\n\n  cd /w  \n\t# indented comment\npytest -m 'a # b'\r\n"
    assert xputests.parse(text) == ("cd /w", "pytest -m 'a # b'")


def test_the_checkouts_file_is_what_runs(tmp_path: Path, standins: StandIns) -> None:
    """From a folder inside the checkout, as the script's `git rev-parse --show-toplevel`."""
    standins.add("docker", "exit 0")
    write_list(tmp_path / "omni", "# ours\necho one\n\npytest -v -s tests/x -m 'xpu and B60'\n")
    (tmp_path / "omni" / "sub").mkdir()
    env = runner_env(standins.env(), BUILDKITE_COMMIT="c", HF_CACHE=str(tmp_path / "hf"))
    done = run_task("run-tests", "--platform", "xpu", env=env, cwd=tmp_path / "omni" / "sub")
    assert done.returncode == 0, done.stderr
    commands = ("echo one", "pytest -v -s tests/x -m 'xpu and B60'")
    assert ran_program(standins) == xpu.program(commands)
    assert "note:" not in done.stderr


def test_a_missing_file_runs_the_built_in_list_with_one_note(
    tmp_path: Path, standins: StandIns
) -> None:
    standins.add("docker", "exit 0")
    env = runner_env(standins.env(), BUILDKITE_COMMIT="c", HF_CACHE=str(tmp_path / "hf"))
    done = run_task("run-tests", "--platform", "xpu", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ran_program(standins) == xpu.program(xpu.COMMANDS)
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and notes[0].startswith(NOTE + str(tmp_path)), done.stderr
    assert f"Put the commands in {tmp_path / LIST}" in notes[0]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no test commands"),
        ("# all commented out\n\n   \n", "no test commands"),
        (b"pytest \xff\n", "not UTF-8 text"),
        (None, "cannot read: a directory, not a regular file"),
    ],
    ids=["empty", "comments-only", "not-utf8", "a-directory"],
)
def test_a_file_without_commands_or_unreadable_is_an_error(
    text: str | bytes | None, problem: str, tmp_path: Path, standins: StandIns
) -> None:
    standins.add("docker")
    path = write_list(tmp_path, "")
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is None:
        path.unlink()
        path.mkdir()
    else:
        path.write_text(text)
    env = runner_env(standins.env(), BUILDKITE_COMMIT="c", HF_CACHE=str(tmp_path / "hf"))
    for extra in ((), ("--dry-run",)):
        done = run_task("run-tests", "--platform", "xpu", *extra, env=env, cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith(f"error: {path}: {problem}"), done.stderr
        assert done.stdout == ""
    assert standins.calls() == []


def test_dry_run_names_the_source_and_lists_the_commands(
    tmp_path: Path, standins: StandIns
) -> None:
    standins.add("docker")
    path = write_list(tmp_path, "echo from-the-file\npytest -v -s tests/y\n")
    env = runner_env(standins.env(), BUILDKITE_COMMIT="c", HF_CACHE=str(tmp_path / "hf"))
    done = run_task("run-tests", "--platform", "xpu", "--dry-run", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"# tests from: {path}" in lines
    assert ["# test 1: echo from-the-file", "# test 2: pytest -v -s tests/y"] == [
        line for line in lines if line.startswith("# test ")
    ]
    path.unlink()
    done = run_task("run-tests", "--platform", "xpu", "--dry-run", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"# tests from: built-in list ({xpu.BUILT_IN}; {path} is missing)" in done.stdout
    shown = [line for line in done.stdout.splitlines() if line.startswith("# test ")]
    assert shown == [f"# test {i}: {c}" for i, c in enumerate(xpu.COMMANDS, 1)]
    assert done.stderr.startswith(NOTE)
    assert standins.calls() == []


# --------------------------------------------------------------------------- real engine

TEST_FILES = {
    "pytest.ini": """\
        [pytest]
        markers =
            core_model: c
            advanced_model: a
            omni: o
            xpu: x
            B60: b
        """,
    "tests/act.py": """\
        import os
        import time


        def act(name):
            mask = os.environ.get("ZE_AFFINITY_MASK", "")
            print(f"RAN {name}", flush=True)
            if f"sleep-{name}" in mask:
                time.sleep(600)
            assert f"fail-{name}" not in mask
        """,
    "tests/diffusion/test_levels.py": """\
        import pytest
        from act import act


        @pytest.mark.core_model
        @pytest.mark.xpu
        @pytest.mark.B60
        def test_core():
            act("core")


        @pytest.mark.advanced_model
        @pytest.mark.xpu
        @pytest.mark.B60
        def test_advanced():
            act("advanced")
        """,
    "tests/diffusion/quantization/test_mxfp8_config.py": """\
        from act import act


        def test_mxfp8():
            act("mxfp8")
        """,
    "tests/dfx/test_omni.py": """\
        import pytest
        from act import act


        @pytest.mark.omni
        @pytest.mark.xpu
        @pytest.mark.B60
        def test_omni():
            act("omni")
        """,
    "tests/e2e/test_unselected.py": """\
        def test_never_selected_by_a_marker():
            raise AssertionError("selected without a marker")
        """,
}


@pytest.fixture(scope="module")
def tblib_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tblib 3.1.0 fetched on the host (containers have no index)."""
    cache = Path(os.environ.get("VLLM_OMNI_CI_WHEELS", "/tmp/vllm-omni-ci-wheels"))
    found = sorted(cache.glob("tblib-3.1.0-*.whl"))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
                str(cache),
                "tblib==3.1.0",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        found = sorted(cache.glob("tblib-3.1.0-*.whl"))
    assert found, f"no tblib 3.1.0 wheel in {cache}"
    return found[0]


@dataclass
class RunnerImage:
    """The runner's test image, rebuilt when missing (other suites may prune labelled images)."""

    docker: str
    context: Path
    tag: str

    def ensure(self) -> str:
        if not image_present(self.docker, self.tag):
            subprocess.run(
                [self.docker, "build", "-q", "-t", self.tag, str(self.context)],
                check=True,
                capture_output=True,
                env={**os.environ, "DOCKER_BUILDKIT": "1"},
                timeout=600,
            )
        return self.tag


@pytest.fixture(scope="module")
def test_image(
    tblib_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunnerImage]:
    from tests.conftest import engine_client

    docker = engine_client()
    # Only docker-marked tests use this image; their gate already skipped (or failed, CI=true).
    assert docker is not None, "no Docker engine answers"
    ctx = tmp_path_factory.mktemp("xpu-runner-image")
    tree = ctx / "tree"
    for name, body in TEST_FILES.items():
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
    (ctx / tblib_wheel.name).write_bytes(tblib_wheel.read_bytes())
    (ctx / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\n"
        f"LABEL {TEST_LABEL}\n"
        f"COPY {tblib_wheel.name} /tmp/\n"
        f"RUN pip install --break-system-packages --no-index /tmp/{tblib_wheel.name}\n"
        # The runner's `pip install tblib==3.1.0` must find it installed, offline.
        "ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_INDEX=1 PYTHONPATH=/workspace/vllm-omni/tests\n"
        "COPY tree /workspace/vllm-omni\n"
    )
    image = RunnerImage(docker, ctx, f"vllm-omni-ci-test/xpu-runner:{secrets.token_hex(4)}")
    image.ensure()
    yield image
    subprocess.run([docker, "rmi", "-f", image.tag], capture_output=True, check=False)


def containers(docker: str, commit: str) -> list[str]:
    out = subprocess.run(
        [docker, "ps", "-a", "--filter", f"name=xpu_{commit}_", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def image_present(docker: str, ref: str) -> bool:
    done = subprocess.run([docker, "image", "inspect", ref], capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture
def job(test_image: RunnerImage, docker_cli: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A commit whose CI image is the test image (the runner removes this tag afterwards)."""
    commit = f"xputest{secrets.token_hex(4)}"
    subprocess.run(
        [docker_cli, "tag", test_image.ensure(), f"xpu/vllm-omni-ci:{commit}"],
        check=True,
        timeout=60,
    )
    env = runner_env(dict(os.environ), BUILDKITE_COMMIT=commit, HF_CACHE=str(tmp_path / "hf"))
    # The job's checkout (the tests' cwd) holds its test list: the built-in one, as a file.
    write_list(tmp_path, "".join(f"{line}\n" for line in xpu.COMMANDS))
    yield env
    leftovers = containers(docker_cli, commit)
    if leftovers:
        subprocess.run([docker_cli, "rm", "-f", *leftovers], capture_output=True, check=False)
    subprocess.run(
        [docker_cli, "rmi", "-f", f"xpu/vllm-omni-ci:{commit}"], capture_output=True, check=False
    )


def ran(stderr: str) -> list[str]:
    return re.findall(r"\bRAN (\w+)\b", stderr)


@pytest.mark.docker
def test_passing_run(job: dict[str, str], docker_cli: str, tmp_path: Path) -> None:
    commit = job["BUILDKITE_COMMIT"]
    done = run_cli(
        "run-tests", "--platform", "xpu", env={**job, "ZE_AFFINITY_MASK": "0.1"}, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert ran(done.stderr) == ["core", "mxfp8", "advanced", "omni"], done.stderr
    assert "\n0.1\n" in done.stderr  # ZE_AFFINITY_MASK passed through and echoed
    assert "Requirement already satisfied: tblib==3.1.0" in done.stderr
    assert containers(docker_cli, commit) == []
    assert not image_present(docker_cli, f"xpu/vllm-omni-ci:{commit}")


@pytest.mark.docker
def test_failing_run_stops_at_the_first_failure(
    job: dict[str, str], docker_cli: str, tmp_path: Path
) -> None:
    """G56."""
    commit = job["BUILDKITE_COMMIT"]
    done = run_cli(
        "run-tests", "--platform", "xpu", env={**job, "ZE_AFFINITY_MASK": "fail-core"},
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert ran(done.stderr) == ["core"]
    assert containers(docker_cli, commit) == []
    assert not image_present(docker_cli, f"xpu/vllm-omni-ci:{commit}")


@pytest.mark.docker
def test_a_later_failure_keeps_its_status(
    job: dict[str, str], docker_cli: str, tmp_path: Path
) -> None:
    done = run_cli(
        "run-tests", "--platform", "xpu", env={**job, "ZE_AFFINITY_MASK": "fail-advanced"},
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert ran(done.stderr) == ["core", "mxfp8", "advanced"]
    assert containers(docker_cli, job["BUILDKITE_COMMIT"]) == []


@pytest.mark.docker
def test_timeout_kills_and_removes_the_container(
    job: dict[str, str], docker_cli: str, tmp_path: Path
) -> None:
    """G57: 124, and the container is gone (the script left it to its EXIT trap)."""
    commit = job["BUILDKITE_COMMIT"]
    # mxfp8 sleeps 600 s: only the timeout can end the run.
    done = run_cli(
        "run-tests", "--platform", "xpu", "--timeout", "8s",
        env={**job, "ZE_AFFINITY_MASK": "sleep-mxfp8"}, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 124, done.stderr
    assert ran(done.stderr) == ["core", "mxfp8"]
    assert "killing container xpu_" in done.stderr
    assert containers(docker_cli, commit) == []
    assert not image_present(docker_cli, f"xpu/vllm-omni-ci:{commit}")


@pytest.mark.docker
@pytest.mark.process  # SIGTERM sent to the running vllm-omni-ci
def test_sigterm_removes_the_container(
    job: dict[str, str], docker_cli: str, tmp_path: Path
) -> None:
    commit = job["BUILDKITE_COMMIT"]
    log = tmp_path / "runner.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [cli_path(), "run-tests", "--platform", "xpu"],
            env={**job, "ZE_AFFINITY_MASK": "sleep-core"},
            cwd=tmp_path,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            while "RAN core" not in log.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.2)
            running = containers(docker_cli, commit)
            assert running, log.read_text()
            labelled = subprocess.run(
                [docker_cli, "ps", "--filter", f"label={TEST_LABEL}", "--format", "{{.Names}}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            assert set(running) <= set(labelled)  # it carries the image's test label
            proc.send_signal(signal.SIGTERM)
            # core sleeps 600 s: the container goes only because the runner removes it.
            # The loop bounds the wait for `docker rm` to take effect; it is not a measure.
            code = proc.wait(timeout=120)
            left = containers(docker_cli, commit)
            bound = time.monotonic() + 60
            while left and time.monotonic() < bound:
                time.sleep(0.2)
                left = containers(docker_cli, commit)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert left == [], log.read_text()
    assert code == 128 + signal.SIGTERM, log.read_text()


@pytest.mark.docker
def test_cleanup_runs_after_an_earlier_failure(
    job: dict[str, str], docker_cli: str, tmp_path: Path
) -> None:
    """The script armed its trap after the build; a failure before the run still cleans up here."""
    commit = job["BUILDKITE_COMMIT"]
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    done = run_cli(
        "run-tests", "--platform", "xpu", env={**job, "HF_CACHE": str(blocker / "hf")},
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"error: HF_CACHE: cannot create {blocker / 'hf'}")
    assert not image_present(docker_cli, f"xpu/vllm-omni-ci:{commit}")


# --------------------------------------------------------------------------- the script shim

# Answers doctor like an engine that builds with BuildKit but cannot export.
PLAIN_DOCKER = """\
case "$1" in
  version) echo 20.10.0 ;;
  info) echo '{"ServerVersion": "20.10.0", "Driver": "overlay2"}' ;;
  buildx) exit 1 ;;
  build) case "$*" in *type=image*) cat >/dev/null; exit 1 ;; esac ;;
  run) exit 4 ;;
esac
exit 0
"""


@pytest.mark.process  # the drop-in shim starts vllm-omni-ci
def test_run_xpu_test_shim_builds_then_runs(tmp_path: Path, standins: StandIns) -> None:
    repo = tmp_path / "omni"
    (repo / "docker").mkdir(parents=True)
    (repo / "docker" / "Dockerfile.xpu").write_text("ARG VLLM_BASE=x\nFROM ${VLLM_BASE}\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "sub").mkdir()
    standins.add("docker", PLAIN_DOCKER)
    shim = Path(__file__).resolve().parents[1] / "scripts" / "intel" / "run-xpu-test.sh"
    env = runner_env(
        standins.env(),
        BUILDKITE_COMMIT="c0ffee",
        VLLM_VERSION="v0.29.0",
        HF_CACHE=str(tmp_path / "hf"),
    )
    done = subprocess.run(
        [str(shim)], env=env, cwd=repo / "sub", capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 4, done.stderr  # the container's status
    work = [
        a[:3]
        for a in standins.argvs("docker")
        if a[0] in ("pull", "build", "run") and "--help" not in a and "--label" not in a
    ]
    assert work == [
        ["pull", "vllm/vllm-openai-xpu:v0.29.0"],
        ["build", "-t", "xpu/vllm-omni-ci:c0ffee"],
        ["run", "--pull=never", "--net=host"],
    ]
    build = next(c for c in standins.calls("docker") if c["argv"][:2] == ["build", "-t"])
    assert build["cwd"] == str(repo)


@pytest.mark.docker
def test_missing_image_is_never_pulled(docker_cli: str, tmp_path: Path) -> None:
    """`--pull=never`: Docker Hub's `xpu/` namespace is not ours; exit 125 from docker run."""
    commit = f"xputestmissing{secrets.token_hex(4)}"
    env = runner_env(dict(os.environ), BUILDKITE_COMMIT=commit, HF_CACHE=str(tmp_path / "hf"))
    done = run_cli("run-tests", "--platform", "xpu", env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 125, done.stderr
    assert "No such image" in done.stderr or "not found" in done.stderr, done.stderr
    assert containers(docker_cli, commit) == []


@pytest.mark.process  # the drop-in shim starts vllm-omni-ci
def test_g55_shim_without_vllm_version_stops_before_any_build(
    tmp_path: Path, standins: StandIns
) -> None:
    """G55 through the script's path: `VLLM_VERSION must be set`, non-zero, nothing pulled/run."""
    repo = tmp_path / "omni"
    (repo / "docker").mkdir(parents=True)
    (repo / "docker" / "Dockerfile.xpu").write_text("FROM scratch\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    standins.add("docker", PLAIN_DOCKER)
    shim = Path(__file__).resolve().parents[1] / "scripts" / "intel" / "run-xpu-test.sh"
    env = runner_env(standins.env(), BUILDKITE_COMMIT="c0ffee", HF_CACHE=str(tmp_path / "hf"))
    env.pop("VLLM_VERSION", None)
    done = subprocess.run([str(shim)], env=env, cwd=repo, capture_output=True, text=True)
    assert done.returncode != 0
    assert "error: VLLM_VERSION must be set" in done.stderr.splitlines()
    assert [a[0] for a in standins.argvs("docker") if a[0] in ("pull", "build", "run")] == []
