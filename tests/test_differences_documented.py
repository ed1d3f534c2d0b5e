"""Behaviours that differ from the original scripts are documented where users look.

Each test asserts the behaviour through the CLI and that docs/differences.md
has the entry that explains it, so neither can drift without the other.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import ROOT, StandIns, run_cli
from tests.test_covsplit import GATE, LIST_UPLOAD, env_for, run_both
from tests.test_covsplit import tree as tree

DIFFERENCES = (ROOT / "docs" / "differences.md").read_text(encoding="utf-8")


def headings() -> set[str]:
    return {line[4:].strip() for line in DIFFERENCES.splitlines() if line.startswith("### ")}


def test_cov_split_headers_go_to_stderr_and_say_so(tree: Path, standins: StandIns) -> None:
    standins.add("buildkite-agent", LIST_UPLOAD)
    done = run_both(tree, env_for(standins, tree, **GATE))
    assert done.code == 0, done.stderr
    # The group marker is `--- ` in Buildkite and `▶ ` in a terminal; the text is the same.
    for header in ("coverage: m offline", "coverage: m online"):
        assert header in done.stderr, header
        assert header not in done.stdout
    assert "The `--- pytest …` and `--- coverage: <id> <mode>` headers go to stderr" in headings()


def test_xpu_runner_outside_a_checkout_exits_2_and_say_so(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE")}
    done = run_cli("run-tests", "--platform", "xpu", env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: BUILDKITE_COMMIT must be set")
    assert "Outside a git checkout: exit 2, not git's 128" in headings()


def test_the_fidelity_entries_of_issue_32_are_there() -> None:
    """The cleanup's causes, the select-suites labels; the behaviours are asserted in
    tests/test_release_cleanup.py and tests/test_amd_suites.py."""
    assert "Failures say their cause" in headings()
    assert "`select-suites --labels` also splits at commas" in headings()
    assert "the following arguments are required: --branch" in DIFFERENCES
    assert "Every job gets its devices from one account, `--force` included" in headings()
