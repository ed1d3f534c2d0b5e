"""How a run of a task ends, for both front ends: every way out is an exit code.

- an input error is its `error:` lines and exit 2, a failure its lines and its code
  (`report`); a task's `Stop` its code; Ctrl-C 130;
- a pipe closed early ends quietly (141, as SIGPIPE would); a stdout that is closed
  or cannot be written is one `error:` line and exit 74;
- everything printed on stdout is masked like every other stream (`GuardedStdout`).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

from ci.errors import STDOUT_FAILED, Stop, TaskError
from ci.redact import Redactor, StreamRedactor, learnt

# Set by a caller that reports a TaskError or a Stop its own way (the nox tier sessions):
# `run` then lets them through unprinted.
PASS_ERRORS: ContextVar[bool] = ContextVar("PASS_ERRORS", default=False)


def message_lines(exc: TaskError | Stop) -> list[str]:
    """What `report` prints for `exc`, redacted: one `error: ...` line per problem."""
    redact = Redactor.for_env()
    if isinstance(exc, TaskError):
        return [redact(p if p.startswith("error:") else f"error: {p}") for p in exc.problems]
    return [redact(line) for line in exc.lines]


def report(exc: TaskError | Stop) -> int:
    for line in message_lines(exc):
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
    return exc.code


def run(body: Callable[[], None]) -> None:
    """Run `body` (a parse and the tasks it names) and exit with its code (none for 0).

    The process's own streams are made safe first (`_standard_streams`: a closed stdout
    is exit 74 before anything runs). While it runs, stdout, whatever it is (a caller's
    capture too), is masked, and a failed write is a `StdoutFailed` (any other OSError
    may be a task's own file)."""
    if sys.stdout is sys.__stdout__:
        _standard_streams()
    outer = sys.stdout
    if isinstance(outer, GuardedStdout):
        _run(body)
        return
    guard = sys.stdout = GuardedStdout(outer)
    try:
        _run(body)
    finally:
        with contextlib.suppress(OSError):  # held text of an early way out, best effort
            guard.flush()
        sys.stdout = outer


def _run(body: Callable[[], None]) -> None:
    code: str | int | None = 0
    try:
        try:
            body()
        except (TaskError, Stop) as exc:
            if PASS_ERRORS.get():
                raise
            code = report(exc)
        except KeyboardInterrupt:
            code = 130
        except SystemExit as done:
            code = done.code  # a task's own sys.exit
        sys.stdout.flush()  # here, not at interpreter exit, where a failure is unreported
    except StdoutFailed as exc:  # `vllm-omni-ci plan > /dev/full`: sysexits' EX_IOERR (74)
        print(f"error: cannot write to stdout: {exc.strerror or exc}", file=sys.stderr)
        _stdout_to_devnull()
        code = STDOUT_FAILED
    except BrokenPipeError:  # `… | head`: the reader left; end quietly, as SIGPIPE would
        _stdout_to_devnull()
        sys.exit(128 + 13)
    if code not in (None, 0):
        sys.exit(code)


class StdoutFailed(OSError):
    """Writing our stdout failed (not a closed pipe: that is BrokenPipeError)."""


class GuardedStdout:
    """sys.stdout, masked, whose write errors say they are stdout's. A proxy, not a raw file
    under the stream: a signal raised between a raw write and its return wrote the bytes twice.

    Every task's result passes here, whatever its format, so a secret's value given as
    input (a label, a branch) prints as `[REDACTED]`, as it does on stderr. One masker per
    run of the program, rebuilt only when a secret is learnt at run time; it holds back a
    tail that may be the start of a secret split across writes, until the next write or
    `flush`. Text goes through as it is while there is no secret to mask.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._masker: StreamRedactor | None = None
        self._learnt = learnt()

    def write(self, text: str) -> int:
        masker = self._mask()
        masked = masker.feed_text(text) if masker.redact else text  # no secret: as it is
        if masked:
            _guarded(self._stream.write, masked)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        rest = self._mask().flush_text()
        if rest:
            _guarded(self._stream.write, rest)
        _guarded(self._stream.flush)

    def _mask(self) -> StreamRedactor:
        if self._masker is None:
            self._masker = StreamRedactor(Redactor.for_env())
        elif self._learnt != learnt():
            self._learnt = learnt()
            self._masker.redact = Redactor.for_env()
        return self._masker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _guarded(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return call(*args)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise StdoutFailed(exc.errno, exc.strerror) from None


def _stdout_to_devnull() -> None:
    """The interpreter's final flush must not fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _standard_streams() -> None:
    """Streams every task can write without a traceback, whatever the caller gave us.

    A standard stream closed at start-up (`>&-`) is None in Python, and its descriptor is
    the next one `open` returns: a file we open would receive a child's output. Each
    closed one gets /dev/null; a closed stdout then ends the task (exit 74, before
    anything runs: its result would be lost), a closed stderr or stdin only loses logs
    or input. A character the stream's encoding lacks (`PYTHONIOENCODING=ascii`)
    prints as a `\\u…` escape, as Python does on stderr, instead of raising.
    """
    for fd, name in ((0, "stdin"), (2, "stderr"), (1, "stdout")):
        if getattr(sys, name) is None:
            _devnull_at(fd)
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))
            if fd == 1:
                print(f"error: cannot write to stdout: {os.strerror(errno.EBADF)}", file=sys.stderr)
                sys.exit(STDOUT_FAILED)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="backslashreplace")


def _devnull_at(fd: int) -> None:
    opened = os.open(os.devnull, os.O_RDWR)
    if opened != fd:
        os.dup2(opened, fd)
        os.close(opened)
