""".ci/run's promises that can be checked without running it: its helpers (.ci/lib.sh)
wait with a bound and fail with a clear message, stop only what they started, and
time each phase; .ci/run reuses running services and reports disk and durations.

.ci/run itself is what CI executes; these tests source .ci/lib.sh in a real bash.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT

LIB = ROOT / ".ci" / "lib.sh"
RUN = (ROOT / ".ci" / "run").read_text()


def bash(script: str, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        # As in .ci/run: whatever the script started is stopped when it exits.
        [
            "bash",
            "-c",
            f"set -euo pipefail; LOG_DIR={tmp_path}; source {LIB}\n"
            f"trap stop_started EXIT\n{script}",
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )


def test_a_service_that_dies_fails_the_wait_at_once_with_its_log(tmp_path: Path) -> None:
    started = time.monotonic()
    done = bash(
        "start svc bash -c 'echo listening failed: port in use; exit 3'\n"
        "wait_for 60 svc 'the service' false",
        tmp_path,
    )
    assert done.returncode == 1
    assert time.monotonic() - started < 10
    assert "error: the service exited before answering" in done.stderr
    assert "listening failed: port in use" in done.stderr


def test_a_service_that_never_answers_fails_after_the_bound(tmp_path: Path) -> None:
    started = time.monotonic()
    done = bash("start svc sleep 300\nwait_for 2 svc 'the service' false; echo unreached", tmp_path)
    took = time.monotonic() - started
    assert done.returncode == 1
    assert 2 <= took < 15
    assert "error: the service did not answer within 2s" in done.stderr
    assert "unreached" not in done.stdout


def test_a_service_that_answers_is_waited_for(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    done = bash(
        f"start svc bash -c 'sleep 1; touch {ready}; sleep 300'\n"
        f"wait_for 20 svc 'the service' test -e {ready}\n"
        "stop_started",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "the service answers after" in done.stdout


def test_stop_started_ends_only_what_this_run_started(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "301"])
    try:
        done = bash(
            "start mine sleep 302\n"
            "echo pid=${STARTED_PIDS[0]}\n"
            "stop_started\n"
            "kill -0 ${STARTED_PIDS[0]} 2>/dev/null && echo still-alive || echo stopped",
            tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().endswith("stopped")
        assert other.poll() is None, "a process this run did not start was stopped"
    finally:
        other.kill()
        other.wait()


def test_phases_print_their_durations(tmp_path: Path) -> None:
    done = bash('phase one\nsleep 1\nphase two\nfree_disk "at start"', tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "--- one"
    assert lines[1].startswith("+++ phase 'one' took ") and lines[1].endswith("s")
    assert int(lines[1].split()[-1].rstrip("s")) >= 1
    assert lines[2] == "--- two"
    assert lines[3].startswith("free disk at start: ")


def test_ci_run_reuses_services_stops_only_its_own_and_reports_disk_and_time() -> None:
    assert RUN.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in RUN
    assert 'free_disk "at start"' in RUN and 'free_disk "at end"' in RUN
    assert "reusing the running Docker engine" in RUN
    assert "reusing the registry at $REGISTRY" in RUN
    assert "trap cleanup EXIT" in RUN and "stop_started" in RUN
    assert "+++ total ${total}s" in RUN and "BUDGET=2700" in RUN
    assert "  start dockerd dockerd\n" in RUN
    assert "  start registry docker-registry serve .ci/registry.yml\n" in RUN
