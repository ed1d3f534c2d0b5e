"""AMD suite selection: the A-row golden scenarios of pipeline spec §5.1."""

from __future__ import annotations

import re

import pytest

from ci.amd.suites import FALLBACK_NOTICE
from tests.inproc import run_inproc

READY = "READY_TESTS:test-amd-ready.yml"
MERGE = "MERGE_TESTS:test-amd-merge.yml"
NIGHTLY = "NIGHTLY_TESTS:test-amd-nightly.yml"


@pytest.mark.parametrize(
    ("row", "branch", "labels", "debug", "nightly", "expected", "notice"),
    [
        ("A1", "main", "", "", "0", [MERGE], False),
        ("A2", "main", "", "", "1", [NIGHTLY], False),
        ("A3", "main", "ready\nnightly-test", "", "0", [MERGE], False),
        ("A4", "feature", "ready", "", "0", [READY], False),
        ("A5", "feature", "merge-test\nnightly-test", "", "0", [MERGE, NIGHTLY], False),
        ("A6", "feature", "nightly-test\nready", "", "0", [READY, NIGHTLY], False),
        ("A7", "feature", "ready\nmerge-test", "", "0", [READY, MERGE], False),
        ("A8", "feature", "", "", "0", [READY], True),
        ("A9", "feature", "amd-test", "", "0", [READY], True),
        ("A10", "feature", "not-ready\nmerge-test-extra", "", "0", [READY], True),
        ("A11", "feature", "  ready  ", "", "0", [READY], False),
        ("A12", "feature", "ready", "", "1", [READY], False),
        ("A13", "feature", "weekly-test", "", "0", [READY], True),
        ("A14", "main", "", " NIGHTLY, merge, ready,", "0", [NIGHTLY, MERGE, READY], False),
        ("A18", "feature", "ready", "Merge", "0", [MERGE], False),
        ("commas", "feature", "merge-test,ready", "", "0", [READY, MERGE], False),
        # An empty branch is a value (argparse's `required` only wants the flag): not main.
        ("empty-branch", "", "", "", "0", [READY], True),
        ("empty-branch-labels", "", "merge-test", "", "1", [MERGE], False),
    ],
)
def test_selection(
    row: str, branch: str, labels: str, debug: str, nightly: str, expected: list[str], notice: bool
) -> None:
    done = run_inproc(
        "select-suites", "--branch", branch, "--labels", labels,
        "--debug-test-yaml", debug, "--nightly", nightly,
    )  # fmt: skip
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == expected
    assert (FALLBACK_NOTICE in done.stderr) is notice


@pytest.mark.parametrize(
    ("row", "args", "message"),
    [
        ("A15", ["--debug-test-yaml", "ready,ready"], "duplicate DEBUG_TEST_YAML suite 'ready'"),
        (
            "A16",
            ["--debug-test-yaml", "weekly"],
            "DEBUG_TEST_YAML entries must be 'merge', 'nightly', or 'ready', got 'weekly'",
        ),
        (
            "A16-before-dup",
            ["--debug-test-yaml", "weekly,weekly"],
            "DEBUG_TEST_YAML entries must be 'merge', 'nightly', or 'ready', got 'weekly'",
        ),
        ("A17", ["--debug-test-yaml", ", ,"], "DEBUG_TEST_YAML did not contain a test suite"),
        ("A19", ["--nightly", "2"], "NIGHTLY must be 0 or 1, got '2'"),
        ("A19-true", ["--nightly", "true"], "NIGHTLY must be 0 or 1, got 'true'"),
    ],
)
def test_selection_errors_exit_2(row: str, args: list[str], message: str) -> None:
    done = run_inproc("select-suites", "--branch", "feature", *args)
    assert done.code == 2
    assert done.stdout == ""
    assert done.stderr == f"error: {message}\n"


def test_missing_branch_and_bad_values_are_reported_together() -> None:
    done = run_inproc("select-suites", "--nightly", "2", "--debug-test-yaml", "weekly")
    assert done.code == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: the following arguments are required: --branch",  # argparse's words
        "error: NIGHTLY must be 0 or 1, got '2'",
        "error: DEBUG_TEST_YAML entries must be 'merge', 'nightly', or 'ready', got 'weekly'",
    ]


def test_an_unknown_label_is_warned_about_and_still_falls_back() -> None:
    """`--labels redy`: the ready fallback as before, with a warning naming the labels."""
    done = run_inproc("select-suites", "--branch", "feature", "--labels", "redy,bug")
    assert done.code == 0, done.stderr
    assert done.stdout == f"{READY}\n"
    assert done.stderr.splitlines() == [
        "warning: --labels: 'redy' is no tier's label; did you mean 'ready'? (the tiers' labels:"
        " ready, merge-test, nightly-test, weekly-test; any other selects nothing)",
        "warning: --labels: 'bug' is no tier's label (the tiers' labels:"
        " ready, merge-test, nightly-test, weekly-test; any other selects nothing)",
        FALLBACK_NOTICE,
    ]
    known = run_inproc("select-suites", "--branch", "feature", "--labels", "merge-test")
    assert "warning:" not in known.stderr


def test_an_empty_branch_option_selects_like_the_script() -> None:
    """`select_test_suites.py --branch ""` exits 0 with the ready fallback."""
    done = run_inproc("select-suites", "--branch", "")
    assert done.code == 0, done.stderr
    assert done.stdout == f"{READY}\n"
    assert done.stderr == f"{FALLBACK_NOTICE}\n"
    assert run_inproc("select-suites", "--branch=").stdout == f"{READY}\n"


@pytest.mark.parametrize("task", ["select-suites", "bootstrap"])
def test_help_documents_every_option(task: str) -> None:
    """`<task> --help` prints help (it was once taken for the branch / platform value)."""
    done = run_inproc(task, "--help")
    assert done.code == 0, done.stderr
    options = {
        "select-suites": ("--branch", "--labels", "--debug-test-yaml", "--nightly"),
        "bootstrap": ("--platform", "--repo", "--dry-run", "--labels"),
    }[task]
    for option in options:
        found = re.search(rf"^ +(-\w, )?{option}( [A-Z_]+)? +\S", done.stdout, re.M)
        assert found, (option, done.stdout)  # the flag, then its help text
    assert "READY_TESTS" not in done.stdout and done.stderr == ""


def test_labels_split_at_newlines_and_commas() -> None:
    """docs/differences.md, "`select-suites --labels` also splits at commas"."""
    for labels in ("ready\nmerge-test", "ready,merge-test", " ready , merge-test\n"):
        done = run_inproc("select-suites", "--branch", "feature", "--labels", labels)
        assert (done.code, done.stdout, done.stderr) == (0, f"{READY}\n{MERGE}\n", "")
