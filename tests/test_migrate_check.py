"""`migrate --check` on a seed-level vLLM-Omni checkout: the old CI and the new one agree.

The checkout is built at test time from ../shared (tests/migrate_fixture.py). The
whole matrix runs twice: as the user runs it (CLI, JSON), and with a planted
regression in the new path, which the check must report as exactly that job and
field.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ci.migrate import check, edits, known, report
from ci.migrate.compare import Cell, Difference
from ci.migrate.matrix import SITUATIONS
from ci.migrate.simulate import interpolate
from ci.platforms import Platform
from tests.conftest import ROOT, run_cli
from tests.migrate_fixture import make_checkout

DIFFERENCES = (ROOT / "docs" / "differences.md").read_text()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkout(tmp_path_factory.mktemp("check") / "vllm-omni").path


@pytest.fixture(scope="module")
def checked(checkout: Path) -> dict[str, Any]:
    head = _git_head(checkout)
    done = run_cli("migrate", "--check", "--repo", str(checkout), "--format", "json", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _git_head(checkout) == head  # the check works in clones of its own
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def _git_head(path: Path) -> str:
    """HEAD and the working tree's status: what the check must leave as it found them."""
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, check=True
    )
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=path, capture_output=True, text=True, check=True
    )
    return done.stdout + status.stdout


def test_every_cell_of_the_matrix_is_the_same_or_skipped_by_both(checked: dict[str, Any]) -> None:
    cells = checked["cells"]
    assert len(cells) == len(SITUATIONS) * 5 * len(Platform)
    assert {c["verdict"] for c in cells} <= {"same", "skipped by both"}
    assert any(c["verdict"] == "same" for c in cells)
    assert any(c["verdict"] == "skipped by both" for c in cells)


def test_each_remaining_difference_is_named_by_its_documented_heading(
    checked: dict[str, Any],
) -> None:
    named = {d["documented"] for c in checked["cells"] for d in c["differences"]}
    assert None not in named
    assert named == {row.heading for row in known.KNOWN}


@pytest.mark.parametrize("row", known.KNOWN, ids=lambda row: row.heading)
def test_every_known_difference_is_a_heading_of_docs_differences(row: known.Known) -> None:
    assert f"\n### {row.heading}\n" in DIFFERENCES


def test_a_planted_regression_is_reported_as_exactly_that_job_and_field(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def migrate_with_regression(clone: Path) -> None:
        edits.apply(clone)
        ready = clone / ".buildkite/cuda/test-ready.yml"
        text = ready.read_text()
        ready.write_text(text.replace("timeout_in_minutes: 20", "timeout_in_minutes: 25", 1))

    code = check.run(checkout, "json", migrate=migrate_with_regression)
    assert code == 1
    cells = json.loads(capsys.readouterr().out)["cells"]
    found = [
        (c["platform"], d["job"], d["field"], d["before"], d["after"])
        for c in cells
        for d in c["differences"]
        if d["documented"] is None
    ]
    assert found
    assert {(p, job.rsplit(" > ", 1)[-1], f, b, a) for p, job, f, b, a in found} == {
        ("cuda", "Simple · Model Executor Test", "timeout_in_minutes", "20", "25")
    }
    differing = {(c["change"], c["situation"]) for c in cells if c["verdict"] == "differs"}
    assert ("docs", "pr") not in differing  # a docs-only PR uploads no test pipeline
    assert any(situation == "pr ready" for _, situation in differing)


def test_the_table_and_markdown_name_the_cell_job_field_and_both_values() -> None:
    cell = Cell(
        "test file", "pr ready", Platform.CUDA, "differs",
        (Difference("Upload Ready Pipeline > x", "soft_fail", "true", "(none)"),),
    )  # fmt: skip
    same = Cell("docs", "pr", Platform.ROCM, "skipped by both", ())
    table = report.render([cell, same], "table", seconds=1.0)
    assert "differs (1 job)" in table and "skipped by both" in table
    assert "test file / pr ready / cuda: Upload Ready Pipeline > x: soft_fail: before true" in table
    markdown = report.render([cell, same], "markdown", seconds=1.0)
    assert re.search(r"^\| change \| situation \| cuda \| rocm \|$", markdown, re.M)
    assert markdown.startswith("## migrate --check: ")


def test_a_bad_format_is_one_error_line_exit_2(checkout: Path) -> None:
    done = run_cli("migrate", "--check", "--repo", str(checkout), "--format", "xml")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --format: 'xml' is not one of table, json, markdown")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$$EXTRA", "$EXTRA"),
        ("${BUILDKITE_COMMIT}-a3", "abc-a3"),
        ("$BUILDKITE_COMMIT", "abc"),
        ("${UNSET:-fallback}", "fallback"),
        ("$UNSET.", "."),
    ],
)
def test_upload_time_interpolation(text: str, expected: str) -> None:
    assert interpolate(text, {"BUILDKITE_COMMIT": "abc"}) == expected
