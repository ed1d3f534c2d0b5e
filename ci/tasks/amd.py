"""`select-suites`: the AMD suite selector alone (the bootstrap is `bootstrap --platform rocm`)."""

from __future__ import annotations

import sys

from invoke.context import Context

from ci.taskkit import task

__all__ = ["select_suites"]


@task(
    help={
        "branch": "the build's branch, required (main selects merge, or nightly with --nightly 1;"
        " any other value, empty included, follows the labels)",
        "labels": "PR labels, separated by newlines or commas",
        "debug_test_yaml": "explicit comma list of suites (ready, merge, nightly); wins over all",
        "nightly": "0 or 1 (only matters on main)",
    }
)
def select_suites(
    c: Context,
    branch: str | None = None,
    labels: str = "",
    debug_test_yaml: str = "",
    nightly: str = "0",
) -> None:
    """Print the AMD suites to run as NAME:file lines, like select_test_suites.py.

    Reads only its options (the bootstrap reads NIGHTLY and DEBUG_TEST_YAML from
    the environment). `--branch ""` is a branch that is not main, as it was to
    select_test_suites.py. Errors (exit 2): a missing --branch, a --nightly other than
    0/1, and an empty, unknown or repeated --debug-test-yaml entry, with
    select_test_suites.py's messages (which name NIGHTLY and DEBUG_TEST_YAML).
    """
    from ci.amd import suites

    selection = suites.select_from_args(branch, labels, debug_test_yaml, nightly)
    if selection.notice:
        print(selection.notice, file=sys.stderr)
    for suite in selection.suites:
        print(suite.spec)
