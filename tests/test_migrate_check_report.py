"""`migrate --check`'s report, without running a build: the error line a failure quotes,
the verdicts of a failed side, and the Markdown that must fit a PR description."""

from __future__ import annotations

import json
import re

import pytest

from ci.migrate import known, report
from ci.migrate.compare import (
    AFTER_FAILED,
    BEFORE_FAILED,
    BOTH_FAILED,
    BUILD,
    Cell,
    Difference,
    agrees,
    compare,
)
from ci.migrate.matrix import SITUATIONS
from ci.migrate.progress import Progress
from ci.migrate.simulate import Outcome, Upload, error_line
from ci.platforms import Platform

COMPOSER = """\
Traceback (most recent call last):
  File "/tmp/x/.buildkite/common/scripts/upload_pipeline.py", line 900, in <module>
    main()
  File "/tmp/x/.buildkite/common/scripts/upload_pipeline.py", line 815, in _render_pipeline
    doc = yaml.safe_load(text)
          ^^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3/site-packages/yaml/composer.py", line 41, in get_single_node
    raise ComposerError("expected a single document in the stream",
yaml.composer.ComposerError: expected a single document in the stream
  in "<unicode string>", line 8, column 1:
    steps:
    ^
but found another document
  in "<unicode string>", line 16, column 1:
    ---
    ^
"""

NOT_FOUND = """\
Traceback (most recent call last):
  File "/tmp/x/.buildkite/common/scripts/upload_pipeline.py", line 700, in upload
    subprocess.run(["buildkite-agent", "pipeline", "upload"], check=True)
  File "/usr/lib/python3.11/subprocess.py", line 1950, in _execute_child
    raise child_exception_type(errno_num, err_msg, err_filename)
FileNotFoundError: [Errno 2] No such file or directory: 'buildkite-agent'
"""

TEMPLATE = """\
--- :rocm: Rendering the AMD pipeline
Traceback (most recent call last):
  File "/usr/bin/render", line 3, in <module>
    env.get_template(name)
jinja2.exceptions.TemplateNotFound: test-template-amd-omni.j2
"""


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (COMPOSER, "yaml.composer.ComposerError: expected a single document in the stream"),
        (NOT_FOUND, "FileNotFoundError: [Errno 2] No such file or directory: 'buildkite-agent'"),
        (TEMPLATE, "jinja2.exceptions.TemplateNotFound: test-template-amd-omni.j2"),
        (
            "+ cp .buildkite/amd/test-template-amd-omni.j2 x\n"
            "cp: cannot stat '.buildkite/amd/test-template-amd-omni.j2': No such file or"
            " directory\n",
            "cp: cannot stat '.buildkite/amd/test-template-amd-omni.j2': No such file or directory",
        ),
        (
            "bash: line 1: .buildkite/intel/scripts/bootstrap-intel-omni.sh: No such file or"
            " directory\n",
            "bash: line 1: .buildkite/intel/scripts/bootstrap-intel-omni.sh: No such file or"
            " directory",
        ),
        (
            "--- uploading\nerror: unknown source_file_dependencies 'x'; did you mean 'y'?\n"
            "note: nothing was uploaded\n",
            "error: unknown source_file_dependencies 'x'; did you mean 'y'?",
        ),
        (
            "ValueError: unknown key 'joy'; known: a, b\n",
            "ValueError: unknown key 'joy'; known: a, b",
        ),
        ("something went wrong\n  ^\n", "something went wrong"),  # no error line: the last words
        ("", ""),
    ],
    ids=[
        "yaml-composer",
        "file-not-found",
        "jinja",
        "cp",
        "bash",
        "ours",
        "plain",
        "none",
        "empty",
    ],
)
def test_the_error_line_is_the_line_that_names_the_error(output: str, expected: str) -> None:
    assert error_line(output) == expected


PIPELINE = "steps:\n  - label: test\n    command: pytest\n"
OLD_FAILURE = "bootstrap: exit 1: cp: cannot stat 'x.j2': No such file or directory"


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (("a: exit 1: ValueError: x",), (), BEFORE_FAILED),
        ((), ("a: exit 1: error: x",), AFTER_FAILED),
        (("a: exit 1: ValueError: x",), ("a: exit 1: error: y",), BOTH_FAILED),
    ],
    ids=["before", "after", "both"],
)
def test_a_failing_side_is_its_own_verdict_not_differs(
    before: tuple[str, ...], after: tuple[str, ...], expected: str
) -> None:
    """A broken old CI is not a difference (issue 35): nearly every cell of a checkout whose
    old CI cannot run was `differs`."""
    ran = (Upload("bootstrap", PIPELINE),)
    verdict, _ = compare(
        Outcome(() if before else ran, (), before),
        Outcome(() if after else ran, (), after),
        SITUATIONS[1],
        known.KNOWN,
        "cuda",
    )
    assert verdict == expected
    assert not agrees(verdict)


def _failed(change: str, situation: str, platform: Platform) -> Cell:
    return Cell(
        change,
        situation,
        platform,
        BEFORE_FAILED,
        (
            Difference(BUILD, "failed (before)", OLD_FAILURE, ""),
            Difference("bootstrap > test", "(job)", "absent", "present"),
        ),
    )


def test_the_summary_table_and_json_keep_a_failed_side_apart_from_differs() -> None:
    cells = [
        _failed("docs", "pr", Platform.ROCM),
        Cell("docs", "pr", Platform.CUDA, AFTER_FAILED, ()),
        Cell("docs", "pr", Platform.NPU, "differs", (Difference("j", "env", "a", "b"),)),
    ]
    table = report.render(cells, "table", seconds=1.0)
    assert "1 before failed, 1 after failed, 1 differs" in table.splitlines()[0]
    assert "before failed" in table.splitlines()[3]  # the grid's row
    shown = json.loads(report.render(cells, "json", seconds=1.0))
    assert shown["counts"][BEFORE_FAILED] == 1 and shown["counts"]["differs"] == 1
    assert [c["verdict"] for c in shown["cells"]] == [BEFORE_FAILED, AFTER_FAILED, "differs"]


def test_the_markdown_names_each_failure_once_with_its_cells_and_the_full_report() -> None:
    cells = [
        _failed(change, situation.name, platform)
        for change in ("docs", "registry")
        for situation in SITUATIONS
        for platform in (Platform.ROCM, Platform.CUDA)
    ]
    markdown = report.render(cells, "markdown", seconds=1.0, full="full.md")
    assert markdown.count(OLD_FAILURE) == 1
    assert f"- `{OLD_FAILURE}` — 28 cells: rocm: every build; cuda: every build" in markdown
    assert "bootstrap > test" not in markdown  # what a failed build did not upload is noise
    assert "`full.md`" in markdown
    assert "bootstrap > test" in report.full_markdown(cells, seconds=1.0, not_compared=())


def test_the_markdown_is_cut_to_fit_a_pr_description() -> None:
    """Thousands of distinct differences: the Markdown stays under `LIMIT` and says how many
    it left out and where they are."""
    cells = [
        Cell(
            "docs",
            f"pr {n}",
            Platform.CUDA,
            "differs",
            tuple(
                Difference(f"step {n} > job {j}", "env", "x" * 150, "y" * 150) for j in range(20)
            ),
        )
        for n in range(100)
    ]
    markdown = report.render(cells, "markdown", seconds=1.0, full="full.md")
    assert len(markdown) <= report.LIMIT
    assert re.search(r"^- … \d+ more causes left out here; all are in `full\.md`$", markdown, re.M)


def test_the_live_display_counts_cells_whose_two_builds_ended_and_shows_those_running(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = Progress(2, live=True)
    first = ("after", "docs", "pr", Platform.CUDA)
    shown.started(first)
    shown.ended(first)
    shown.started(("before", "docs", "pr", Platform.CUDA))
    text = str(shown.view())
    assert text.startswith("migrate --check: 0/2 cells done (")
    assert "  before: cuda: pr + docs change (" in text
    shown.ended(("before", "docs", "pr", Platform.CUDA))
    assert str(shown.view()).startswith("migrate --check: 1/2 cells done (")
    assert capsys.readouterr() == ("", "")  # live: the display, no lines
