"""Run `vllm-omni-ci ARGS` inside the test process: the default way for a test to run a task.

`run_inproc` takes the code path of the console script (`ci.cli:main`, that is
`ci.cli.run([...])`) with the process state a fresh `vllm-omni-ci`
would have, and puts everything it touched back afterwards:

- `os.environ` is `env` for the call (the caller's environment by default);
- `sys.argv` is the command line (`ci.taskdef.after_dashdash` reads the words
  after `--` from it, quoting intact);
- the working directory is `cwd`;
- stdin, stdout and stderr are real temporary files, because `ci/door.py` hands
  `sys.stderr.fileno()` to the programs a task starts, and rich's consoles
  write to `sys.stderr`; `sys.__stdout__` is the new stdout too, so that the
  program wraps it (`_GuardedStdout`) exactly as it wraps a real one; and
  descriptors 0-2 point at them, for the programs that inherit ours;
- the program's way out (`SystemExit`) becomes the exit code (None: 0);
- the signal handlers the program installs for TERM, INT and HUP are undone;
- the caches that a process keeps between calls are emptied before and after
  (`_reset_process_state`), so no call sees what an earlier one learnt.

Any other exception escapes, as it would end the real process with a traceback;
the caller sees it (the fuzz test, tests/test_fuzz.py, counts that as a failure).
A subprocess (`conftest.run_cli`) is for tests whose subject is the process itself:
signals sent to it, a closed stdout, start-up.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

PROGRAM = "vllm-omni-ci"
ROOT = Path(__file__).resolve().parents[1]
# The handlers `ci.door.install_interrupt_handlers` and `ci.runner.guard` set, plus the
# ones a task could touch through the door's child handling.
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE)


@dataclass(frozen=True)
class Outcome:
    """What a run gave: its exit code and both streams (decoded as UTF-8, bad bytes replaced)."""

    code: int
    stdout: str
    stderr: str


class InprocTimeout(Exception):
    """The call ran longer than `timeout` (a hang in a real process)."""


def _reset_process_state() -> None:
    """Empty what a long-lived process remembers between calls; a fresh process starts empty.

    - `ci.diff._CACHE` (`clear_cache`): resolved diffs by repo and range; a later call
      on a changed checkout would get the old diff.
    - `ci.skipci` (`clear_cache`): the decision per diff and the once-per-process
      `[skip-ci]:` line (a second call would print less on stderr).
    - `ci.target._ANNOUNCED`: the once-per-process `local build: …` line.
    - `ci.redact._remembered`: secrets learnt at run time (the ECR password); kept,
      they would be masked in a later call that never learnt them, hiding a leak.
    - `ci.images.deadline`: `build-image --timeout`'s clock, started per build.
    - `ci.schema` (`clear_cache`): the compiled schema (pure, cleared to start as cold
      as a new process).

    Left as they are, because they hold no input of a call: the functools caches of
    constant data (`ci.schema`'s jsonschema validators, `ci.yamlio._fast`'s loader classes,
    `ci.pipeline.mirror.mirror_chips` over the registries' fixed tables), and
    `ci.proctree.become_subreaper` (the test process stays a child subreaper once a
    call ran a command: orphans of commands are then reaped here, not by init).
    """
    from ci import diff, redact, schema, skipci, target
    from ci.images import deadline

    diff.clear_cache()
    skipci.clear_cache()
    target._ANNOUNCED.clear()
    redact._remembered.clear()
    deadline._deadline = None
    deadline._given = ""
    schema.clear_cache()


def _stdout_codec(env: Mapping[str, str]) -> tuple[str, str]:
    """The encoding and error handler Python would give a new process's stdout in `env`.

    `PYTHONIOENCODING` (`enc[:errors]`) wins; then UTF-8, whose errors are
    surrogateescape under `PYTHONUTF8=1` and in the C, POSIX and C.UTF-8 locales (a
    word that was not UTF-8 on the command line prints back as it came), and strict in
    any other locale (`en_US.UTF-8`: such a word cannot be printed).
    """
    name, _, errors = env.get("PYTHONIOENCODING", "").partition(":")
    try:
        encoding = codecs.lookup(name).name if name else "utf-8"
    except LookupError:
        encoding = "utf-8"  # Python itself would refuse to start: not our program's input
    if errors:
        return encoding, errors
    locale = env.get("LC_ALL") or env.get("LC_CTYPE") or env.get("LANG") or "C"
    lenient = env.get("PYTHONUTF8") == "1" or locale in ("C", "POSIX", "C.UTF-8", "C.utf8")
    return encoding, "surrogateescape" if lenient else "strict"


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    try:
        os.environ.update(env)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _alarm(timeout: float | None) -> Iterator[None]:
    if not timeout:
        yield
        return

    def expired(_signum: int, _frame: Any) -> None:
        raise InprocTimeout(f"still running after {timeout} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _descriptors(raw: Mapping[str, IO[bytes]]) -> Iterator[None]:
    """Descriptors 0, 1 and 2 are the files too: a program that a task starts without
    redirecting its streams inherits them, as it would inherit a real process's."""
    targets = {0: raw["in"], 1: raw["out"], 2: raw["err"]}
    saved = {fd: os.dup(fd) for fd in targets}
    try:
        for fd, file in targets.items():
            os.dup2(file.fileno(), fd)
        yield
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


def _read(stream: IO[bytes]) -> str:
    stream.seek(0)
    return stream.read().decode("utf-8", errors="replace")


def _set_streams(*streams: object) -> None:
    """sys.stdin, stdout, stderr and their `__dunder__` originals, in that order. Through
    setattr: typeshed marks the originals final, but the program wraps `sys.__stdout__`
    exactly as a real process's, so the call must replace them too."""
    names = ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__")
    for name, stream in zip(names, streams, strict=True):
        setattr(sys, name, stream)


def run_inproc(
    *argv: str,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin: str = "",
    timeout: float | None = None,
    front: str = PROGRAM,
) -> Outcome:
    """`vllm-omni-ci ARGV` in this process, as the console script runs it (module docstring).

    `timeout` (seconds) raises `InprocTimeout` out of the call, where a real process
    would hang; None waits. `front="inv"`: the Invoke front end instead (`ci.inv`), as
    `inv` runs it once it has loaded tasks.py.
    """
    from ci import cli, inv

    environ = dict(os.environ if env is None else env)
    encoding, errors = _stdout_codec(environ)
    saved_streams = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__)
    saved_stderr_dunder = sys.__stderr__
    saved_handlers = {sig: signal.getsignal(sig) for sig in SIGNALS}
    saved_cwd = os.getcwd()
    saved_argv = sys.argv
    with tempfile.TemporaryDirectory(prefix="inproc-") as folder:
        # Append mode (O_APPEND): the door's children write to the same descriptors
        # straight, and nothing written by either side may overwrite the other's.
        raw = {name: open(os.path.join(folder, name), "a+b") for name in ("in", "out", "err")}
        raw["in"].write(stdin.encode())
        raw["in"].seek(0)
        text_in = io.TextIOWrapper(raw["in"], encoding="utf-8", errors="surrogateescape")
        text_out = io.TextIOWrapper(raw["out"], encoding=encoding, errors=errors)
        text_err = io.TextIOWrapper(
            raw["err"], encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
        code: int
        try:
            _reset_process_state()
            with _environment(environ), _descriptors(raw), _alarm(timeout):
                if cwd is not None:
                    os.chdir(cwd)
                sys.argv = [front, *argv]
                _set_streams(text_in, text_out, text_err, text_in, text_out, text_err)
                try:
                    if front == "inv":
                        inv.InvProgram(front).run(sys.argv)
                    else:
                        cli.run(argv)
                    code = 0
                except SystemExit as done:
                    code = _exit_code(done.code, text_err)
        except BaseException as escaped:  # a traceback in a real process: say what it printed
            with contextlib.suppress(Exception):
                text_err.flush()
            add_note = getattr(escaped, "add_note", None)  # Python 3.11+
            if add_note is not None:
                add_note(f"argv: {list(argv)!r:.2000}; stderr before it:")
                add_note(_read(raw["err"])[-4000:])
            raise
        finally:
            for stream in (sys.stdout, text_out, text_err):
                with contextlib.suppress(Exception):
                    stream.flush()
            _set_streams(*saved_streams, saved_stderr_dunder)
            sys.argv = saved_argv
            for sig, handler in saved_handlers.items():
                if handler is not None:
                    signal.signal(sig, handler)
            os.chdir(saved_cwd)
            _reset_process_state()
            outcome = [_read(raw["out"]), _read(raw["err"])]
            for wrapper in (text_in, text_out, text_err):
                with contextlib.suppress(Exception):
                    wrapper.close()  # closes its raw file too
        return Outcome(code, *outcome)


def _exit_code(value: object, stderr: IO[str]) -> int:
    """`SystemExit.code` as the interpreter turns it into a status (a text: printed, 1)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=stderr)
    return 1


def run_task(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """`run_inproc`, shaped as the subprocess result that tests written for `run_cli`
    read, with the working directory the project root unless given, as `run_cli`'s."""
    done = run_inproc(*args, env=env, cwd=cwd or ROOT, timeout=timeout)
    return subprocess.CompletedProcess([PROGRAM, *args], done.code, done.stdout, done.stderr)
