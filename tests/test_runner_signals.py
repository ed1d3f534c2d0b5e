"""SIGTERM to `run-tests` ends it with 143, and no descendant survives.

The commands start a `setsid` child (new session: a group kill misses it), a
child that ignores TERM (needs KILL), and an orphan whose parent already
exited. The test watches the real process tree with psutil, by pid and start
time, and checks every process it saw is gone afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT, cli_path

# Distinct sleep lengths mark each kind of descendant.
HOSTILE = (
    "setsid sleep 301 &\nbash -c 'trap \"\" TERM; sleep 302' &\n(setsid sleep 304 &)\nsleep 303\n"
)
MARKS = ("sleep 301", "sleep 302", "sleep 303", "sleep 304")


@dataclass
class Watch:
    """A started process and every descendant seen while it ran."""

    proc: subprocess.Popen[str]
    seen: dict[tuple[int, float], str] = field(default_factory=dict)

    def poll_tree(self) -> None:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    self.seen[(child.pid, child.create_time())] = " ".join(child.cmdline())

    def has(self, marks: Sequence[str]) -> bool:
        return all(any(m in cmd for cmd in self.seen.values()) for m in marks)

    def wait_for(self, marks: Sequence[str], timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.proc.poll() is None:
            self.poll_tree()
            if self.has(marks):
                return
            time.sleep(0.05)
        raise AssertionError(f"descendants {marks} never appeared; saw {list(self.seen.values())}")

    def wait_exit(self, timeout: float) -> int:
        """The exit code; a process still running after `timeout` s is killed (code -9).

        `timeout` only bounds the wait, so that a hang fails instead of blocking.
        """
        end = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < end:
            self.poll_tree()
            time.sleep(0.05)
        try:
            return self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def survivors(self) -> list[str]:
        left = []
        for (pid, started), cmd in self.seen.items():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() == started and proc.status() != psutil.STATUS_ZOMBIE:
                    left.append(f"{pid} {cmd}")
        return left

    def cleanup(self) -> None:
        """Never leave sleeps behind, even when the test fails."""
        for pid, started in self.seen:
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() == started:
                    proc.kill()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def new_marker() -> str:
    """A `sleep` duration no other test uses: it marks this test's processes in any argv."""
    return f"{400 + os.getpid() % 500}.{uuid.uuid4().int % 10**9:09d}"


def marked(marker: str) -> list[str]:
    """Live processes anywhere (zombies aside) whose command line holds `marker`."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if marker in cmd and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(f"{proc.pid} {cmd}")
    return found


def end_marked(marker: str) -> None:
    """Kill what a failed test left: only processes whose argv holds its own marker.

    Again until none is found (bounded): a re-spawner may fork while we look.
    """
    for _ in range(50):
        found = [
            proc
            for proc in psutil.process_iter(["cmdline", "status"])
            if marker in " ".join(proc.info["cmdline"] or [])
            and proc.info["status"] != psutil.STATUS_ZOMBIE
        ]
        if not found:
            return
        for proc in found:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        time.sleep(0.05)


def run_to_file(
    args: Sequence[str], env: Mapping[str, str], cwd: Path = ROOT, timeout: float = 120
) -> tuple[int, str]:
    """`vllm-omni-ci ARGS`: its exit code and stderr, read from a file once it has exited.

    Not a pipe: a process it left running would hold a pipe open, and reading it
    would wait for that process instead of for the CLI. `timeout` only catches a hang.
    """
    import tempfile

    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [cli_path(), *args],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        err.seek(0)
        return code, err.read()


def start(args: Sequence[str], env: Mapping[str, str], cwd: Path = ROOT) -> Watch:
    proc = subprocess.Popen(
        [cli_path(), *args],
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return Watch(proc)


def job_env() -> dict[str, str]:
    return {
        **os.environ,
        "VLLM_CI_DOCKER_DISABLED": "1",
        "VLLM_CI_EXPECTED_GPU_COUNT": "0",
        "BUILDKITE_JOB_ID": f"test-runner-signals-{uuid.uuid4().hex[:8]}",
        "HF_HOME": f"/tmp/test-runner-signals-hf-{uuid.uuid4().hex[:8]}",
    }


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_signal_to_run_tests_ends_the_whole_tree(signum: int) -> None:
    env = {**job_env(), "TEST_COMMANDS": HOSTILE}
    watch = start(["run-tests", "--platform", "rocm"], env)
    try:
        watch.wait_for(MARKS)
        watch.proc.send_signal(signum)
        assert watch.wait_exit(timeout=60) == 128 + signum
        assert watch.survivors() == []
    finally:
        watch.cleanup()
        shutil.rmtree(f"/tmp/vllm-omni-native-{env['BUILDKITE_JOB_ID']}", ignore_errors=True)
        shutil.rmtree(env["HF_HOME"], ignore_errors=True)


@pytest.mark.parametrize("platform", ["rocm", "npu"])
def test_run_tests_ends_what_the_job_leaves_running(platform: str) -> None:
    """Issue 23 item 27c: a normal end of the job used to leave its background children."""
    marker = new_marker()
    # The job exits only once both children run `sleep` itself: a child still between fork
    # and exec would be listed under its parent's command line (a race on a busy machine).
    started = f'until [ "$(pgrep -xfc "sleep {marker}")" -ge 2 ]; do sleep 0.05; done'
    commands = f"sleep {marker} &\n(setsid sleep {marker} &)\n{started}\nexit 0\n"
    env = {**job_env(), "TEST_COMMANDS": commands}
    try:
        code, stderr = run_to_file(["run-tests", "--platform", platform], env)
        assert marked(marker) == []
        assert code == 0, stderr
        assert "run-tests: ended 2 process(es) the job left running:" in stderr
        assert sum(f"cmd=sleep {marker}" in line for line in stderr.splitlines()) == 2
    finally:
        end_marked(marker)
        shutil.rmtree(f"/tmp/vllm-omni-native-{env['BUILDKITE_JOB_ID']}", ignore_errors=True)
        shutil.rmtree(env["HF_HOME"], ignore_errors=True)


def test_run_tests_keeps_the_jobs_status_after_ending_its_leftovers() -> None:
    marker = new_marker()
    env = {**job_env(), "TEST_COMMANDS": f"(setsid sleep {marker} &)\nexit 4\n"}
    try:
        code, stderr = run_to_file(["run-tests", "--platform", "npu"], env)
        assert marked(marker) == []
        assert code == 4, stderr
    finally:
        end_marked(marker)


def test_sigterm_to_npu_run_tests_ends_the_whole_tree() -> None:
    env = {**job_env(), "TEST_COMMANDS": HOSTILE}
    watch = start(["run-tests", "--platform", "npu"], env)
    try:
        watch.wait_for(MARKS)
        watch.proc.send_signal(signal.SIGTERM)
        assert watch.wait_exit(timeout=60) == 143
        assert watch.survivors() == []
    finally:
        watch.cleanup()
