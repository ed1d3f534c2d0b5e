"""The command door: echo, redaction, timeouts over the whole tree, signals, exit codes, dry-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from ci import door
from ci.door import Command, Plan
from ci.redact import MASK, Redactor, is_secret_name
from tests.conftest import ROOT

SECRET = "s3cr3t-value-123456"


def run_py(
    code: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run a snippet that uses the door in a fresh interpreter, as a task would."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --------------------------------------------------------------------------- redaction


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("GITHUB_TOKEN", True),
        ("DOCKERHUB_PASSWORD", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("AWS_ACCESS_KEY", True),
        ("SSH_PRIVATE_KEY", True),
        ("AZURE_CONNECTION_STRING", True),
        ("TOKEN", True),
        ("PASSWORD", True),
        ("SECRET", True),
        ("MY_SECRET", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("PASSWORD_FOR_REG", True),  # the spec's *PASSWORD*: anywhere in the name
        ("DOCKERHUBPASSWORD", True),
        ("HF_TOKEN_PATH", True),  # TOKEN or SECRET as a part of the name
        ("SECRET_KEY_BASE", True),
        ("DB_PASSWD", True),
        ("MAX_TOKENS", False),
        ("BUILDKITE_STEP_KEY", False),
        ("BUILDKITE_AGENT_ACCESS_TOKEN", True),
        ("PATH", False),
        ("KEYRING", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_short_values_are_not_redacted() -> None:
    redact = Redactor.for_env({"HF_TOKEN": "abc"})
    assert redact("abc") == "abc"


def test_echo_and_error_lines_are_redacted_but_false_positives_are_kept() -> None:
    done = run_py(
        """
        from ci import door
        cmd = door.Command(("bash", "-c", 'echo "$HF_TOKEN" >&2; exit 3'),
                           description="leak $HF_TOKEN", env={"EXTRA": "marked-secret-999"},
                           secrets=("marked-secret-999",))
        r = door.run(cmd)
        try:
            failing = door.Command(("bash", "-c", "echo $HF_TOKEN >&2; exit 4"))
            door.run(failing, output="capture", check=True)
        except door.CommandFailed as exc:
            import sys
            print("EXC", *exc.lines, file=sys.stderr)
        door.run(door.Command(("echo", "image-build", "false")))
        """,
        env={
            "HF_TOKEN": SECRET,
            "BUILDKITE": "true",
            "TOKENIZERS_PARALLELISM": "false",
            "BUILDKITE_STEP_KEY": "image-build",
        },
    )
    assert done.returncode == 0, done.stderr
    # The child's own stderr is not ours to filter, but every line the door prints is.
    door_lines = [ln for ln in done.stderr.splitlines() if ln.startswith(("---", "$", "EXC"))]
    assert door_lines, done.stderr
    assert not any(SECRET in ln for ln in door_lines)
    assert not any("marked-secret-999" in ln for ln in door_lines)
    assert any(MASK in ln for ln in door_lines if ln.startswith("EXC"))
    assert "$ EXTRA=[REDACTED]" in done.stderr
    # Neither false positive is redacted.
    assert "$ echo image-build false" in done.stderr


def test_plan_render_redacts_secret_stdin_and_marked_values() -> None:
    plan = Plan(
        commands=(
            Command(
                ("docker", "login", "-u", "me", "--password-stdin"), stdin=SECRET, stdin_secret=True
            ),
            Command(("curl", "-H", f"Authorization: Bearer {SECRET}"), secrets=(SECRET,)),
        ),
        facts=(("key", "abc"),),
        title="t",
    )
    text = plan.render()
    assert SECRET not in text
    assert "--password-stdin  # stdin: a secret, not shown" in text
    assert "Bearer [REDACTED]" in text
    assert "# key: abc" in text


# --------------------------------------------------------------------------- plan rendering


def test_plan_lines_are_exact_and_have_no_stray_spaces() -> None:
    plan = Plan(
        commands=(
            Command(("docker", "buildx", "inspect", "--builder", "b"), cwd="/w/my repo"),
            Command(("pytest", "-m", "core_model and cpu"), env={"A": "x y"}, description="t"),
            Command(("docker", "login", "--password-stdin"), stdin="", stdin_secret=True),
            Command(("cat",), stdin=""),
            Command(("buildkite-agent", "pipeline", "upload"), stdin="steps: []\n"),
        ),
        facts=(("image", "rocm/vllm-omni:abc"),),
        title="demo",
    )
    assert plan.render().splitlines() == [
        "# plan: demo",
        "# image: rocm/vllm-omni:abc",
        "1.",
        "   (cd '/w/my repo' && docker buildx inspect --builder b)",
        "2. t",
        "   A='x y' pytest -m 'core_model and cpu'",
        "3.",
        "   docker login --password-stdin  # stdin: a secret, not shown",
        "4.",
        "   cat < /dev/null",
        "5.",
        "   buildkite-agent pipeline upload  # stdin: 10 bytes, not shown",
    ]


def test_a_rendered_line_pasted_into_bash_runs_the_same_command(tmp_path: Path) -> None:
    """Copy-pasteable: bash, given the line, sees the same argv, env and cwd."""
    work = tmp_path / "dir with 'quotes' and $pace"
    work.mkdir()
    show = "import json, os, sys; print(json.dumps([sys.argv[1:], os.getcwd(), os.environ['V']]))"
    argv = (sys.executable, "-c", show, "-m", "a and b", "$HOME", "it's", "")
    cmd = Command(argv, env={"V": "two words; $x"}, cwd=str(work), stdin="")
    done = subprocess.run(["bash", "-c", cmd.line()], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [list(argv[3:]), str(work), "two words; $x"]


# --------------------------------------------------------------------------- timeouts


def _survivors(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(marker in part for part in proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _gone(marker: str, bound: float = 20) -> list[psutil.Process]:
    """The survivors carrying `marker`, once they have had `bound` seconds to exit.

    Returns as soon as none is left: a killed process may take a moment to go.
    """
    deadline = time.monotonic() + bound
    left = _survivors(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _survivors(marker)
    return left


def _sleeping(marker: str, count: int, bound: float = 20) -> bool:
    """True once `count` processes run `sleep MARKER` (polled for at most `bound` seconds)."""

    def sleeps() -> int:
        return sum(p.info["cmdline"] == ["sleep", marker] for p in _survivors(marker))

    deadline = time.monotonic() + bound
    while sleeps() < count:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("sleep {m} & wait", 124),  # normal grandchild
        ("setsid sleep {m} & sleep {m}", 124),  # grandchild escaped the process group
        ("trap '' TERM; sleep {m} & wait; sleep {m}", 137),  # child ignores TERM
        ("(trap '' TERM; exec -a tenacious-{m} sleep {m}) & wait", 137),  # grandchild ignores TERM
    ],
    ids=["grandchild", "setsid-grandchild", "child-traps-term", "grandchild-traps-term"],
)
def test_timeout_kills_the_whole_tree(script: str, expected: int) -> None:
    marker = f"{1000 + os.getpid() % 1000}.{time.monotonic_ns() % 997}"
    # The sleeps last over 1000 s: the command ends only because the timeout ends it.
    cmd = Command(("bash", "-c", script.format(m=marker)), timeout=1.0, grace=1.0)
    result = door.run(cmd, quiet=True)
    assert result.code == expected
    assert result.timed_out
    assert _gone(marker) == []


@pytest.mark.parametrize(
    ("script", "expected"),
    [("sleep {m} & wait", 124), ("trap '' TERM; sleep {m} & wait", 137)],
    ids=["term-ends-it", "kill-needed"],
)
def test_a_probe_timeout_ends_its_process_group(script: str, expected: int) -> None:
    """`capture` has no cgroup and no sweep: its own session's group is ended."""
    marker = f"{2000 + os.getpid() % 1000}.{time.monotonic_ns() % 997}"
    result = door.capture(["bash", "-c", script.format(m=marker)], timeout=1.0, grace=1.0)
    assert (result.code, result.timed_out) == (expected, True)
    assert _gone(marker) == []


def test_a_probe_stays_in_our_own_cgroup() -> None:
    line = door.capture(["grep", "^0::", "/proc/self/cgroup"]).stdout
    assert line.startswith("0::") and "vllm-omni-ci-" not in line


def test_no_timeout_passes_exit_code_through() -> None:
    assert door.run(Command(("bash", "-c", "exit 42")), quiet=True).code == 42


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGABRT, 134), (signal.SIGKILL, 137), (signal.SIGSEGV, 139)]
)
def test_child_killed_by_signal_gives_128_plus_n(sig: signal.Signals, code: int) -> None:
    result = door.run(Command(("bash", "-c", f"kill -{int(sig)} $$")), quiet=True)
    assert result.code == code


def test_missing_program_is_127_and_named() -> None:
    result = door.run(Command(("definitely-not-a-program-xyz",)), quiet=True)
    assert result.code == 127
    assert "definitely-not-a-program-xyz" in result.stderr


def test_program_that_is_not_executable_is_126_as_in_bash(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    shell = subprocess.run(["bash", "-c", str(script)], capture_output=True)
    result = door.run(Command((str(script),)), quiet=True)
    assert result.code == shell.returncode == 126
    assert "permission denied" in result.stderr and str(script) in result.stderr
    assert door.run(Command((str(tmp_path),)), quiet=True).code == 126


# --------------------------------------------------------------------------- signals


def _run_in_child(script: str, grace: float) -> subprocess.Popen[str]:
    """A fresh interpreter running `script` through `door.run` as a task would, with the
    command's own `grace` (the door never waits longer than SIGNAL_GRACE, 5 s)."""
    code = f"""
        import sys
        from ci import door, stdio
        door.install_interrupt_handlers()
        try:
            door.run(door.Command(("bash", "-c", {script!r}), grace={grace!r}))
        except door.Interrupted as exc:
            sys.exit(stdio.report(exc))
        """
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129), (signal.SIGQUIT, 131)],
)
def test_signal_to_us_is_forwarded_to_the_tree(sig: signal.Signals, code: int) -> None:
    """Issue 32 item 21: SIGQUIT ended us and left the child running; it is forwarded too."""
    marker = f"77{os.getpid() % 1000}.{int(sig)}"
    script = f"trap '' TERM INT HUP QUIT; setsid sleep {marker} & sleep {marker} & wait"
    proc = _run_in_child(script, grace=0.5)  # the tree ignores TERM: KILL after 0.5 s
    # Both sleeps run (the setsid one in a session of its own) before the signal.
    assert _sleeping(marker, 2), proc.stderr.read() if proc.poll() is not None else ""
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == code
    assert _gone(marker) == []


def test_a_second_signal_during_the_grace_kills_the_tree_at_once() -> None:
    """Issue 32 item 22: TERM, then INT during the grace, waited out the whole grace.
    The first signal's code (143) is the exit: the second only hurried the end."""
    marker = f"78{os.getpid() % 1000}.1"
    script = f"trap '' TERM INT; sleep {marker} & wait"
    proc = _run_in_child(script, grace=600)  # capped at SIGNAL_GRACE
    assert _sleeping(marker, 1), proc.stderr.read() if proc.poll() is not None else ""
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)  # the door is inside the grace now: the tree ignores TERM
    proc.send_signal(signal.SIGINT)
    # Well inside SIGNAL_GRACE: only the KILL at the second signal ends it this soon.
    assert proc.wait(timeout=door.SIGNAL_GRACE - 1) == 143
    assert _gone(marker) == []


# --------------------------------------------------------------------------- dry-run and streams


def test_dry_run_starts_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "created"
    plan = Plan(commands=(Command(("touch", str(target)), description="make a file"),), title="t")
    assert door.execute(plan, dry_run=True) == 0
    assert not target.exists()
    out = capsys.readouterr().out
    assert "make a file" in out and f"touch {target}" in out


def test_execute_stops_at_first_failure_and_keeps_its_code(tmp_path: Path) -> None:
    later = tmp_path / "later"
    plan = Plan(commands=(Command(("bash", "-c", "exit 7")), Command(("touch", str(later)))))
    assert door.execute(plan) == 7
    assert not later.exists()
    with pytest.raises(door.CommandFailed) as failed:
        door.execute(plan, check=True)
    assert failed.value.code == 7 and "bash -c 'exit 7' failed with exit 7" in failed.value.lines[0]


def policy_plan(tmp_path: Path, first_exit: int) -> Plan:
    """`first || true` (silent), then `tolerated || true` (noted), then a step that must run."""
    mark = tmp_path / "marks"
    step = lambda name, code: ("bash", "-c", f"echo {name} >> {mark}; exit {code}")  # noqa: E731
    return Plan(
        commands=(
            Command(step("first", first_exit), tolerate=""),
            Command(step("tolerated", 3), tolerate="tolerated it (exit {code})"),
            Command(step("last", 0)),
        )
    )


@pytest.mark.parametrize("first", [0, 1])
def test_a_tolerated_failure_goes_on_noted_by_its_text(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], first: int
) -> None:
    assert door.execute(policy_plan(tmp_path, first), check=True) == 0
    assert (tmp_path / "marks").read_text().split() == ["first", "tolerated", "last"]
    err = capfd.readouterr().err
    assert "tolerated it (exit 3)" in err.splitlines() and err.count("tolerated it") == 1


def test_dry_run_marks_each_step_policy_in_the_plan_and_in_log_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = policy_plan(tmp_path, 1)
    door.execute(plan, dry_run=True)
    heads = [ln for ln in capsys.readouterr().out.splitlines() if ln[:1].isdigit()]
    assert heads == ["1. [a failure is tolerated]", "2. [a failure is tolerated]", "3."]
    door.execute(plan, dry_run=True, log_dry_run=True)
    out, err = capsys.readouterr()
    assert out == "" and not (tmp_path / "marks").exists()
    assert (
        err.splitlines()[2] == f"(dry-run) not run: bash -c 'echo last >> {tmp_path}/marks; exit 0'"
    )


def test_stdout_carries_only_results() -> None:
    done = run_py(
        """
        from ci import door
        door.run(door.Command(("echo", "child-log-line"), description="a step"))
        door.run(door.Command(("echo", "the-result"), description="result"), output="stdout")
        r = door.run(door.Command(("echo", "captured"),), output="capture")
        assert r.stdout == "captured\\n"
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "the-result\n"
    assert "child-log-line" in done.stderr
    assert "a step" in done.stderr and "a step" not in done.stdout


def test_stdin_is_fed_and_never_echoed() -> None:
    result = door.run(
        Command(("cat",), stdin=SECRET, stdin_secret=True), output="capture", quiet=False
    )
    assert result.stdout == SECRET


def test_streamed_text_is_masked_as_the_whole_text_would_be_wherever_it_is_cut() -> None:
    """Overlapping secrets, one straddling the other: every cut gives the one-piece result."""
    from ci.redact import StreamRedactor

    redact = Redactor(["abcdef-1", "f-1xyz-22", "pa'ss_X-41f7"])
    text = b"x abcdef-1xyz-22 y 'pa'\"'\"'ss_X-41f7' z abcdef- end"
    whole = redact(text.decode()).encode()
    assert b"abcdef-1" not in whole and b"ss_X-41f7" not in whole
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1, 3):
            stream = StreamRedactor(redact)
            out = stream.feed(text[:i]) + stream.feed(text[i:j]) + stream.feed(text[j:])
            assert out + stream.flush() == whole, (i, j)
