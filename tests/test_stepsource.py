"""The step walker: groups, env layering, dialects, Buildkite's upload-time `$`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ci.errors import Failure, UserError
from ci.pipeline import stepsource
from ci.pipeline.stepsource import AMD_RUNNER, JOB_SHELL, ShellStep
from tests.conftest import SHARED, need_shared

CORPUS = SHARED / "vllm-omni"


def steps(yaml_text: str, rel: str = ".buildkite/cuda/test-ready.yml") -> list[ShellStep]:
    from ci.yamlio import loads

    return list(stepsource.steps_of(loads(textwrap.dedent(yaml_text)), rel))


def test_groups_are_flattened_and_non_command_steps_skipped() -> None:
    found = steps(
        """\
        env: {TOP: "1", SHARED: top}
        steps:
          - label: first
            commands: ["echo 1", "  echo 2  "]
          - wait
          - block: "Release?"
          - trigger: other-pipeline
          - group: ":g: Group"
            env: {SHARED: group}
            steps:
              - label: inner
                command: "echo inner"
                env: {OWN: x, SHARED: step}
              - name: "named by name"
                command: |
                  set -eu
                  pytest a
          - key: only-a-key
            commands: "echo k"
          - commands: ["echo anon"]
        """
    )
    assert [(s.label, s.group) for s in found] == [
        ("first", ""),
        ("inner", ":g: Group"),
        ("named by name", ":g: Group"),
        ("only-a-key", ""),
        ("step 7", ""),
    ]
    assert found[0].commands == ("echo 1", "echo 2")
    assert found[1].env == {"TOP": "1", "SHARED": "step", "OWN": "x"}
    assert found[2].env == {"TOP": "1", "SHARED": "group"}
    assert found[2].commands == ("set -eu\npytest a",)
    assert found[3].key == "only-a-key"


def test_group_ifs_and_depends_on_reach_their_steps() -> None:
    from ci.pipeline.stepsource import Dependency

    found = steps(
        """\
        steps:
          - group: outer
            key: outer-group
            if: build.env("NIGHTLY") == "1" ||
              build.pull_request.labels includes "nightly-test"
            depends_on: upload-nightly-pipeline
            steps:
              - label: perf
                key: perf
                if: build.env("PERF") == "1"
                commands: ["echo perf"]
              - label: plain
                commands: ["echo plain"]
          - label: email
            depends_on:
              - perf
              - step: outer-group
                allow_failure: true
            commands: ["echo email"]
          - label: lenient
            depends_on: [perf]
            allow_dependency_failure: true
            if: false
            commands: ["echo x"]
        """
    )
    perf, plain, email, lenient = found
    group_if = 'build.env("NIGHTLY") == "1" || build.pull_request.labels includes "nightly-test"'
    assert perf.conditions == (group_if, 'build.env("PERF") == "1"')
    assert plain.conditions == (group_if,)
    assert perf.group_keys == plain.group_keys == ("outer-group",)
    assert plain.depends_on == (Dependency("upload-nightly-pipeline"),)
    assert email.conditions == () and email.group_keys == ()
    assert email.depends_on == (Dependency("perf"), Dependency("outer-group", True))
    assert lenient.depends_on == (Dependency("perf", True),)
    assert lenient.conditions == ("false",)


def test_command_wins_over_commands_as_in_the_amd_template() -> None:
    (step,) = steps("steps:\n  - label: s\n    command: a\n    commands: [b, c]\n")
    assert step.commands == ("a",)


def test_a_bare_list_document_is_a_list_of_steps() -> None:
    assert [s.label for s in steps("- label: s\n  command: x\n- wait\n")] == ["s"]


@pytest.mark.parametrize(
    ("rel", "shell"),
    [
        (".buildkite/amd/test-amd-ready.yml", AMD_RUNNER),
        (".buildkite/amd/test-amd-nightly.yaml", AMD_RUNNER),
        (".buildkite/amd/bootstrap-upload-steps.yml", JOB_SHELL),
        (".buildkite/cuda/test-ready.yml", JOB_SHELL),
        (".buildkite/npu/test-npu-nightly.yml", JOB_SHELL),
        (".buildkite/intel/pipeline-intel.yml", JOB_SHELL),
    ],
)
def test_the_dialect_follows_the_file(rel: str, shell: str) -> None:
    assert stepsource.shell_of(rel) == shell
    (step,) = steps("steps:\n  - label: s\n    command: x\n", rel)
    assert step.shell == shell


def test_upload_interpolation_handles_the_escape_once() -> None:
    text = "echo $$HOME ${BUILDKITE_COMMIT} $BRANCH ${X:-d} $(pwd) $? $1 $$$$"
    assert (
        stepsource.unescape(text)
        == "echo $HOME ${BUILDKITE_COMMIT} $BRANCH ${X:-d} $(pwd) $? $1 $$"
    )
    assert [name for name, _ in stepsource.upload_refs_at(text)] == [
        "BUILDKITE_COMMIT",
        "BRANCH",
        "X",
    ]
    values = {"BUILDKITE_COMMIT": "abc", "BRANCH": "main"}
    assert (
        stepsource.upload_interpolate(text, lambda name, _token: values.get(name, ""))
        == "echo $HOME abc main  $(pwd) $? $1 $$"
    )
    (step,) = steps("steps:\n  - label: s\n    commands: ['a=$$B', 'echo $$a']\n")
    assert step.shell_commands == ("a=$B", "echo $a")


def test_read_steps_takes_every_pipeline_document_and_skips_registries(tmp_path: Path) -> None:
    kite = tmp_path / ".buildkite"
    (kite / "cuda").mkdir(parents=True)
    (kite / "common").mkdir()
    (kite / "cuda" / "pipeline.yml").write_text(
        "steps:\n  - label: one\n    command: a\n---\nsteps:\n  - label: two\n    command: b\n"
    )
    (kite / "common" / "ci_mirror_hardwares.yml").write_text(
        "steps:\n  - label: not a pipeline\n    command: c\n"
    )
    found = stepsource.read_steps(tmp_path)
    assert [(s.file, s.label) for s in found] == [
        (".buildkite/cuda/pipeline.yml", "one"),
        (".buildkite/cuda/pipeline.yml", "two"),
    ]


def test_missing_buildkite_dir_and_bad_yaml_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"has no \.buildkite/ directory"):
        stepsource.read_steps(tmp_path)
    (tmp_path / ".buildkite").mkdir()
    (tmp_path / ".buildkite" / "bad.yml").write_text("steps: [\n")
    with pytest.raises(Failure, match=r"\.buildkite/bad\.yml: invalid YAML") as caught:
        stepsource.read_steps(tmp_path)
    assert caught.value.code == 1


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (b"steps: [\n  - label: x\n  : :\n", "invalid YAML at line 2, column 3: "),
        (b"\x00\x01\xff\xfe", "not UTF-8 text (byte 0xff at offset 2)"),
        ("steps:\n  - label: caf\xe9\n".encode("latin-1"), "not UTF-8 text (byte 0xe9 at offset"),
    ],
    ids=["bad-yaml", "binary", "latin-1"],
)
def test_an_unloadable_pipeline_is_one_error_line(
    tmp_path: Path, content: bytes, line: str
) -> None:
    """Not a traceback (UnicodeDecodeError), nor PyYAML's three-line message."""
    (tmp_path / ".buildkite").mkdir()
    (tmp_path / ".buildkite" / "bad.yml").write_bytes(content)
    with pytest.raises(Failure) as caught:
        stepsource.read_steps(tmp_path)
    (problem,) = caught.value.problems
    assert problem.startswith(f".buildkite/bad.yml: {line}")
    assert "\n" not in problem
    assert caught.value.code == 1


def test_the_real_corpus_yields_every_tier_file() -> None:
    found = stepsource.read_steps(need_shared(CORPUS))
    files = {s.file for s in found}
    for tier in (
        "amd/test-amd-ready.yml",
        "amd/test-amd-merge.yml",
        "amd/test-amd-nightly.yml",
        "cuda/test-ready.yml",
        "cuda/test-merge.yml",
        "cuda/test-nightly.yml",
        "cuda/test-weekly.yml",
        "npu/test-npu-ready.yml",
        "npu/test-npu-nightly.yml",
        "intel/pipeline-intel.yml",
    ):
        assert f".buildkite/{tier}" in files
    assert not any("common/" in f for f in files)
    amd = [s for s in found if s.shell == AMD_RUNNER]
    assert amd and all(s.file.startswith(".buildkite/amd/test-amd-") for s in amd)
    labels = {(s.file, s.label) for s in found}
    assert (".buildkite/intel/pipeline-intel.yml", "Intel: XPU Test") in labels
    shard = next(s for s in amd if s.label == "Simple · Model Executor Test · Shard %N/%t")
    assert shard.group == ":card_index_dividers: Simple Test"
    assert "--shard-id=$BUILDKITE_PARALLEL_JOB" in shard.shell_commands[-1]
    assert shard.env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
