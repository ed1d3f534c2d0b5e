"""`step [OPTIONS] -- COMMAND...`: the planner exhaustively, the executor for real.

Real processes throughout: pytest on a tiny test file for JUnit and summaries,
`sleep` for leaks, timeouts and signals (watched with psutil by pid and start
time). Nothing of ours is mocked.
"""

from __future__ import annotations

import ast
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from ci.errors import UserError
from ci.redact import Redactor
from ci.runner import leaks
from ci.runner import step as step_module
from ci.runner.artifacts import mask_texts
from ci.runner.leaks import FAIL_LINE, PASS_LINE, Proc
from ci.runner.leaks import PREFIX as LEAK
from ci.runner.step import LEAK_FILE, LOG_FILE, SUMMARY_FILE, StepOptions, StepPlan, plan_step
from tests.conftest import ROOT, run_cli
from tests.inproc import run_inproc
from tests.test_runner_signals import (
    HOSTILE,
    MARKS,
    end_marked,
    marked,
    new_marker,
    run_to_file,
    start,
)

PRINT_ARGV = ("python3", "-c", "import sys; print('ARGV=' + repr(sys.argv[1:]))")


def argv_printed(stderr: str) -> list[str]:
    line = next(line for line in stderr.splitlines() if line.startswith("ARGV="))
    value = ast.literal_eval(line[len("ARGV=") :])
    assert isinstance(value, list)
    return value


def plan(environ: dict[str, str] | None = None, cwd: str = "/work", **options: Any) -> StepPlan:
    return plan_step(StepOptions(**options), ["pytest", "-m", "a and b"], environ or {}, cwd)


def problems(
    environ: dict[str, str] | None = None,
    argv: tuple[str, ...] = ("x",),
    cwd: str = "/work",
    **options: Any,
) -> list[str]:
    with pytest.raises(UserError) as info:
        plan_step(StepOptions(**options), list(argv), environ or {}, cwd)
    assert info.value.code == 2
    return list(info.value.problems)


# --------------------------------------------------------------------------- planner


def test_argv_is_kept_intact() -> None:
    assert plan().command.argv == ("pytest", "-m", "a and b")
    assert plan().command.timeout is None


def test_timeout_and_kill_after() -> None:
    made = plan(timeout="80m", kill_after="2m").command
    assert (made.timeout, made.grace) == (4800.0, 120.0)
    assert plan(timeout="1h30m").command.grace == 120.0  # default kill-after 2m


@pytest.mark.parametrize(
    ("options", "environ", "extra"),
    [
        ({"shard": "1/3"}, {}, ["--num-shards=3", "--shard-id=1"]),
        ({"shard": "0/1"}, {}, ["--num-shards=1", "--shard-id=0"]),
        (
            {"shard": "auto"},
            {"BUILDKITE_PARALLEL_JOB": "2", "BUILDKITE_PARALLEL_JOB_COUNT": "4"},
            ["--num-shards=4", "--shard-id=2"],
        ),
        ({"shard_list": "t1.py,t2.py::x,t3.py"}, {"BUILDKITE_PARALLEL_JOB": "1"}, ["t2.py::x"]),
        (
            {"shard_list": "a,b,c"},
            {"BUILDKITE_PARALLEL_JOB": "2", "BUILDKITE_PARALLEL_JOB_COUNT": "3"},
            ["c"],
        ),
        ({"shard_list": "a,b", "shard": "0/2"}, {}, ["a"]),
        ({}, {}, []),
        (
            {},
            {"BUILDKITE_PARALLEL_JOB": "1", "BUILDKITE_PARALLEL_JOB_COUNT": "2"},
            ["--num-shards=2", "--shard-id=1"],
        ),
        (
            {"shard": "none"},
            {"BUILDKITE_PARALLEL_JOB": "1", "BUILDKITE_PARALLEL_JOB_COUNT": "2"},
            [],
        ),
    ],
    ids=[
        "explicit",
        "single",
        "auto",
        "list",
        "list-count",
        "list-explicit",
        "not-parallel",
        "parallel-step-default",
        "opted-out",
    ],
)
def test_shard_arguments(
    options: dict[str, str], environ: dict[str, str], extra: list[str]
) -> None:
    assert list(plan(environ, **options).command.argv) == ["pytest", "-m", "a and b", *extra]


@pytest.mark.parametrize(
    ("options", "environ", "message"),
    [
        (  # G38: fail fast instead of `pytest ""`
            {"shard_list": "a,b,c"},
            {"BUILDKITE_PARALLEL_JOB": "3"},
            "shard index 3 is out of range for --shard-list (0..2)",
        ),
        (  # G39: require the variable instead of silently running element 0
            {"shard_list": "a,b,c"},
            {},
            "BUILDKITE_PARALLEL_JOB is not set: give --shard i/n, or run in a parallel step",
        ),
        (
            {"shard_list": "a,b,c"},
            {"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "4"},
            "--shard-list has 3 entries but the step has 4 shards",
        ),
        (
            {"shard_list": "a,,c"},
            {"BUILDKITE_PARALLEL_JOB": "0"},
            "--shard-list: empty entry in 'a,,c'",
        ),
        ({"shard": "3/3"}, {}, "shard index 3 is out of range for 3 shards (0..2)"),
        ({"shard": "0/0"}, {}, "--shard: 0 shards: the count must be 1 or more"),
        (
            {"shard": "auto"},
            {"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "0"},
            "BUILDKITE_PARALLEL_JOB_COUNT: 0 shards: the count must be 1 or more",
        ),
        ({"shard": "2"}, {}, "--shard: '2' is not i/n (0-based i), auto or none"),
        ({"shard": "x/2"}, {}, "--shard index: 'x' is not an integer"),
        (
            {"shard": "auto"},
            {"BUILDKITE_PARALLEL_JOB": "0"},
            "BUILDKITE_PARALLEL_JOB_COUNT is not set: give --shard i/n",
        ),
        (
            {"timeout": "soon"},
            {},
            "--timeout: 'soon' is not a duration (examples: 90s, 80m, 1h30m)",
        ),
        (
            {"summary_tail": 5},
            {},
            "--summary-tail needs --artifact-dir (the log and summary go there)",
        ),
        ({"leak_scope": "pod"}, {}, "--leak-scope: 'pod': allowed values are tree, all"),
    ],
    ids=[
        "G38",
        "G39",
        "count",
        "empty",
        "range",
        "zero-shards",
        "zero-parallel",
        "form",
        "index",
        "auto-count",
        "timeout",
        "tail",
        "scope",
    ],
)
def test_input_errors(options: dict[str, object], environ: dict[str, str], message: str) -> None:
    assert message in problems(environ, **options)


HUGE = "99999999999999999999"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--summary-tail", HUGE),
        ("--summary-tail", "-1"),
        ("--summary-tail", "1000001"),
        pytest.param("--summary-tail", "9" * 5000, id="tail-5000-digits"),  # int()'s limit
        ("--summary-tail", "ten"),
        ("--timeout", HUGE),
        pytest.param("--timeout", "9" * 400, id="timeout-inf"),  # float() makes it inf
        ("--timeout", "0"),
        ("--timeout", "-5"),
        ("--timeout", "1e9"),
        ("--kill-after", HUGE + "h"),
        ("--kill-after", "-1"),
        ("--leak-settle", HUGE),
        ("--leak-settle", "5 s"),
        ("--shard", f"{HUGE}/3"),
        ("--shard", "-1/2"),
        pytest.param("--shard", f"0/{'9' * 5000}", id="shard-5000-digits"),
    ],
)
def test_a_numeric_option_out_of_range_exits_2_before_the_command(
    tmp_path: Path, option: str, value: str
) -> None:
    """Issue 32 item 13: `--summary-tail 99999999999999999999` ran the command, then raised
    OverflowError. Every numeric option is checked first: one `error:` line, exit 2."""
    done = step(
        "--artifact-dir", "out", "--leak-check", f"{option}={value}", "--", "touch", "ran",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if not line.startswith("error: ")] == []
    assert option.lstrip("-") in done.stderr or "shard" in done.stderr
    assert not (tmp_path / "ran").exists()


def test_a_range_error_names_the_allowed_range() -> None:
    assert problems(summary_tail=10**20, artifact_dir="out") == (
        [f"--summary-tail: {10**20} is out of range: allowed 0 to 1000000 lines"]
    )
    assert problems(timeout="0") == [
        "--timeout: '0' is out of range: allowed more than 0, up to 168h (a week)"
    ]
    assert problems(kill_after="169h") == [
        "--kill-after: '169h' is out of range: allowed 0 to 168h (a week)"
    ]


def test_artifact_and_junit_dirs_blocked_by_a_file(tmp_path: Path) -> None:
    """A file where a directory must go is an input error before anything runs, not a traceback."""
    (tmp_path / "taken").write_text("x")
    with pytest.raises(UserError) as info:
        plan_step(
            StepOptions(artifact_dir="taken", junit="taken/sub/pytest.xml"),
            ["true"],
            {},
            str(tmp_path),
        )
    assert info.value.problems == (
        f"--artifact-dir: 'taken': {tmp_path}/taken is a file, not a directory",
        f"--junit: 'taken/sub/pytest.xml': {tmp_path}/taken is a file, not a directory",
    )


def test_an_artifact_dir_that_cannot_be_made_exits_2_before_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"  # /proc is the working directory: nothing can be made there
    done = step("--artifact-dir", "no-such/dir", "--", "touch", str(marker), cwd="/proc")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "error: --artifact-dir: cannot create /proc/no-such/dir: "
    )
    assert "Traceback" not in done.stderr
    assert not marker.exists()


def test_every_problem_is_reported_at_once() -> None:
    found = problems(argv=(), timeout="x", kill_after="y", leak_scope="z")
    assert len(found) == 4
    assert found[0].startswith("no command: put it after `--`")


def test_artifact_dir_copy_target(tmp_path: Path) -> None:
    app, checkout = tmp_path / "app", tmp_path / "checkout"
    app.mkdir()
    checkout.mkdir()
    env = {"BUILDKITE_BUILD_CHECKOUT_PATH": str(checkout)}
    made = plan(env, cwd=str(app), artifact_dir="artifacts/x")
    assert made.artifact_dir == f"{app}/artifacts/x"
    assert made.copy_to == f"{checkout}/artifacts/x"
    # Same directory (through a symlink): nothing to copy.
    (tmp_path / "link").symlink_to(checkout)
    assert plan(env, cwd=str(tmp_path / "link"), artifact_dir="a").copy_to is None
    assert plan({}, cwd=str(app), artifact_dir="a").copy_to is None
    assert plan(env, cwd=str(app), artifact_dir=f"{app}/abs/a").copy_to is None


def test_a_summary_keeps_the_argv_and_logs_through_the_door() -> None:
    """No `bash -c '… | tee'` around the command: the door writes the log."""
    made = plan(artifact_dir="out", summary_tail=10, junit="out/pytest.xml")
    assert made.command.argv == ("pytest", "-m", "a and b", "--junitxml=out/pytest.xml")
    assert made.log == "/work/out/pytest.log"
    assert made.summary == "/work/out/pytest-summary.txt"


# --------------------------------------------------------------------------- leak comparison (pure)


def test_g40_pid_reuse_is_a_leak() -> None:
    before = [Proc(100, 1000.0, name="python3")]
    after = [Proc(100, 2000.0, name="python3")]
    assert leaks.leaked(before, after) == after
    assert leaks.report(leaks.leaked(before, after))[-1] == FAIL_LINE


def test_g41_only_ps_is_new() -> None:
    before = [Proc(1, 1.0, name="init")]
    after = [Proc(1, 1.0, name="init"), Proc(200, 5.0, name="ps")]
    assert leaks.report(leaks.leaked(before, after)) == [PASS_LINE]


def test_g42_zombie_counts() -> None:
    zombie = Proc(300, 9.0, ppid=1, status="zombie", name="python3")
    found = leaks.leaked([], [zombie])
    assert found == [zombie]
    assert "status=zombie" in leaks.report(found)[0]


def test_own_pid_is_ignored() -> None:
    assert os.getpid() not in {p.pid for p in leaks.snapshot("all")}


def test_snapshots_see_a_real_child_by_identity() -> None:
    child = subprocess.Popen(["sleep", "351"])
    try:
        for scope in ("tree", "all"):
            found = {p.pid: p for p in leaks.snapshot(scope)}
            assert child.pid in found, scope
            assert found[child.pid].name == "sleep"
            assert found[child.pid].cmdline == "sleep 351"
            assert os.getpid() not in found  # never ourselves
        before = leaks.snapshot("tree")
        assert leaks.leaked(before, leaks.snapshot("tree")) == []
    finally:
        child.kill()
        child.wait()


# --------------------------------------------------------------------------- executor (CLI)


def step(
    *args: str, env: dict[str, str] | None = None, cwd: Path | str | None = None
) -> subprocess.CompletedProcess[str]:
    """`vllm-omni-ci step ARGS` in this process (`tests.inproc.run_inproc`, the console
    script's code path), shaped as the subprocess result these tests read; cwd defaults
    to the project root, as `conftest.run_cli` does."""
    done = run_inproc("step", *args, env=env, cwd=cwd or ROOT)
    return subprocess.CompletedProcess(
        ["vllm-omni-ci", "step", *args], done.code, done.stdout, done.stderr
    )


def step_process(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`vllm-omni-ci step ARGS` as a process of its own: for the tests whose subject is what
    the command leaves running or a timeout ending its tree (the leak check counts the
    step's own descendants, which in-process would be the test runner's)."""
    return run_cli("step", *args, env=env, cwd=cwd)


def test_exit_code_passes_through_and_args_stay_intact() -> None:
    done = step("--", *PRINT_ARGV, "a b", "c'd", "")
    assert done.returncode == 0
    assert argv_printed(done.stderr) == ["a b", "c'd", ""]
    assert step("--", "bash", "-c", "exit 7").returncode == 7
    assert step("--", "python3", "-c", "import os; os.abort()").returncode == 134


def test_a_command_that_cannot_start_says_why() -> None:
    done = step("--", "no-such-command-step-test", "x")
    assert done.returncode == 127
    assert "error: command not found: no-such-command-step-test" in done.stderr.splitlines()


def test_no_command_is_a_usage_error() -> None:
    done = step("--timeout", "1m")
    assert done.returncode == 2
    assert done.stderr.startswith("error: no command")


def test_a_command_that_names_its_shard_is_not_sharded_twice() -> None:
    environ = {"BUILDKITE_PARALLEL_JOB": "1", "BUILDKITE_PARALLEL_JOB_COUNT": "2"}
    problems: list[str] = []
    given = ["pytest", "--num-shards=2", "--shard-id=1"]
    assert step_module.shard_args("", "", environ, problems, given) == []
    assert step_module.shard_args("", "", environ, problems, ["pytest", "--shard-id", "1"]) == []
    assert problems == []
    step_module.shard_args("none", "a,b", environ, problems)
    assert problems == ["--shard none contradicts --shard-list"]


@pytest.mark.parametrize(
    ("argv", "sharded"),
    [
        (["pytest", "-sv", "tests"], True),
        (["/usr/bin/py.test", "tests"], True),
        (["python3", "-m", "pytest", "tests"], True),
        (["python3.11", "-m", "pytest"], True),
        (["python3", "tools/nightly/generate_nightly_perf_html.py"], False),
        (["python3", "-m", "pip", "list"], False),
        (["bash", "-c", 'pytest -sv "$TEST"'], False),
        (["timeout", "80m", "pytest"], False),
    ],
)
def test_the_parallel_step_default_shards_only_pytest(argv: list[str], sharded: bool) -> None:
    # A tool in a parallel step got `--num-shards=3 --shard-id=1` as unknown arguments,
    # and `bash -c '…'` got them as $0/$1 (no sharding, a misleading plan).
    environ = {"BUILDKITE_PARALLEL_JOB": "1", "BUILDKITE_PARALLEL_JOB_COUNT": "3"}
    extra = ["--num-shards=3", "--shard-id=1"] if sharded else []
    got = plan_step(StepOptions(), argv, environ, "/tmp").command.argv
    assert list(got) == [*argv, *extra]
    # An explicit --shard still appends to any command.
    explicit = plan_step(StepOptions(shard="auto"), argv, environ, "/tmp").command.argv
    assert list(explicit) == [*argv, "--num-shards=3", "--shard-id=1"]


def test_shard_from_buildkite_env() -> None:
    env = {**os.environ, "BUILDKITE_PARALLEL_JOB": "1", "BUILDKITE_PARALLEL_JOB_COUNT": "2"}
    done = step("--shard", "auto", "--", *PRINT_ARGV, "-m", "x and y", env=env)
    assert argv_printed(done.stderr) == ["-m", "x and y", "--num-shards=2", "--shard-id=1"]


def test_g38_out_of_range_fails_before_running(tmp_path: Path) -> None:
    env = {**os.environ, "BUILDKITE_PARALLEL_JOB": "3", "BUILDKITE_PARALLEL_JOB_COUNT": "3"}
    done = step("--shard-list", "a,b,c", "--", "touch", "ran", env=env, cwd=tmp_path)
    assert done.returncode == 2
    assert "error: --shard-list has 3 entries" not in done.stderr
    assert "error: shard index 3 is out of range for --shard-list (0..2)" in done.stderr
    assert not (tmp_path / "ran").exists()


def test_dry_run_runs_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "HF_TOKEN": "hf_stepdryrun"}
    done = step(
        "--dry-run",
        "--timeout",
        "80m",
        "--",
        "touch",
        "ran",
        "hf_stepdryrun",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0
    assert "hf_stepdryrun" not in done.stdout
    assert not (tmp_path / "ran").exists()
    assert "$ touch ran [REDACTED]" in done.stdout
    assert "# timeout: 4800s, then KILL after 120s" in done.stdout


SAMPLE_TESTS = """\
def test_ok():
    print("ok-output")

def test_fails():
    assert 1 == 2
"""


def test_artifacts_junit_and_summary_even_on_failure(tmp_path: Path) -> None:
    app, checkout = tmp_path / "app", tmp_path / "checkout"
    app.mkdir()
    checkout.mkdir()
    (app / "test_sample.py").write_text(SAMPLE_TESTS)
    env = {**os.environ, "BUILDKITE_BUILD_CHECKOUT_PATH": str(checkout)}
    env.pop("PYTEST_ADDOPTS", None)
    done = step(
        "--artifact-dir", "artifacts/sample",
        "--junit", "artifacts/sample/pytest.xml",
        "--summary-tail", "3",
        "--",
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_sample.py",
        env=env,
        cwd=app,
    )  # fmt: skip
    assert done.returncode == 1  # pytest's own code
    copied = checkout / "artifacts" / "sample"
    assert "<testsuite" in (copied / "pytest.xml").read_text()
    log = (copied / "pytest.log").read_text().splitlines()
    summary = (copied / "pytest-summary.txt").read_text().splitlines()
    assert summary == log[-3:]
    assert "1 failed, 1 passed" in summary[-1]
    assert "1 failed, 1 passed" in done.stderr  # still streamed live


# --------------------------------------------------------------------------- leaks


@pytest.mark.process
def test_leak_check_catches_a_leaked_sleep(tmp_path: Path) -> None:
    watch = start(
        [
            "step", "--leak-check", "--leak-settle", "1s", "--artifact-dir", "out",
            "--", "bash", "-c", "sleep 331 & (setsid sleep 332 &); exit 0",
        ],
        {**os.environ},
        cwd=tmp_path,
    )  # fmt: skip
    try:
        code = watch.wait_exit(timeout=60)
        stderr = watch.proc.stderr.read() if watch.proc.stderr else ""
        assert code == 1
        assert LEAK + FAIL_LINE in stderr.splitlines()
        assert "cmd=sleep 331" in stderr and "cmd=sleep 332" in stderr
        assert watch.survivors() == []  # listed, then ended
        assert "step: ended 2 process(es) the command left running:" in stderr
        assert "step: exit 1: the command passed, but it left processes behind" in stderr
        assert FAIL_LINE in (tmp_path / "out" / "process-cleanup.txt").read_text().splitlines()
    finally:
        watch.cleanup()


@pytest.mark.process
def test_a_summary_does_not_wait_for_a_leaked_process(tmp_path: Path) -> None:
    """Issue 32 item 6: with --summary-tail the tee waited for the background job, which
    held its pipe open, and then reported no leak. The leak is found and ended as without."""
    marker = new_marker()  # a sleep of 400 s or more; the step must end long before it
    try:
        code, stderr = run_to_file(
            [
                "step", "--summary-tail", "5", "--artifact-dir", "out",
                "--leak-check", "--leak-settle", "1s",
                "--", "bash", "-c", f"sleep {marker} & echo started",
            ],
            os.environ,
            tmp_path,
            timeout=30,
        )  # fmt: skip
        assert code == 1, stderr
        assert LEAK + FAIL_LINE in stderr.splitlines()
        assert f"cmd=sleep {marker}" in stderr
        assert marked(marker) == []
        assert (tmp_path / "out" / SUMMARY_FILE).read_text() == "started\n"
    finally:
        end_marked(marker)


@pytest.mark.process
def test_g42_a_zombie_counts_as_a_leak(tmp_path: Path) -> None:
    """A leaked parent that never reaps its exited child: both are listed, the child as a zombie."""
    # The child exits at once; the parent marks "forked" once it is a zombie (waitid
    # with WNOWAIT returns when the child has exited, and leaves it unreaped), then sleeps.
    zombie_maker = (
        "import os, time\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    os._exit(0)\n"
        "os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)\n"
        "open('forked', 'w').close()\n"
        "time.sleep(361)\n"
    )
    # The command returns only once the zombie exists, however slow the machine is.
    script = f"python3 -c {shlex.quote(zombie_maker)} & until [ -e forked ]; do sleep 0.05; done"
    watch = start(
        [
            "step", "--leak-check", "--leak-settle", "1s",
            "--", "bash", "-c", script,
        ],
        {**os.environ},
        cwd=tmp_path,
    )  # fmt: skip
    try:
        code = watch.wait_exit(timeout=60)
        stderr = watch.proc.stderr.read() if watch.proc.stderr else ""
        assert code == 1, stderr
        listed = [line for line in stderr.splitlines() if line.startswith(LEAK + "pid=")]
        assert any("status=zombie" in line for line in listed), listed
        # The parent's multi-line `python3 -c` stays on its one line (newlines escaped).
        assert any(
            "\\ntime.sleep(361)" in line and "status=zombie" not in line for line in listed
        ), listed
        assert LEAK + FAIL_LINE in stderr.splitlines()
        assert watch.survivors() == []
    finally:
        watch.cleanup()


@pytest.mark.process
def test_leak_check_passes_and_keeps_the_failing_code(tmp_path: Path) -> None:
    clean = step_process("--leak-check", "--artifact-dir", "out", "--", "true", cwd=tmp_path)
    assert clean.returncode == 0
    assert LEAK + PASS_LINE in clean.stderr.splitlines()
    assert (tmp_path / "out" / "process-cleanup.txt").read_text() == PASS_LINE + "\n"
    failing = step_process(
        "--leak-check", "--leak-settle", "0", "--", "bash", "-c", "sleep 333 & exit 3"
    )
    assert failing.returncode == 3
    assert LEAK + FAIL_LINE in failing.stderr.splitlines()


@pytest.mark.process
def test_a_passing_leak_check_is_not_read_as_the_step_passing(tmp_path: Path) -> None:
    """Issue 23 item 7: `--leak-check -- false` said `status=PASS …` and exited 1."""
    done = step_process("--leak-check", "--artifact-dir", "out", "--", "false", cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert "leak check: status=PASS leaked_processes=0" in lines
    assert PASS_LINE not in lines  # never the bare line, which reads as the step's verdict
    assert "step: exit 1: the command's own status" in lines
    # The file keeps the spec's verbatim line (§4.4), which tools grep for.
    assert (tmp_path / "out" / "process-cleanup.txt").read_text() == PASS_LINE + "\n"


# --------------------------------------------------------------------------- timeouts and signals


@pytest.mark.process
@pytest.mark.parametrize(
    ("script", "code"),
    [
        ("setsid sleep 341 & sleep 342", 124),  # G35: TERM suffices
        ("trap '' TERM; setsid sleep 343 & sleep 344", 137),  # G36: KILL needed
    ],
    ids=["G35-124", "G36-137"],
)
def test_timeout_ends_the_whole_tree(script: str, code: int) -> None:
    watch = start(
        ["step", "--timeout", "2s", "--kill-after", "1s", "--", "bash", "-c", script], os.environ
    )
    try:
        marks = [m for m in ("sleep 341", "sleep 342", "sleep 343", "sleep 344") if m in script]
        watch.wait_for(marks)
        assert watch.wait_exit(timeout=60) == code
        assert watch.survivors() == []
    finally:
        watch.cleanup()


WRITES_THEN_HANGS = "mkdir -p out && echo partial > out/result.txt && echo line-1 && sleep 371"


@pytest.mark.process
def test_artifacts_are_copied_after_a_timeout(tmp_path: Path) -> None:
    """The copy into the checkout is the last thing a timed-out step did not do before."""
    app, checkout = tmp_path / "app", tmp_path / "checkout"
    app.mkdir()
    checkout.mkdir()
    env = {**os.environ, "BUILDKITE_BUILD_CHECKOUT_PATH": str(checkout)}
    done = step_process(
        "--timeout", "2s", "--kill-after", "1s", "--artifact-dir", "out", "--summary-tail", "5",
        "--", "bash", "-c", WRITES_THEN_HANGS,
        env=env, cwd=app,
    )  # fmt: skip
    assert done.returncode == 124, done.stderr
    assert (checkout / "out" / "result.txt").read_text() == "partial\n"
    assert (checkout / "out" / "pytest-summary.txt").read_text() == "line-1\n"


@pytest.mark.process
def test_artifacts_are_copied_after_sigterm(tmp_path: Path) -> None:
    app, checkout = tmp_path / "app", tmp_path / "checkout"
    app.mkdir()
    checkout.mkdir()
    env = {**os.environ, "BUILDKITE_BUILD_CHECKOUT_PATH": str(checkout)}
    watch = start(
        ["step", "--artifact-dir", "out", "--", "bash", "-c", WRITES_THEN_HANGS], env, cwd=app
    )
    try:
        watch.wait_for(["sleep 371"])
        watch.proc.send_signal(signal.SIGTERM)
        assert watch.wait_exit(timeout=60) == 143
        assert (checkout / "out" / "result.txt").read_text() == "partial\n"
        assert watch.survivors() == []
    finally:
        watch.cleanup()


@pytest.mark.process
@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGQUIT, 131)], ids=["TERM", "QUIT"]
)
def test_a_signal_to_step_ends_the_whole_tree(signum: int, code: int) -> None:
    """Issue 32 item 21: SIGQUIT ended step and left the command's tree running."""
    watch = start(["step", "--kill-after", "1s", "--", "bash", "-c", HOSTILE], os.environ)
    try:
        watch.wait_for(MARKS)
        watch.proc.send_signal(signum)
        assert watch.wait_exit(timeout=60) == code
        assert watch.survivors() == []
    finally:
        watch.cleanup()


@pytest.mark.process
def test_a_second_signal_kills_the_tree_without_waiting_out_the_grace() -> None:
    """Issue 32 item 22: TERM, then INT while the tree (which ignores TERM) had its grace,
    waited the grace out. The exit is the first signal's."""
    marker = new_marker()
    watch = start(["step", "--", "bash", "-c", f"trap '' TERM INT; sleep {marker}"], os.environ)
    try:
        watch.wait_for([f"sleep {marker}"])
        watch.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # step is inside the grace (at most SIGNAL_GRACE, 5 s) now
        watch.proc.send_signal(signal.SIGINT)
        # wait_exit kills a step still running after 2.5 + 1 s (-9): well inside the grace.
        assert watch.wait_exit(timeout=2.5) == 143
        assert marked(marker) == []
    finally:
        watch.cleanup()
        end_marked(marker)


# ------------------------------------------------------------------------ what the command leaves


@pytest.mark.process
def test_what_the_command_leaves_running_is_ended_and_its_code_kept(tmp_path: Path) -> None:
    """Issue 23 item 27c: without --leak-check, background children used to outlive `step`."""
    marker = new_marker()
    script = f"sleep {marker} & (setsid sleep {marker} &); exit 4"
    try:
        code, stderr = run_to_file(["step", "--", "bash", "-c", script], os.environ, tmp_path)
        assert marked(marker) == []
        assert code == 4, stderr
        assert "step: ended 2 process(es) the command left running:" in stderr
    finally:
        end_marked(marker)


@pytest.mark.process
def test_a_signal_while_the_leak_check_settles_ends_the_leaked_processes(tmp_path: Path) -> None:
    """Issue 23 item 27a: a TERM during the settling used to leave the leaked sleep running."""
    marker = new_marker()
    watch = start(
        [
            "step", "--leak-check", "--leak-settle", "120s",
            "--", "bash", "-c", f"(sleep {marker} &); true",
        ],
        os.environ,
        cwd=tmp_path,
    )  # fmt: skip
    try:
        watch.wait_for([f"sleep {marker}"])
        # Settling: the command has ended, only its leaked sleep is left (re-parented to step).
        for _ in range(1200):
            children = psutil.Process(watch.proc.pid).children()
            with contextlib.suppress(psutil.Error):
                if [" ".join(c.cmdline()) for c in children] == [f"sleep {marker}"]:
                    break
            time.sleep(0.05)
        watch.proc.send_signal(signal.SIGTERM)
        assert watch.wait_exit(timeout=60) == 143
        assert marked(marker) == []
    finally:
        watch.cleanup()
        end_marked(marker)


# --------------------------------------------------------------------------- secrets in files


SECRET = "abcdef123"


def test_the_log_and_summary_have_secrets_masked(tmp_path: Path) -> None:
    """Issue 23 item 17: `FOO_TOKEN=… step --artifact-dir art -- bash -c env` wrote the token."""
    env = {**os.environ, "FOO_TOKEN": SECRET}
    # The second value is printed in two writes: a read may end between them.
    script = "env; printf 'split=abc'; sleep 0.3; printf 'def123\\n'; echo last-line"
    done = step(
        "--artifact-dir", "art", "--summary-tail", "1000", "--", "bash", "-c", script,
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "art" / LOG_FILE).read_text()
    summary = (tmp_path / "art" / SUMMARY_FILE).read_text()
    for text in (log, summary, done.stderr):
        assert SECRET not in text
        assert "FOO_TOKEN=[REDACTED]" in text.splitlines()
        assert "split=[REDACTED]" in text.splitlines()
    assert log.splitlines()[-1] == "last-line"


@pytest.mark.process
def test_process_cleanup_txt_has_secrets_masked(tmp_path: Path) -> None:
    marker = new_marker()
    env = {**os.environ, "FOO_TOKEN": SECRET}
    leaker = f'python3 -c "import time; time.sleep({marker})" "$FOO_TOKEN" &'
    try:
        code, stderr = run_to_file(
            [
                "step", "--leak-check", "--leak-settle", "0", "--artifact-dir", "out",
                "--", "bash", "-c", leaker,
            ],
            env,
            tmp_path,
        )  # fmt: skip
        assert code == 1, stderr
        report = (tmp_path / "out" / LEAK_FILE).read_text()
        assert f"time.sleep({marker}) [REDACTED]" in report
        assert SECRET not in report and SECRET not in stderr
        assert marked(marker) == []
    finally:
        end_marked(marker)


@pytest.mark.parametrize("where", ["../x", "{tmp}/elsewhere", "link/x", "sub/../../x"])
def test_an_artifact_dir_outside_the_working_directory_is_refused(
    tmp_path: Path, where: str
) -> None:
    """Issue 32 item 5: `--artifact-dir ../x` copied (and now would mask) outside the checkout."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "link").symlink_to(tmp_path)  # inside by its name, outside once resolved
    value = where.format(tmp=tmp_path)
    found = problems(argv=("true",), artifact_dir=value, cwd=str(app))
    assert [p for p in found if p.startswith("--artifact-dir: ")] == [
        f"--artifact-dir: {value!r} resolves outside the working directory {app}; "
        "give a directory inside it"
    ]
    done = step("--artifact-dir", value, "--", "touch", "ran", cwd=app)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: --artifact-dir: ")
    assert not (app / "ran").exists()


def test_the_text_files_the_command_writes_are_masked_binary_ones_kept(tmp_path: Path) -> None:
    """Issue 32 item 5: the files the command itself wrote into --artifact-dir were copied
    (and uploaded) unmasked. Text files are masked in place and in the copy; a binary file,
    and a file outside that a link points to, are left as they are."""
    app, checkout = tmp_path / "app", tmp_path / "checkout"
    app.mkdir()
    checkout.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text(f"token={SECRET}\n")
    binary = b"\0\1" + SECRET.encode() + b"\xff"
    script = (
        f'mkdir -p out/sub && printf "report: %s\\n" "$FOO_TOKEN" > out/sub/report.txt'
        f" && printf '{binary.decode('latin-1').encode('unicode_escape').decode()}' > out/blob.bin"
        f" && ln -s {outside} out/link.txt"
    )
    env = {**os.environ, "FOO_TOKEN": SECRET, "BUILDKITE_BUILD_CHECKOUT_PATH": str(checkout)}
    done = step("--artifact-dir", "out", "--", "bash", "-c", script, env=env, cwd=app)
    assert done.returncode == 0, done.stderr
    for top in (app / "out", checkout / "out"):
        assert (top / "sub" / "report.txt").read_text() == "report: [REDACTED]\n"
        assert (top / "blob.bin").read_bytes() == binary
        assert (top / "link.txt").is_symlink()
    assert outside.read_text() == f"token={SECRET}\n"


def test_mask_texts_leaves_what_is_not_utf8_text(tmp_path: Path) -> None:
    redact = Redactor([SECRET])
    files = {
        "plain.txt": f"a {SECRET} b\n".encode(),
        "late-nul.txt": b"x" * 9000 + b"\0" + SECRET.encode(),  # NUL after 8 KiB: text
        "latin1.txt": SECRET.encode() + b" caf\xe9",  # not UTF-8: binary
        "nul.bin": b"\0" + SECRET.encode(),
        "clean.txt": b"nothing secret\n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "clean.txt").chmod(0o600)
    assert mask_texts(str(tmp_path), redact) == []
    assert (tmp_path / "plain.txt").read_bytes() == b"a [REDACTED] b\n"
    assert (tmp_path / "late-nul.txt").read_bytes() == b"x" * 9000 + b"\0[REDACTED]"
    for name in ("latin1.txt", "nul.bin", "clean.txt"):
        assert (tmp_path / name).read_bytes() == files[name], name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)  # no temporary left


# --------------------------------------------------------------------------- a full disk


@pytest.fixture(params=["tmpfs", "dev-full"])
def full_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """An artifact directory where no write succeeds: a full tmpfs, or every file /dev/full."""
    where = tmp_path / "full"
    where.mkdir()
    if request.param == "dev-full":
        for name in (LOG_FILE, SUMMARY_FILE, LEAK_FILE):
            (where / name).symlink_to("/dev/full")
        yield where
        return
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        with contextlib.suppress(OSError), open(where / "filler", "wb", buffering=0) as fh:
            while fh.write(b"\0" * 4096):
                pass
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.process
def test_a_full_disk_keeps_the_commands_exit_code(full_dir: Path, tmp_path: Path) -> None:
    """Issue 23 item 26a: the tee's write error replaced the command's 3 with 1."""
    code, stderr = run_to_file(
        [
            "step", "--artifact-dir", str(full_dir), "--summary-tail", "5",
            "--", "bash", "-c", "seq 1 20000; exit 3",
        ],
        os.environ,
        tmp_path,
    )  # fmt: skip
    assert code == 3, stderr
    lines = stderr.splitlines()
    assert "20000" in lines  # the output still streams
    log_warnings = [line for line in lines if line.startswith(f"step: could not write {full_dir}")]
    assert [w for w in log_warnings if LOG_FILE in w] == [
        f"step: could not write {full_dir / LOG_FILE}: No space left on device; "
        "the output still streams"
    ]
    assert "Traceback" not in stderr


@pytest.mark.process
def test_a_full_disk_does_not_stop_the_leak_check(full_dir: Path, tmp_path: Path) -> None:
    """Issue 23 item 26b: writing process-cleanup.txt raised, and the leak was never ended."""
    marker = new_marker()
    try:
        code, stderr = run_to_file(
            [
                "step", "--leak-check", "--leak-settle", "1s", "--artifact-dir", str(full_dir),
                "--", "bash", "-c", f"(sleep {marker} &); true",
            ],
            os.environ,
            tmp_path,
        )  # fmt: skip
        assert marked(marker) == []
        assert "Traceback" not in stderr
        assert code == 1, stderr
        assert f"step: could not write {full_dir / LEAK_FILE}: " in stderr
        assert LEAK + FAIL_LINE in stderr.splitlines()
    finally:
        end_marked(marker)
