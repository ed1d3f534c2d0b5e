""".ci/run's promises that can be checked without running it: its helpers (.ci/lib.sh)
time each phase; .ci/run leaves the engine, registry and base image to
`vllm-omni-ci sandbox up` / `down`, and reports disk and durations.

.ci/run itself is what CI executes; these tests source .ci/lib.sh in a real bash.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import ROOT

LIB = ROOT / ".ci" / "lib.sh"
RUN = (ROOT / ".ci" / "run").read_text()


def bash(script: str, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source {LIB}\n{script}"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )


def test_phases_print_their_durations(tmp_path: Path) -> None:
    done = bash('phase one\nphase two\nfree_disk "at start"', tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "--- one"
    assert re.fullmatch(r"\+\+\+ phase 'one' took \d+s", lines[1]), lines[1]
    assert lines[2] == "--- two"
    assert lines[3].startswith("free disk at start: ")


def test_ci_run_brings_the_sandbox_up_and_down_and_reports_disk_and_time() -> None:
    assert RUN.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in RUN
    assert 'free_disk "at start"' in RUN and 'free_disk "at end"' in RUN
    assert "\nvllm-omni-ci sandbox up\n" in RUN
    assert "vllm-omni-ci sandbox down" in RUN and "trap cleanup EXIT" in RUN
    assert "+++ total ${total}s" in RUN and "BUDGET=2700" in RUN
    # No second copy of the sandbox's logic stays in bash.
    for gone in ("dockerd", "docker-registry", "debootstrap", "apt-get", "docker import"):
        assert gone not in RUN, gone
