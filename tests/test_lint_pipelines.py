"""`lint-pipelines`: every test YAML checked whatever the diff, on the real corpus and on drift."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from ci.pipeline.lint import lint
from tests.conftest import ROOT, run_cli
from tests.corpus import MISSING_KEY, make_corpus

NIGHTLY = ".buildkite/cuda/test-nightly.yml"


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("lint") / "repo")


def test_only_uploader_test_yamls_are_linted(clean: Path) -> None:
    assert [r.path for r in lint(clean) if r.rendered] == [
        ".buildkite/cuda/test-merge.yml",
        NIGHTLY,
        ".buildkite/cuda/test-ready.yml",
        ".buildkite/cuda/test-weekly.yml",
        ".buildkite/npu/test-npu-nightly.yml",
        ".buildkite/npu/test-npu-ready.yml",
    ]


def test_registered_corpus_is_clean(clean: Path) -> None:
    done = run_cli("lint-pipelines", "--repo", str(clean))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 16 and all(line.startswith("ok   ") for line in lines)
    assert "ok   .buildkite/amd/test-amd-ready.yml: 25 step(s), 0 problem(s); schema only" in lines
    assert "ok   .buildkite/cuda/pipeline.yml: 6 step(s), 0 problem(s); schema only" in lines
    assert f"ok   {NIGHTLY}: 62 step(s), 0 problem(s); presets: b200_1, b200_2" in done.stdout


def test_real_corpus_reports_the_unregistered_key(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "repo", register_key=False)
    done = run_cli("lint-pipelines", "--repo", str(repo))
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1
    # The closest keys, not all ~55 of them on one line (and where the full list is).
    assert errors[0] == (
        f"error: {NIGHTLY}: unknown source_file_dependencies '{MISSING_KEY}' in step "
        "':full_moon: JoyAI-Image-Edit · Accuracy Test'; did you mean "
        "'diffusion_qwen_image_accuracy', 'diffusion_hunyuan_image3_accuracy', "
        "'diffusion_cosmos3_accuracy'? (all 53 keys: `source_file_dependencies:` in "
        ".buildkite/common/ci_source_file_dependencies.yml)"
    )
    assert f"FAIL {NIGHTLY}: 62 step(s), 1 problem(s)" in done.stdout


def test_unmodified_corpus_also_lacks_the_marker_registry(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "repo", pyproject=False, register_key=False)
    done = run_cli("lint-pipelines", "--repo", str(repo))
    assert done.returncode == 1
    pyproject = (repo / "pyproject.toml").resolve()
    assert done.stderr.count(f"error: missing pytest marker registry: {pyproject}") == 1
    assert f"'{MISSING_KEY}'" in done.stderr


def test_drift_in_steps_the_diff_would_never_reach(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "repo")
    path = repo / ".buildkite/npu/test-npu-ready.yml"
    document = yaml.safe_load(path.read_text())
    group = document["steps"][0]
    group["steps"] += [
        {
            "label": "typo",
            "mirror_hardwares": "a3_npu_3",
            "command": "c",
            "source_file_dependencies": "pkg/never/",
        },
        {"label": "nokey", "source_file_dependencies": "no_such_key", "command": "c"},
        {"label": "eight", "command": 'pytest -m "H100 and cards_8"'},
        {"label": "bad-field", "command": "c", "timeout_in_minutes": "soon"},
    ]
    document["steps"].append(
        {"group": "G", "if": "build.message =~ /x/", "steps": [{"label": "g", "command": "c"}]}
    )
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    reports = {r.path: r for r in lint(repo)}
    found = reports[".buildkite/npu/test-npu-ready.yml"].problems
    assert [p.split(";")[0] for p in found] == [
        "unknown mirror_hardwares 'a3_npu_3' in step 'typo'",
        "unknown source_file_dependencies 'no_such_key' in step 'nokey'",
        "cards_8 in step 'eight' has no preset 'h100_8'",
    ]
    notes = reports[".buildkite/npu/test-npu-ready.yml"].notes
    assert notes == ["step 'G': `if` not evaluable: build.message =~ /x/"]
    # With the step errors fixed, the schema check reports the bad field.
    group["steps"] = [s for s in group["steps"] if s["label"] not in ("typo", "nokey", "eight")]
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    found = {r.path: r for r in lint(repo)}[".buildkite/npu/test-npu-ready.yml"].problems
    assert found and all(
        p.endswith(
            "fails the Buildkite schema at steps/0/steps/5/timeout_in_minutes: "
            "'soon' is not of type 'integer'"
        )
        for p in found
    )
    assert any("MIRROR_HW unset" in p for p in found) and any("MIRROR_HW=b200" in p for p in found)


def test_no_test_pipelines_is_an_input_error(tmp_path: Path) -> None:
    """A --repo without pipelines is bad input (2), as for check-marks and shellcheck-steps."""
    done = run_cli("lint-pipelines", "--repo", str(tmp_path))
    assert done.returncode == 2
    assert (
        done.stderr
        == f"error: --repo: {tmp_path} has no test pipelines (.buildkite/*/test-*.yml)\n"
    )


def test_nox_session_runs_the_task(clean: Path) -> None:
    done = subprocess.run(
        ["nox", "-s", "lint-pipelines", "--", "--repo", str(clean)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"ok   {NIGHTLY}" in done.stdout + done.stderr


def test_other_buildkite_yamls_are_validated_as_they_are(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "repo")
    amd = repo / ".buildkite/amd/test-amd-ready.yml"
    document = yaml.safe_load(amd.read_text())
    document["steps"][0]["steps"][0]["timeout_in_minutes"] = "soon"
    amd.write_text(yaml.safe_dump(document, sort_keys=False))
    entry = repo / ".buildkite/cuda/pipeline.yml"
    entry.write_text(entry.read_text() + "\n---\nsteps:\n  - label: x\n    bogus: 1\n")
    (repo / ".buildkite/npu/pipeline-npu-a3.yml").write_text("not: [a, pipeline]\n")
    reports = {r.path: r for r in lint(repo)}
    assert ".buildkite/npu/pipeline-npu-a3.yml" not in reports
    assert ".buildkite/common/ci_mirror_hardwares.yml" not in reports
    assert reports[".buildkite/amd/test-amd-ready.yml"].problems == [
        "fails the Buildkite schema at steps/0/steps/0/timeout_in_minutes: "
        "'soon' is not of type 'integer'"
    ]
    assert reports[".buildkite/cuda/pipeline.yml"].problems == [
        "document 3: fails the Buildkite schema at steps/0: "
        "Additional properties are not allowed ('bogus' was unexpected)"
    ]


def test_the_sample_lints_clean() -> None:
    from tests.conftest import SAMPLE

    reports = lint(SAMPLE)
    assert {r.path for r in reports} >= {
        ".buildkite/cuda/test-ready.yml",
        ".buildkite/npu/test-npu-ready.yml",
    }
    assert [(r.path, r.problems) for r in reports if r.problems] == []
