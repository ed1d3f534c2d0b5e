"""`lint-pipelines`: every test YAML checked whatever the diff, on the real corpus and on drift."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ci.pipeline.lint import lint
from tests.conftest import ROOT
from tests.corpus import MISSING_KEY, make_corpus
from tests.inproc import run_inproc

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
    done = run_inproc("lint-pipelines", "--repo", str(clean))
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 16 and all(line.startswith("ok   ") for line in lines)
    assert "ok   .buildkite/amd/test-amd-ready.yml: 25 step(s), 0 problem(s); schema only" in lines
    assert "ok   .buildkite/cuda/pipeline.yml: 6 step(s), 0 problem(s); schema only" in lines
    assert f"ok   {NIGHTLY}: 62 step(s), 0 problem(s); presets: b200_1, b200_2" in done.stdout


def test_real_corpus_reports_the_unregistered_key(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "repo", register_key=False)
    done = run_inproc("lint-pipelines", "--repo", str(repo))
    assert done.code == 1
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
    done = run_inproc("lint-pipelines", "--repo", str(repo))
    assert done.code == 1
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
    done = run_inproc("lint-pipelines", "--repo", str(tmp_path))
    assert done.code == 2
    assert (
        done.stderr == f"error: --repo: {tmp_path} has no test pipelines "
        "(.buildkite/**/test-*.yml, outside amd/)\n"
    )


@pytest.mark.process
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


# ------------------------------------- issue 32 item 23: what Buildkite or the uploader refuses

READY = ".buildkite/cuda/test-ready.yml"
BOOTSTRAP = ".buildkite/cuda/bootstrap-upload-steps.yml"


def sample_copy(dest: Path) -> Path:
    """The sample's pipelines and marker registry, to edit (lint reads no git)."""
    from tests.conftest import SAMPLE

    shutil.copytree(SAMPLE / ".buildkite", dest / ".buildkite")
    shutil.copy2(SAMPLE / "pyproject.toml", dest / "pyproject.toml")
    return dest


def step_text(label: str, extra: str = "") -> str:
    """One CPU step of the sample's shape, `extra` (YAML lines) added to its fields."""
    lines = [
        f'  - label: "{label}"',
        "    commands:",
        "      - \"pytest -sv tests/model_executor -m 'core_model and cpu'\"",
        "    mirror_hardwares: l4_1",
        *(f"    {line}" for line in extra.splitlines()),
    ]
    return "\n".join(lines) + "\n"


def problems_with(tmp_path: Path, rel: str, added: str) -> list[str]:
    repo = sample_copy(tmp_path / "repo")
    path = repo / rel
    path.write_text(path.read_text().rstrip("\n") + "\n" + added)
    return {r.path: r for r in lint(repo)}[rel].problems


def test_an_if_that_does_not_parse_is_an_error(tmp_path: Path) -> None:
    added = step_text("Broken if", 'if: build.branch == "main" &&') + step_text(
        "Outside the subset", "if: build.message =~ /^wip/ || build.source == 'schedule'"
    )
    found = problems_with(tmp_path, READY, added)
    assert found == [
        "step 'Broken if': `if` does not parse (the expression ends where a value is "
        'expected): build.branch == "main" &&'
    ]


def test_an_if_that_does_not_parse_in_any_buildkite_yaml(tmp_path: Path) -> None:
    """Files Buildkite uploads as they are (schema only) are checked the same way."""
    added = '  - label: "x"\n    command: "true"\n    if: (build.branch == "main"\n'
    (problem,) = problems_with(tmp_path, BOOTSTRAP, added)
    assert problem.startswith("step 'x': `if` does not parse (expected ')', got 'the end')")


def test_depends_on_cycles_and_self_references_are_errors(tmp_path: Path) -> None:
    added = (
        step_text("A", "key: a\ndepends_on: b")
        + step_text("B", "key: b\ndepends_on:\n  - step: a")
        + step_text("Self", "key: self\ndepends_on: [self]")
        + '  - group: "G"\n    key: g\n    steps:\n'
        + "\n".join("  " + line for line in step_text("In G", "depends_on: g").splitlines())
        + "\n"
        + step_text("Outside", "depends_on: upload-ready-pipeline")  # another upload's step
    )
    assert problems_with(tmp_path, READY, added) == [
        "step 'Self' (key 'self'): depends_on 'self', itself; it can never start",
        "step 'In G': depends_on 'g', the group it is in; it can never start",
        "depends_on cycle: a → b → a (steps 'A' (key 'a'), 'B' (key 'b')); none of them can start",
    ]


def test_a_cycle_through_a_group_dependency(tmp_path: Path) -> None:
    """A group's steps start only after the group's own depends_on: X waits for a step of
    the group, the group waits for X."""
    added = (
        step_text("X", "key: x\ndepends_on: inner")
        + '  - group: "G"\n    key: g\n    depends_on: x\n    steps:\n'
        + "\n".join("  " + line for line in step_text("Inner", "key: inner").splitlines())
        + "\n"
    )
    (problem,) = problems_with(tmp_path, READY, added)
    assert problem.startswith("depends_on cycle: x → inner → x (steps 'X' (key 'x'), 'Inner'")


def test_a_key_used_twice_is_an_error(tmp_path: Path) -> None:
    added = step_text("First", "key: same") + step_text("Second", "key: same")
    assert problems_with(tmp_path, READY, added) == [
        "step 'Second' (key 'same'): key 'same' is already the key of step 'First' "
        "(key 'same'); Buildkite refuses a key used twice"
    ]


@pytest.mark.parametrize("value", ["0", "-1", "1000000000", "1001", "2.5", "many", '"4"', "true"])
def test_parallelism_outside_1_to_1000_is_an_error(tmp_path: Path, value: str) -> None:
    found = problems_with(tmp_path, READY, step_text("Sharded", f"parallelism: {value}"))
    shown = repr(yaml.safe_load(value))
    assert found == [
        f"{tmp_path / 'repo' / READY}: step 'Sharded': `parallelism` must be a whole number "
        f"of jobs from 1 to 1000, got {shown}"
    ]


def test_parallelism_in_range_lints_clean(tmp_path: Path) -> None:
    added = step_text("Sharded", "parallelism: 1000") + step_text("One", "parallelism: 1")
    assert problems_with(tmp_path, READY, added) == []


def test_each_refusal_is_an_error_line_naming_the_file(tmp_path: Path) -> None:
    repo = sample_copy(tmp_path / "repo")
    path = repo / READY
    added = step_text("A", "key: a\ndepends_on: a") + step_text("P", "parallelism: 0")
    path.write_text(path.read_text().rstrip("\n") + "\n" + added)
    done = run_inproc("lint-pipelines", "--repo", str(repo))
    assert done.code == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        f"error: {READY}: step 'A' (key 'a'): depends_on 'a', itself; it can never start",
        f"error: {path}: step 'P': `parallelism` must be a whole number of jobs from 1 to "
        "1000, got 0",
    ]
    assert f"FAIL {READY}: " in done.stdout


# ------------------------- issue 32 item 25: an earlier layout (flat `.buildkite/test-*.yml`)


def flat_layout(dest: Path) -> Path:
    """The sample as a vLLM-Omni tree of an earlier layout: its CUDA test YAMLs flat in
    `.buildkite/` (the uploader was handed `.buildkite/test-ready.yml`), plus a disabled,
    fully commented-out one."""
    repo = sample_copy(dest)
    for path in sorted((repo / ".buildkite").glob("[ac][mu]d*/test-*.yml")):  # amd, cuda
        path.rename(repo / ".buildkite" / path.name)
    (repo / ".buildkite/test-old.yml").write_text("# steps:\n#   - label: old\n#     command: x\n")
    return repo


def test_a_flat_test_yaml_is_judged_as_the_uploader_renders_it(tmp_path: Path) -> None:
    """lint-pipelines took flat test YAMLs for plain Buildkite files (schema only): one error
    per `mirror_hardwares`/`source_file_dependencies` key on files upload-pipeline renders
    cleanly."""
    from ci.pipeline.registries import Registries
    from ci.pipeline.upload import render_file

    repo = flat_layout(tmp_path / "repo")
    reports = {r.path: r for r in lint(repo)}
    for rel in (".buildkite/test-ready.yml", ".buildkite/test-merge.yml"):
        rendered = render_file(
            repo, repo / rel, scope="all", changed=None, mirror_hw="",
            registries=Registries.for_repo(repo),
        )  # fmt: skip
        assert rendered.problems == []  # what upload-pipeline renders cleanly ...
        assert reports[rel].rendered and reports[rel].problems == []  # ... lints clean
    # An AMD suite of that layout is the AMD template's data, as upload-pipeline says.
    amd = reports[".buildkite/test-amd-ready.yml"]
    assert not amd.rendered and amd.problems == []
    # The disabled file is refused as the uploader refuses it, with the reason.
    assert reports[".buildkite/test-old.yml"].problems == [
        f"invalid pipeline YAML: {repo / '.buildkite/test-old.yml'} "
        "(empty: no YAML document, or only comments)"
    ]


def test_amd_suites_and_bootstrap_files_are_not_uploader_test_yamls() -> None:
    from ci.pipeline.judge import is_uploader_test_yaml

    assert is_uploader_test_yaml(".buildkite/test-ready.yml")
    assert is_uploader_test_yaml(".buildkite/cuda/test-ready.yml")
    assert is_uploader_test_yaml(".buildkite/cuda/more/test-x.yml")
    assert not is_uploader_test_yaml(".buildkite/amd/test-amd-ready.yml")
    assert not is_uploader_test_yaml(".buildkite/test-amd-merge.yml")  # flat AMD suite
    assert not is_uploader_test_yaml(".buildkite/cuda/bootstrap-upload-steps.yml")
    assert not is_uploader_test_yaml(".buildkite/cuda/pipeline.yml")
    assert not is_uploader_test_yaml("elsewhere/test-ready.yml")


@pytest.mark.parametrize(
    "text",
    [
        'build.env("NIGHTLY") == "1" || build.pull_request.labels includes "nightly-test"',
        "build.message =~ /^wip\\/x/i && build.branch !~ /^release/",
        "!(build.pull_request.draft) && build.pull_request.id != null",
        "build.source == 'schedule' && pipeline.slug == \"omni\"",
        "__IMAGE_BUILD_IF__",  # an old entry pipeline's placeholder: a bare name parses
        'build.env("A")\n  == "1"',  # a folded (`>-`) block keeps its line breaks
    ],
)
def test_buildkite_conditionals_outside_the_evaluated_subset_parse(text: str) -> None:
    from ci.pipeline.ifexpr import syntax_problem

    assert syntax_problem(text) == ""


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('build.branch == "main" &&', "the expression ends where a value is expected"),
        ('(build.branch == "main"', "expected ')', got 'the end'"),
        ('build.branch == "main', "a string is not closed: '\"main'"),
        ("build.branch = 'main'", "unexpected \"= 'main'\""),
        ("build.branch == == 'x'", "expected a value, got '=='"),
        ("build.branch 'x'", "unexpected \"'x'\" after a complete expression"),
        ("", "the expression ends where a value is expected"),
    ],
)
def test_conditionals_buildkite_cannot_parse_say_why(text: str, why: str) -> None:
    from ci.pipeline.ifexpr import syntax_problem

    assert syntax_problem(text) == why
