"""The original scripts, rebuilt from the seed diffs in ../shared/seeds at test time.

Some seed diffs hold a whole script: one hunk that starts at line 1 of the new
file. Its "+" side (context and added lines) is the script as vLLM-Omni ships
it, so a test can run the original next to ours on the same inputs instead of
trusting a table typed in by hand. The scripts are never copied into the repo.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import SHARED, need_shared

SEED_001 = SHARED / "seeds" / "001_ace97fb1be942666"
RUN_AMD_TEST = SEED_001 / ".buildkite" / "amd" / "scripts" / "run-amd-test.sh.diff"
RUN_COV_SPLIT = SEED_001 / ".buildkite" / "common" / "scripts" / "run_cov_split.sh.diff"

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+1,(?P<count>\d+) @@")


def new_side(diff: Path) -> str:
    """The whole new file of a one-hunk diff; fails if the diff does not hold all of it."""
    lines = need_shared(diff).read_text().splitlines()
    hunks = [i for i, line in enumerate(lines) if line.startswith("@@")]
    assert len(hunks) == 1, f"{diff}: {len(hunks)} hunks, need one covering the whole file"
    header = _HUNK.match(lines[hunks[0]])
    assert header, f"{diff}: the hunk does not start at line 1: {lines[hunks[0]]}"
    out = []
    for line in lines[hunks[0] + 1 :]:
        if line.startswith("-") or line.startswith("\\"):
            continue
        out.append(line[1:])  # "+x", " x", and "" (an empty context line)
    assert len(out) == int(header["count"]), (diff, len(out), header["count"])
    return "\n".join(out) + "\n"


def write_script(diff: Path, dest: Path) -> Path:
    dest.write_text(new_side(diff))
    dest.chmod(0o755)
    return dest
