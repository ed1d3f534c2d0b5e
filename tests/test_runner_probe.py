"""Processes that try to escape: TERM-ignoring re-spawners in sessions of their own.

Each re-spawner ignores TERM and keeps forking children that ignore TERM too,
each in a new session (no group kill reaches them), so a child forked after
the last look is what used to escape. A unique `sleep` duration marks every
process of one run in its argv; after the CLI exits, no process anywhere may
still carry it. The cgroup path (where cgroup v2 is writable, as here when we
run as root) and the sweep alone (`VLLM_OMNI_CI_CGROUP=0`) are both checked.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.test_runner_signals import end_marked, marked, new_marker, run_to_file


def respawners(marker: str, count: int = 2, then: str = "", every: str = "0.02") -> str:
    """bash: start `count` re-spawners in new sessions, then `then` (default: sleep on).

    Each forks a child every `every` seconds; the children live until ended.
    """
    child = f"trap '' TERM; sleep {marker}"
    loop = f"trap '' TERM; while :; do setsid bash -c {shlex.quote(child)} & sleep {every}; done"
    starts = "\n".join(f"setsid bash -c {shlex.quote(loop)} &" for _ in range(count))
    return f"{starts}\n{then or f'sleep {marker}'}\n"


MODES = [
    pytest.param({}, id="cgroup-where-possible"),
    pytest.param({"VLLM_OMNI_CI_CGROUP": "0"}, id="sweep-only"),
]


@pytest.mark.parametrize("mode", MODES)
def test_term_ignoring_respawners_do_not_escape_the_timeout(
    mode: dict[str, str], tmp_path: Path
) -> None:
    """Issue 23 item 27b: 9 of 55 such runs used to leave a child running."""
    env = {**os.environ, **mode}
    for _ in range(3):  # each run gave several escapes before; three make a miss unlikely
        marker = new_marker()
        try:
            code, stderr = run_to_file(
                ["step", "--timeout", "2s", "--kill-after", "1s", "--", "bash", "-c",
                 respawners(marker)],
                env,
                tmp_path,
            )  # fmt: skip
            assert marked(marker) == []
            assert code == 137, stderr  # TERM was ignored: KILL was needed
        finally:
            end_marked(marker)


@pytest.mark.parametrize("mode", MODES)
def test_respawners_left_behind_by_a_normal_exit_are_ended(
    mode: dict[str, str], tmp_path: Path
) -> None:
    marker = new_marker()
    env = {**os.environ, **mode}
    try:
        code, stderr = run_to_file(
            ["step", "--", "bash", "-c", respawners(marker, then="sleep 1; exit 0", every="0.1")],
            env,
            tmp_path,
        )
        assert marked(marker) == []
        assert code == 0, stderr
        assert "step: ended " in stderr
    finally:
        end_marked(marker)


def _cgroup_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("0::"))


def test_the_command_runs_in_a_cgroup_of_its_own_where_one_can_be_made(tmp_path: Path) -> None:
    from ci import proctree

    probe = proctree.Cgroup.create()
    if probe is None:
        pytest.skip("no writable cgroup v2 here: the sweep alone is used (tested above)")
    probe.remove()
    base = os.path.dirname(probe.path)
    command = ["step", "--", "bash", "-c", "grep '^0::' /proc/self/cgroup"]
    code, stderr = run_to_file(command, os.environ, tmp_path)
    assert code == 0, stderr
    line = _cgroup_line(stderr)
    name = line.rsplit("/", 1)[-1]
    assert re.fullmatch(r"vllm-omni-ci-\d+-\d+", name), line
    assert not os.path.exists(os.path.join(base, name))  # removed once the command ended
    # Off: the command stays in our own cgroup.
    code, stderr = run_to_file(command, {**os.environ, "VLLM_OMNI_CI_CGROUP": "0"}, tmp_path)
    assert code == 0, stderr
    assert "vllm-omni-ci-" not in _cgroup_line(stderr)


def test_empty_cgroups_a_killed_run_left_are_removed_and_busy_ones_kept(tmp_path: Path) -> None:
    from ci import proctree

    probe = proctree.Cgroup.create()
    if probe is None:
        pytest.skip("no writable cgroup v2 here")
    probe.remove()
    base = os.path.dirname(probe.path)
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid runs no more: the "killed run" that left the cgroups
    empty = os.path.join(base, f"vllm-omni-ci-{gone.pid}-1")
    busy = os.path.join(base, f"vllm-omni-ci-{gone.pid}-2")
    os.mkdir(empty)
    os.mkdir(busy)
    holder = subprocess.Popen(["sleep", new_marker()])
    try:
        with open(os.path.join(busy, "cgroup.procs"), "w") as fh:
            fh.write(str(holder.pid))
        code, stderr = run_to_file(["step", "--", "true"], os.environ, tmp_path)
        assert code == 0, stderr
        assert not os.path.exists(empty)
        assert os.path.exists(busy) and holder.poll() is None  # in use: left alone
    finally:
        holder.kill()
        holder.wait()  # gone: the busy cgroup is empty and removable now
        for path in (empty, busy):
            with contextlib.suppress(OSError):
                os.rmdir(path)
