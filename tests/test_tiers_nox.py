"""The tier sessions under real nox: problems are the session's result, never nox's exit.

A tier the repo lacks for a platform is a skip with its reason; bad input or a failed tier
is `session.error` (nox records it as `aborted`) with the line `vllm-omni-ci tier` prints;
nox then goes on to the next session and `--report` has every session's result. Each run
is short: `--list`, a missing tier, bad input, or the fixture's one failing step.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ci.errors import Unavailable
from ci.platforms import Platform
from ci.tiers.model import Tier, load_tier
from tests.conftest import ROOT, SAMPLE, SHARED, need_shared

pytestmark = pytest.mark.skipif(shutil.which("nox") is None, reason="nox is not installed")


def nox(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["nox", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def results(report: Path) -> dict[str, tuple[str, str | None]]:
    return {
        s["name"]: (s["result"], s["reason"]) for s in json.loads(report.read_text())["sessions"]
    }


def test_a_missing_tier_names_the_platforms_that_have_it() -> None:
    with pytest.raises(Unavailable) as caught:
        load_tier(need_shared(SHARED / "vllm-omni"), Tier.WEEKLY, Platform.ROCM)
    # what `tier` prints, exit 2
    assert caught.value.problems == ("no weekly tier for rocm (cuda only)",)
    assert caught.value.reason == "no weekly tier for rocm (cuda only)"


def test_report_has_each_session_result(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    done = nox("--report", str(report), "-s", "ready", "merge", "--", "--platform", "npu", "--list")
    assert done.returncode == 0, done.stderr
    assert "# ready tier for npu: .buildkite/npu/test-npu-ready.yml" in done.stdout
    assert results(report) == {
        "ready": ("success", None),
        "merge": ("skipped", "no merge tier for npu (rocm, cuda only)"),
    }


def test_bad_input_aborts_each_session_and_nox_goes_on(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    done = nox("--report", str(report), "-s", "ready", "weekly", "--", "--platform", "bogus")
    assert done.returncode == 1
    said = "--platform: unknown platform 'bogus': allowed values are rocm (alias amd), cuda,"
    assert f"Session ready aborted: {said}" in done.stderr
    assert "Traceback" not in done.stderr
    for result, reason in results(report).values():  # both ran, each with the message
        assert result == "aborted" and (reason or "").startswith(said)
    assert list(results(report)) == ["ready", "weekly"]


def test_tiers_tag_lists_what_the_platform_has_and_skips_the_rest() -> None:
    done = nox("-t", "tiers", "--", "--platform", "rocm", "--list")
    assert done.returncode == 0, done.stderr
    for tier in ("ready", "merge", "nightly"):
        assert f"# {tier} tier for rocm: .buildkite/amd/test-amd-{tier}.yml" in done.stdout
        assert f"* {tier}: success" in done.stderr
    assert "* weekly: skipped (no weekly tier for rocm (no platform has one))" in done.stderr


def test_a_skipped_weekly_still_reaches_check_marks(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    done = nox("--report", str(report), "-s", "weekly", "check-marks", "--", "--repo", str(SAMPLE))
    assert done.returncode == 0, done.stderr
    assert "check-marks: 6 test files, 14 files scanned: OK" in done.stdout + done.stderr
    assert results(report) == {
        "weekly": ("skipped", f"no weekly tier for any platform in {SAMPLE}"),
        "check-marks": ("success", None),
    }


def test_a_failed_tier_is_an_error_of_its_session(tmp_path: Path) -> None:
    from tests.tiers_fixture import fixture_repo

    repo = fixture_repo(tmp_path / "target")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("BUILDKITE", "CI")},
        "BUILDKITE_COMMIT": "fixture",
        "HF_HOME": str(tmp_path / "hf"),
    }
    report = tmp_path / "r.json"
    done = nox(
        *("--report", str(report), "-s", "ready", "merge", "--", "--platform", "rocm"),
        *("--repo", str(repo), "--native", "--step", "Blocking failure"),
        *("--results", str(tmp_path / "results")),
        env=env,
    )
    assert done.returncode == 1
    assert "0 passed, 1 failed, 0 soft failures, 0 not runnable here" in done.stderr
    assert results(report) == {
        "ready": ("aborted", "a blocking step failed (exit 1); see the summary"),
        "merge": ("skipped", "no merge tier for rocm (no platform has one)"),
    }
