"""`migrate --check` on a seed-level vLLM-Omni checkout: the old CI and the new one agree.

The checkout is built once per session from ../shared (tests/migrate_fixture.py);
no test writes to it (the check works in clones of its own). The whole 140-cell
matrix runs once per session, as the user runs it (`run_inproc`, JSON), and the
tests that judge the whole matrix read that one result (`checked`). The planted
regression in the new path runs only the cells its change can show in: CUDA's
(`check.run(platforms=..., change_names=...)`). The signal tests start real
processes, but only need the check to start, not to finish.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ci.errors import UserError
from ci.migrate import check, edits, known, report
from ci.migrate.compare import (
    AFTER_FAILED,
    BEFORE_FAILED,
    BOTH_FAIL,
    BOTH_FAILED,
    ERROR_ANNOTATION,
    Cell,
    Difference,
    compare,
)
from ci.migrate.matrix import SITUATIONS
from ci.migrate.simulate import Outcome, interpolate
from ci.platforms import Platform
from tests.conftest import ROOT, SHARED, cli_path, need_shared
from tests.gitrepo import GitRepo, sample_checkout
from tests.inproc import run_inproc
from tests.migrate_fixture import make_checkout

DIFFERENCES = (ROOT / "docs" / "differences.md").read_text()


@pytest.fixture(scope="session")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed-level checkout, built once; every test only reads it (a test that had to
    write would take its own `git clone --local` of it)."""
    return make_checkout(tmp_path_factory.mktemp("check") / "vllm-omni").path


@pytest.fixture(scope="session")
def checked(checkout: Path) -> dict[str, Any]:
    """The whole matrix, run once per session as `vllm-omni-ci migrate --check --format
    json` runs it (in this process: the same entry, argv and streams); its JSON report."""
    head = _git_head(checkout)
    argv = ("migrate", "--check", "--repo", str(checkout), "--format", "json")
    done = run_inproc(*argv, timeout=900)
    assert done.code == 0, done.stdout[-3000:] + done.stderr[-3000:]
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
    # The uploader's error annotation shows only where an upload fails (tested below).
    assert named == {row.heading for row in known.KNOWN if row.field != ERROR_ANNOTATION}


@pytest.mark.parametrize("row", known.KNOWN, ids=lambda row: row.heading)
def test_every_known_difference_is_a_heading_of_docs_differences(row: known.Known) -> None:
    assert f"\n### {row.heading}\n" in DIFFERENCES


# The cells the planted regression can show in: it edits CUDA's test-ready pipeline, so
# CUDA's column; a docs-only change (nothing uploaded to differ) and a test YAML change.
PLANTED_PLATFORMS = (Platform.CUDA,)
PLANTED_CHANGES = ("docs", "test YAML")


def test_a_planted_regression_is_reported_as_exactly_that_job_and_field(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the cells the change touches run; the rest of the matrix is `checked`'s."""

    def migrate_with_regression(clone: Path) -> None:
        edits.apply(clone)
        ready = clone / ".buildkite/cuda/test-ready.yml"
        text = ready.read_text()
        ready.write_text(text.replace("timeout_in_minutes: 20", "timeout_in_minutes: 25", 1))

    code = check.run(
        checkout, "json", migrate=migrate_with_regression,
        platforms=PLANTED_PLATFORMS, change_names=PLANTED_CHANGES,
    )  # fmt: skip
    assert code == 1
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert {(c["platform"], c["change"]) for c in cells} == {
        (p.value, change) for p in PLANTED_PLATFORMS for change in PLANTED_CHANGES
    }
    assert len(cells) == len(SITUATIONS) * len(PLANTED_PLATFORMS) * len(PLANTED_CHANGES)
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
    done = run_inproc("migrate", "--check", "--repo", str(checkout), "--format", "xml")
    assert done.code == 2
    assert done.stderr.startswith("error: --format: 'xml' is not one of table, json, markdown")


@pytest.mark.parametrize("names", [("docs", "no such change"), ()], ids=["unknown", "none"])
def test_a_selection_of_no_known_change_fails_before_any_build(
    checkout: Path, names: tuple[str, ...]
) -> None:
    """A typo in a caller's `change_names` must not leave a matrix that runs nothing."""
    with pytest.raises(ValueError, match=r"^change_names: "):
        check.run(checkout, "json", change_names=names)


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


# --------------------------------------------------------------------------- stopping


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name
)
def test_a_signal_stops_the_check_at_once_with_128_plus_n_and_leaves_nothing(
    checkout: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    """Buildkite sends KILL 10 s after its TERM: the check ends its builds and its scratch
    folder first (issue 32, item 7)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    # PYTHONFAULTHANDLER: were it still running after Buildkite's 10 s, SIGABRT makes it
    # print every thread's stack, and the failure shows where it waited.
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONFAULTHANDLER": "1"}
    argv = [cli_path(), "migrate", "--check", "--repo", str(checkout)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        # A build's record folder: the cells run.
        while not any(scratch.glob(f"{check.SCRATCH_PREFIX}*/record-*")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.05)
        sent = time.monotonic()
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"still running 10 s after {sig.name}:\n{err.decode()[-6000:]}")
        print(f"migrate --check stopped {time.monotonic() - sent:.2f} s after {sig.name}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err.decode()[-2000:]
    assert list(scratch.iterdir()) == []


# --------------------------------------------------------------------------- old CI missing


def test_only_the_platforms_whose_old_entry_is_committed_are_compared(tmp_path: Path) -> None:
    repo = GitRepo.create(tmp_path / "omni", origin=False)
    repo.write(".buildkite/cuda/pipeline.yml", "steps: []\n")
    repo.write(".buildkite/intel/scripts/bootstrap-intel-omni.sh", "exit 0\n")
    repo.commit()
    repo.write(".buildkite/npu/pipeline-npu.yml", "steps: []\n")  # not committed: not cloned
    platforms, missing = check.comparable(repo.path)
    assert set(platforms) == {Platform.CUDA, Platform.XPU}
    assert sorted(missing) == [
        "npu: .buildkite/npu/pipeline-npu.yml not found",
        "rocm: .buildkite/amd/scripts/bootstrap-amd-omni.sh not found",
    ]


def test_a_checkout_without_the_old_ci_says_which_entries_are_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The embedded sample has no `.buildkite/`: one note per platform, then one error."""
    repo = sample_checkout(tmp_path / "sample", ROOT / "examples/omni-sample")
    with pytest.raises(UserError) as raised:
        check.run(repo.path, "table")
    assert raised.value.code == 2
    assert raised.value.problems[0].startswith(f"--repo: {repo.path}: no platform's old CI entry")
    notes = capsys.readouterr().err.splitlines()
    assert "note: cuda: .buildkite/cuda/pipeline.yml not found; not compared" in notes
    assert len([n for n in notes if n.endswith("not found; not compared")]) == len(Platform)


def test_the_report_lists_the_platforms_not_compared() -> None:
    cell = Cell("docs", "pr", Platform.ROCM, "same", ())
    missing = ("cuda: .buildkite/cuda/pipeline.yml not found",)
    assert f"- {missing[0]}" in report.render([cell], "table", seconds=1.0, not_compared=missing)
    shown = json.loads(report.render([cell], "json", seconds=1.0, not_compared=missing))
    assert shown["not_compared"] == list(missing)


# --------------------------------------------------------------------------- both fail

KEY_STEP = "unknown source_file_dependencies 'joy' in step ':full_moon: Joy · Accuracy'"
OLD_FAILURE = f"Upload Nightly Pipeline: exit 1: ValueError: {KEY_STEP}; known: a, b, c"
NEW_FAILURE = f"Upload Nightly Pipeline: exit 1: error: {KEY_STEP}; did you mean 'a'? (all 3 keys)"
NEW_NOTE = "error\t**upload-pipeline failed for `x.yml`** (nothing was uploaded): - ..."


def test_a_cell_whose_sides_fail_for_the_same_cause_is_the_same() -> None:
    """The old uploader and ours both refuse an unregistered key (issue 32, item 27); our
    error annotation is the documented difference."""
    before = Outcome((), (), (OLD_FAILURE,))
    after = Outcome((), (NEW_NOTE,), (NEW_FAILURE,))
    verdict, found = compare(before, after, SITUATIONS[5], known.KNOWN, "cuda")
    assert verdict == f"{BOTH_FAIL} (Upload Nightly Pipeline: {KEY_STEP})"
    assert [(d.field, d.documented) for d in found] == [
        (ERROR_ANNOTATION, "Every problem at once, as `error:` lines, exit 1")
    ]
    cell = Cell("docs", "nightly", Platform.CUDA, verdict, found)
    table = report.render([cell], "table", seconds=1.0)
    assert "1 same: both fail" in table and "docs / nightly / cuda: Upload Nightly" in table


@pytest.mark.parametrize(
    "after",
    [
        NEW_FAILURE.replace("'joy'", "'other'"),  # another cause
        NEW_FAILURE.replace("exit 1", "exit 2"),  # another exit
        NEW_FAILURE.replace("Nightly", "Ready"),  # another step
    ],
)
def test_failures_of_another_cause_differ(after: str) -> None:
    verdict, found = compare(
        Outcome((), (), (OLD_FAILURE,)), Outcome((), (NEW_NOTE,), (after,)),
        SITUATIONS[5], known.KNOWN, "cuda",
    )  # fmt: skip
    assert verdict == BOTH_FAILED
    assert {d.field for d in found if d.documented is None} == {"failed (before)", "failed (after)"}


def test_one_side_failing_is_that_side_failed() -> None:
    verdict, _ = compare(
        Outcome((), (), ()), Outcome((), (NEW_NOTE,), (NEW_FAILURE,)),
        SITUATIONS[5], known.KNOWN, "cuda",
    )  # fmt: skip
    assert verdict == AFTER_FAILED


# --------------------------------------------------------------------------- what it shows

GITHUB_PR_LIMIT = 65_536  # characters of a pull request's description


def _cells(checked: dict[str, Any]) -> list[Cell]:
    return [
        Cell(c["change"], c["situation"], Platform(c["platform"]), c["verdict"],
             tuple(Difference(**d) for d in c["differences"]))
        for c in checked["cells"]
    ]  # fmt: skip


def test_the_markdown_of_the_seed_checkout_fits_a_pr_description(
    checked: dict[str, Any],
) -> None:
    """The whole matrix's report (`checked`'s cells) as `--format markdown` renders it."""
    markdown = report.render(_cells(checked), "markdown", seconds=100.0, full="full.md")
    print(f"markdown: {len(markdown)} characters")
    assert len(markdown) < GITHUB_PR_LIMIT
    assert markdown.startswith("## migrate --check: 35 builds x 4 platforms = 140 cells: ")


def test_progress_is_one_stderr_line_per_cell_and_stdout_only_the_report(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a terminal: a line as each cell's two builds end; stdout stays the report."""
    code = check.run(checkout, "json", platforms=(Platform.CUDA,), change_names=("docs",))
    assert code == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)["cells"]) == len(SITUATIONS)
    progress = [line for line in err.splitlines() if line.startswith("migrate --check: cuda: ")]
    assert len(progress) == len(SITUATIONS)
    assert progress[-1] == f"migrate --check: cuda: {progress[-1].split(': ')[2]}: 7/7"
    assert {line.split(": ")[2] for line in progress} == {
        f"{s.name} + docs change" for s in SITUATIONS
    }
    assert "migrate --check" not in out


@pytest.fixture(scope="session")
def bare_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """../shared/vllm-omni with ../shared/vllm-omni-scripts laid over it, nothing added: its
    old CI cannot run (CUDA's entry is the two-document design, AMD's template is missing)."""
    path = tmp_path_factory.mktemp("bare") / "vllm-omni"
    for source in (need_shared(SHARED / "vllm-omni"), SHARED / "vllm-omni-scripts"):
        shutil.copytree(source, path, dirs_exist_ok=True)
    GitRepo.create(path, origin=False).commit("vLLM-Omni as stored")
    return path


def test_a_checkout_whose_old_ci_fails_says_so_and_why_in_a_pr_sized_markdown(
    bare_checkout: Path, tmp_path: Path
) -> None:
    full = tmp_path / "full.md"
    argv = ("migrate", "--check", "--repo", str(bare_checkout), "--format", "markdown")
    done = run_inproc(*argv, "--full-report", str(full), timeout=900)
    print(f"markdown: {len(done.stdout)} characters; full report: {len(full.read_text())}")
    assert done.code == 1
    assert len(done.stdout) < GITHUB_PR_LIMIT
    summary = done.stdout.splitlines()[0]
    assert f" {BEFORE_FAILED}" in summary and "differs" in summary
    assert not re.search(r"[1-9]\d* differs", summary)  # a broken old CI is no difference
    assert "\n### The old CI failed" in done.stdout
    assert "yaml.composer.ComposerError: expected a single document in the stream`" in done.stdout
    assert "cp: cannot stat '.buildkite/amd/test-template-amd-omni.j2'" in done.stdout
    assert "exit 1: ^" not in full.read_text()
    assert f"`{full}`" in done.stdout
    assert f"note: full report (every cell): {full}" in done.stderr.splitlines()
