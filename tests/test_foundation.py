"""Conventions every task relies on: exit codes, platforms, `--`, start-up imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci.durations import parse_duration
from ci.errors import UserError
from ci.platforms import Platform, parse_platform
from ci.target import resolve_branch, resolve_commit
from ci.taskdef import after_dashdash
from tests.conftest import ROOT, SAMPLE, cli_path, run_cli


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


@pytest.mark.parametrize(
    ("program", "task", "flag"),
    [("vllm-omni-ci", "build-image", "--platform"), ("inv", "upload-pipeline", "--pipeline")],
)
def test_a_missing_required_argument_is_named_as_the_flag_users_type(
    program: str, task: str, flag: str
) -> None:
    """Invoke words its own message (`inv`); both exit 2 with one `error:` line."""
    argv = [program, task] if program == "inv" else [cli_path(), task]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    if program == "inv":
        assert done.stderr.startswith(f"error: '{task}' did not receive required positional")
    else:
        assert done.stderr == f"error: {task}: {flag} is required (see `{program} {task} --help`)\n"


def test_a_short_flag_means_one_thing_in_every_task() -> None:
    """`-r` was --repo, --root and --dry-run; `-p` four options. Core short flags are not reused."""
    from ci.grammar import CORE
    from ci.inv import InvProgram
    from ci.tasks import definitions

    core = set(CORE.values())
    core |= {f"-{n}" for arg in InvProgram().core_args() for n in arg.names if len(n) == 1}
    used: dict[str, set[str]] = {}
    for task in definitions().values():
        for option in task.options:
            if option.short:
                assert option.short not in core, (task.name, option.short)
                used.setdefault(option.short, set()).add(option.name)
    assert used == {"-r": {"repo"}, "-n": {"dry_run"}, "-j": {"jobs"}}


def test_vllm_omni_ci_works_from_any_directory(tmp_path: Path) -> None:
    done = run_cli("--list", cwd=tmp_path)
    assert done.returncode == 0
    assert "doctor" in done.stdout and "build-image" in done.stdout


def test_inv_list_shows_one_line_of_help_per_task() -> None:
    """Every task is listed with the first line of its docstring (Invoke may wrap it)."""
    from ci.tasks import definitions

    done = subprocess.run(["inv", "--list"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    listing = " ".join(done.stdout.split())
    for name, task in definitions().items():
        assert task.summary, f"task {name} has no docstring"
        first = " ".join(task.summary.split())
        assert f" {name} {first}" in listing, (name, first)


# --------------------------------------------------------------------------- arguments after --


def test_after_dashdash_keeps_words_intact() -> None:
    argv = ["inv", "step", "--timeout", "1m", "--", "pytest", "-m", "core_model and cpu", "--", "x"]
    assert after_dashdash(argv) == ["pytest", "-m", "core_model and cpu", "--", "x"]
    assert after_dashdash(["inv", "step"]) == []


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


@pytest.mark.parametrize(
    ("before", "load"),
    [
        ("pass", "import ci.cli; from ci.tasks import definitions; definitions()"),
        ("import invoke, invoke.program", "import tasks"),  # Invoke itself imports yaml
    ],
    ids=["vllm-omni-ci", "inv"],
)
def test_loading_the_tasks_pulls_in_no_heavy_module(before: str, load: str) -> None:
    """`vllm-omni-ci` loads no Invoke; neither front end loads a library no task has asked for."""
    heavy = "('invoke', 'docker', 'rich', 'yaml', 'jsonschema', 'psutil')"
    code = (
        f"import sys; {before}; base = set(sys.modules); {load};"
        f"print(','.join(m for m in {heavy} if m in sys.modules and m not in base))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


# ------------------------------------------------------ trust: config files and odd start-ups
# issue 32: a user's Invoke config ran as code on every call, and a closed stdout, a HOME
# that is a file or an ASCII-only stdout ended every task in a traceback.


def _marker_code(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').close()\n"


@pytest.mark.parametrize(
    ("name", "text"),
    [(".invoke.py", ""), (".invoke.yaml", "a: [x"), (".invoke.yml", "a: {"), (".invoke.json", "{")],
)
def test_no_invoke_config_file_is_read_or_run(name: str, text: str, tmp_path: Path) -> None:
    """~/.invoke.py ran as code; a malformed ~/.invoke.yaml was a traceback (issue 32, item 2)."""
    marker, home = tmp_path / "ran", tmp_path / "home"
    home.mkdir()
    (home / name).write_text(text or _marker_code(marker))
    (tmp_path / "runtime.py").write_text(_marker_code(marker))
    env = {**os.environ, "HOME": str(home), "INVOKE_RUNTIME_CONFIG": str(tmp_path / "runtime.py")}
    for args in (["--list"], ["step", "--", "true"]):
        done = run_cli(*args, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    assert not marker.exists()


def test_the_programs_config_opens_no_file_at_any_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """System (/etc cannot be written here: a stand-in prefix), user, project and runtime
    files, and INVOKE_* variables: the config class `inv` runs with loads none of them
    (`vllm-omni-ci` has no config at all)."""
    from ci.inv import InvProgram, NoConfig

    marker = tmp_path / "ran"
    for where in ("etc/invoke.py", "home/.invoke.py", "project/invoke.py", "runtime.py"):
        (tmp_path / where).parent.mkdir(exist_ok=True)
        (tmp_path / where).write_text(_marker_code(marker) + "run = {'echo': True}\n")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("INVOKE_RUN_ECHO", "1")
    ours = InvProgram()
    config = ours.config_class(
        system_prefix=f"{tmp_path}/etc/",
        project_location=str(tmp_path / "project"),
        runtime_path=str(tmp_path / "runtime.py"),
    )
    for load in (config.load_system, config.load_user, config.load_project, config.load_runtime):
        load()
    config.set_project_location(str(tmp_path / "project"))
    config.load_project()
    config.load_shell_env()
    config = config.clone()
    assert not marker.exists()
    assert config.run.echo is False
    ours.create_config()
    assert isinstance(ours.config, NoConfig)


def _with_stdout_closed(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", '"$@" >&-', "bash", *argv],
        cwd=cwd, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [["--list"], ["step", "--", "touch", "ran"], ["skip-ci", "--level", "l2"], ["inv", "--list"]],
    ids=lambda argv: "-".join(argv[:2]),
)
def test_a_closed_stdout_is_one_error_line_and_exit_74(argv: list[str], tmp_path: Path) -> None:
    """`vllm-omni-ci … >&-` was `AttributeError … 'flush'` and exit 1 (issue 32, item 10);
    now the README's line and code, before anything runs. `inv` (in the repo) too."""
    if argv[0] == "inv":
        done = _with_stdout_closed(*argv, cwd=ROOT)
    else:
        done = _with_stdout_closed(cli_path(), *argv, cwd=tmp_path)
    assert done.returncode == 74, done.stderr
    assert done.stderr == "error: cannot write to stdout: Bad file descriptor\n"
    assert not (tmp_path / "ran").exists()


def test_a_closed_stderr_or_stdin_loses_only_what_it_carried(tmp_path: Path) -> None:
    for closed in ("2>&-", "<&-"):
        done = subprocess.run(
            ["bash", "-c", f'"$@" {closed}', "bash", cli_path(), "step", "--", "touch", "ran"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, (closed, done.stderr)
        assert "Traceback" not in done.stderr
        assert (tmp_path / "ran").exists()
        (tmp_path / "ran").unlink()


def test_a_home_that_is_a_file_changes_nothing_for_a_task_that_does_not_need_it(
    tmp_path: Path,
) -> None:
    """Invoke's user config made every task a traceback (issue 32, item 14)."""
    home = tmp_path / "home"
    home.write_text("")
    env = {**os.environ, "HOME": str(home)}
    for args in (["--list"], ["step", "--", "true"], ["check-marks", "--repo", str(SAMPLE)]):
        done = run_cli(*args, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr


def test_a_home_that_is_a_file_is_one_error_line_where_home_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sandbox up` keeps its folder under HOME: it says so, before starting anything."""
    from ci.sandbox import run

    (tmp_path / "home").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("VLLM_OMNI_CI_SANDBOX", raising=False)
    with pytest.raises(UserError) as info:
        run.up()
    assert info.value.problems[0].startswith(f"sandbox folder {tmp_path}/home/.local/share/")
    assert "Not a directory" in info.value.problems[0]


def test_characters_the_stream_encoding_lacks_are_escaped_not_raised(tmp_path: Path) -> None:
    """`PYTHONIOENCODING=ascii vllm-omni-ci plan` raised UnicodeEncodeError (item 14)."""
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = run_cli("step", "--dry-run", "--", "echo", "café — ok", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "caf\\xe9 \\u2014 ok" in done.stdout


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
