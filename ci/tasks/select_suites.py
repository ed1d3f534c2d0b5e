"""`select-suites`: the AMD suite selector alone (was select_test_suites.py; ci.amd.suites)."""

from __future__ import annotations

import sys

from ci.taskdef import task


@task(
    replaces=("select_test_suites.py",),
    help={
        "branch": "the build's branch, required (main selects merge, or nightly with --nightly 1;"
        " any other value, empty included, follows the labels)",
        "labels": "PR labels, separated by newlines or commas",
        "debug_test_yaml": "explicit comma list of suites (ready, merge, nightly); wins over all",
        "nightly": "0 or 1 (only matters on main)",
    },
)
def select_suites(
    branch: str | None = None,
    labels: str = "",
    debug_test_yaml: str = "",
    nightly: str = "0",
) -> None:
    """Print the AMD suites to run as NAME:file lines, like select_test_suites.py.

    Reads only its options; `--branch ""` is a branch that is not main. Bad input
    exits 2 with select_test_suites.py's messages.
    """
    from ci.amd import suites

    selection = suites.select_from_args(branch, labels, debug_test_yaml, nightly)
    for line in suites.label_warnings(labels):
        print(line, file=sys.stderr)
    if selection.notice:
        print(selection.notice, file=sys.stderr)
    for suite in selection.suites:
        print(suite.spec)
