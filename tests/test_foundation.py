"""Conventions every task relies on: exit codes, platforms, `--`, start-up imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ci.durations import parse_duration
from ci.errors import UserError
from ci.platforms import Platform, parse_platform
from ci.target import resolve_branch, resolve_commit
from ci.taskkit import after_dashdash
from tests.conftest import ROOT, cli_path, run_cli


@pytest.mark.parametrize(
    ("text", "platform"),
    [
        ("rocm", Platform.ROCM),
        ("amd", Platform.ROCM),
        ("AMD", Platform.ROCM),
        ("cuda", Platform.CUDA),
        ("npu", Platform.NPU),
        ("xpu", Platform.XPU),
        ("intel", Platform.XPU),
    ],
)
def test_platform_aliases(text: str, platform: Platform) -> None:
    assert parse_platform(text) is platform


def test_unknown_platform_names_allowed_values() -> None:
    with pytest.raises(UserError) as info:
        parse_platform("tpu")
    assert info.value.code == 2
    assert "rocm (alias amd), cuda, npu, xpu (alias intel)" in info.value.problems[0]


def test_unknown_platform_exits_2_with_one_error_line() -> None:
    done = run_cli("build-image", "--platform", "tpu", "--dry-run")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --platform: unknown platform 'tpu'")
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("args", [["no-such-task"], ["doctor", "--no-such-flag"], ["build-image"]])
def test_parse_errors_exit_2_under_vllm_omni_ci(args: list[str], tmp_path: Path) -> None:
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ")


@pytest.mark.parametrize(
    ("program", "task", "flag"),
    [("vllm-omni-ci", "build-image", "--platform"), ("inv", "upload-pipeline", "--pipeline")],
)
def test_a_missing_required_argument_is_named_as_the_flag_users_type(
    program: str, task: str, flag: str
) -> None:
    argv = [program, task] if program == "inv" else [cli_path(), task]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == f"error: {task}: {flag} is required (see `{program} {task} --help`)\n"
    assert done.stdout == ""


def test_a_short_flag_means_one_thing_in_every_task() -> None:
    """`-r` was --repo, --root and --dry-run; `-p` four options. Core short flags are not reused."""
    from ci.cli import program
    from ci.tasks import ns

    core = program().initial_context
    meaning = {n: arg.name for arg in core.args.values() for n in arg.names if len(n) == 1}
    used: dict[str, set[str]] = {}
    for context in ns.to_contexts():
        for arg in context.args.values():
            for short in (n for n in arg.names if len(n) == 1):
                assert context.flags[f"-{short}"] is arg, (context.name, short)
                used.setdefault(short, set()).add(arg.name)
                assert meaning.setdefault(short, arg.name) == arg.name, (context.name, short)
    assert used == {"r": {"repo"}, "n": {"dry_run"}, "j": {"jobs"}}


def test_vllm_omni_ci_works_from_any_directory(tmp_path: Path) -> None:
    done = run_cli("--list", cwd=tmp_path)
    assert done.returncode == 0
    assert "doctor" in done.stdout and "build-image" in done.stdout


def test_inv_list_shows_one_line_of_help_per_task() -> None:
    """Every task is listed with the first line of its docstring (Invoke may wrap it)."""
    from ci.tasks import ns

    done = subprocess.run(["inv", "--list"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    listing = " ".join(done.stdout.split())
    for name in ns.task_names:
        doc = (ns[name].__doc__ or "").strip()
        assert doc, f"task {name} has no docstring"
        first = " ".join(doc.splitlines()[0].split())
        assert f" {name} {first}" in listing, (name, first)


# --------------------------------------------------------------------------- arguments after --


def test_after_dashdash_keeps_words_intact() -> None:
    argv = ["inv", "step", "--timeout", "1m", "--", "pytest", "-m", "core_model and cpu", "--", "x"]
    assert after_dashdash(argv) == ["pytest", "-m", "core_model and cpu", "--", "x"]
    assert after_dashdash(["inv", "step"]) == []


def test_dashdash_arrives_as_one_argument_under_inv(tmp_path: Path) -> None:
    """`inv` itself (not our Program) must hand the words over unsplit, too."""
    (tmp_path / "tasks.py").write_text(
        textwrap.dedent(
            """
            import json
            from invoke import task
            from ci.taskkit import after_dashdash

            @task
            def show(c):
                print(json.dumps(after_dashdash()))
            """
        )
    )
    done = subprocess.run(
        ["inv", "show", "--", "pytest", "-m", "core_model and cpu"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["pytest", "-m", "core_model and cpu"]


def test_dashdash_arrives_as_one_argument_under_inv_in_this_repo() -> None:
    """This repo's tasks.py (which hands the command line to our Program) keeps quoting too."""
    show = "import sys, json; print('ARGS=' + json.dumps(sys.argv[1:]))"
    done = subprocess.run(
        ["inv", "step", "--", sys.executable, "-c", show, "-m", "core_model and cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in (done.stdout + done.stderr).splitlines() if ln.startswith("ARGS="))
    assert json.loads(line.removeprefix("ARGS=")) == ["-m", "core_model and cpu"]


def test_dashdash_arrives_as_one_argument_under_vllm_omni_ci() -> None:
    """The installed command forwards `-m 'core_model and cpu'` unsplit (through `step`)."""
    show = "import sys, json; print('ARGS=' + json.dumps(sys.argv[1:]))"
    done = run_cli("step", "--", sys.executable, "-c", show, "-m", "core_model and cpu")
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in (done.stdout + done.stderr).splitlines() if ln.startswith("ARGS="))
    assert json.loads(line.removeprefix("ARGS=")) == ["-m", "core_model and cpu"]


# --------------------------------------------------------------------------- start-up


def test_importing_tasks_pulls_in_no_heavy_module() -> None:
    """Invoke itself imports yaml; beyond what `import invoke` loads, we add none of them."""
    heavy = "('docker', 'rich', 'yaml', 'jsonschema', 'psutil')"
    code = (
        "import sys, invoke, invoke.program; base = set(sys.modules);"
        "import tasks, ci.cli; ci.cli.program();"
        f"print(','.join(m for m in {heavy} if m in sys.modules and m not in base))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


# ------------------------------------------------------------------ commit / branch defaults


def _git_repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "feature-x", str(path)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(path),
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
        check=True,
    )
    return path


def test_outside_buildkite_commit_and_branch_come_from_git(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "r")
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert resolve_commit(repo, env={}) == head
    assert resolve_branch(repo, env={}) == "feature-x"
    assert resolve_commit(repo, env={"BUILDKITE_COMMIT": "abc123"}) == "abc123"


def test_inside_buildkite_a_missing_commit_is_an_error(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "r")
    with pytest.raises(UserError) as info:
        resolve_commit(repo, env={"BUILDKITE": "true"})
    assert info.value.code == 2
    with pytest.raises(UserError):
        resolve_branch(repo, env={"BUILDKITE": "true"})


@pytest.mark.parametrize(
    ("text", "seconds"), [("80m", 4800), ("2m", 120), ("1s", 1), ("1h30m", 5400), ("45", 45)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "ten", "5x", "m", "169h", "99999999999999999999", "9" * 400])
def test_bad_durations(text: str) -> None:
    """Issue 32 item 13: every duration option (step's, build-image's and run-tests'
    --timeout, cleanup-nightly's --delete-interval) is bounded, so that no wait overflows."""
    with pytest.raises(UserError) as info:
        parse_duration(text, name="--timeout")
    assert info.value.problems[0].startswith("--timeout: ")
