"""The one door to the outside: every external program starts here.

Echoing, secret redaction, timeouts over the whole process tree, signal
forwarding and exit-code mapping are easy to get subtly wrong, so they live
once. Tasks describe what to run as `Command`s in a `Plan` (plain data) and
hand them to `run` or `execute`, so what `--dry-run` prints is what runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Final, Literal

from ci.errors import Stop
from ci.redact import MASK, Redactor, StreamRedactor

if TYPE_CHECKING:
    import psutil

    from ci.proctree import Tree

DEFAULT_GRACE = 10.0
# A probe (`capture`) that takes longer than this is stuck: it ends, and its result says so.
CAPTURE_TIMEOUT = 120.0
# Buildkite waits 10 s between its cancel SIGTERM and SIGKILL; stay inside that.
SIGNAL_GRACE = 5.0
POLL = 0.05

Output = Literal["stderr", "stdout", "capture", "null"]


@dataclass(frozen=True)
class Command:
    """One external program invocation, as data."""

    argv: tuple[str, ...]
    description: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    stdin: str | None = None
    stdin_secret: bool = False
    secrets: tuple[str, ...] = ()
    timeout: float | None = None
    grace: float = DEFAULT_GRACE
    # Its policy as a step of a plan, which `execute` applies and `Plan.render` shows.
    # Off: it runs, and its failure ends the plan with its exit code. Steps tied to each
    # other (`a || b`, `a | b`) are their caller's plain code (ci/images/steps.py).
    tolerate: str | None = None  # a failure goes on, noted as this text ({code}: the exit; "": not)
    output: Output | None = None  # where this step's output goes, when not where the plan's does

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a Command needs at least a program name")
        object.__setattr__(self, "argv", tuple(str(a) for a in self.argv))
        object.__setattr__(self, "env", dict(self.env))

    def line(self, redact: Redactor | None = None) -> str:
        """The command as a copy-pasteable shell line: `(cd DIR && K=V argv) < /dev/null`.
        Words are masked before quoting (quoting can split a secret). Stdin is
        never inlined (a secret, or a whole pipeline): a shell comment says so."""
        mask = redact or self.redactor()
        text = " ".join(
            [
                *(f"{k}={_quote(mask(v))}" for k, v in self.env.items()),
                *(_quote(mask(word)) for word in self.argv),
            ]
        )
        if self.cwd:
            text = f"(cd {_quote(mask(self.cwd))} && {text})"
        if self.stdin_secret:
            text += "  # stdin: a secret, not shown"
        elif self.stdin == "":
            text += " < /dev/null"
        elif self.stdin is not None:
            text += f"  # stdin: {len(self.stdin.encode())} bytes, not shown"
        return text

    def all_secrets(self) -> tuple[str, ...]:
        return (*self.secrets, *((self.stdin,) if self.stdin_secret and self.stdin else ()))

    def redactor(self) -> Redactor:
        """Masks this command's secrets: marked, secret stdin, env's, os.environ's, remembered."""
        return Redactor.for_env(self.env, extra=self.all_secrets())

    def policy(self) -> str:
        """The step's policy in words (` [a failure is tolerated]`), "" for the plain one."""
        return " [a failure is tolerated]" if self.tolerate is not None else ""


def _quote(word: str) -> str:
    """`shlex.quote`, except that a word that is all mask reads as `[REDACTED]`, not quoted."""
    return word if word == MASK else shlex.quote(word)


@dataclass(frozen=True)
class Plan:
    """An ordered list of commands plus the facts they were derived from."""

    commands: tuple[Command, ...] = ()
    facts: tuple[tuple[str, str], ...] = ()
    title: str = ""

    def render(self) -> str:
        redact = self.redactor()
        lines = [redact(f"# plan: {self.title}")] if self.title else []
        lines += [redact(f"# {k}: {v}") for k, v in self.facts]
        for i, cmd in enumerate(self.commands, 1):
            head = f"{i}. {cmd.description}" if cmd.description else f"{i}."
            lines.append(redact(head + cmd.policy()))
            lines.append(redact("   " + cmd.line(redact)))
        return "\n".join(lines) + "\n"

    def not_run(self) -> list[str]:
        """The dry-run as log lines, for a task whose stdout carries another result."""
        redact = self.redactor()
        return [
            redact(f"(dry-run) not run: {cmd.line(redact)}{cmd.policy()}") for cmd in self.commands
        ]

    def redactor(self) -> Redactor:
        extra = [s for c in self.commands for s in c.all_secrets()]
        return Redactor.for_env(*(c.env for c in self.commands), extra=extra)


@dataclass(frozen=True)
class Result:
    """What a command did: its exit code, and its output where it was captured."""

    code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    log_problem: str = ""  # why `run(log=…)`'s file is not complete ("" when it is)

    @property
    def ok(self) -> bool:
        return self.code == 0


class CommandFailed(Stop):
    """A checked command failed: the task ends with the child's exit code."""


class Interrupted(Stop):
    """We received SIGTERM/SIGINT/SIGHUP/SIGQUIT; the child tree is gone, exit 128+N
    (143/130/129/131)."""


def _in_buildkite() -> bool:
    return os.environ.get("BUILDKITE") == "true"


def echo(cmd: Command, redact: Redactor) -> None:
    """Announce a command on stderr: a Buildkite group header, or a rich line locally."""
    title = cmd.description or cmd.argv[0]
    line = redact(cmd.line(redact))
    if _in_buildkite():
        sys.stderr.write(f"--- {redact(title)}\n$ {line}\n")
        sys.stderr.flush()
        return
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(f"[bold cyan]▶ {escape(redact(title))}[/]")
    console.print(f"[dim]$ {escape(line)}[/]")


def note(message: str, *, redact: Redactor | None = None) -> None:
    """A log line for humans: stderr, redacted."""
    sys.stderr.write((redact or Redactor.for_env())(message) + "\n")
    sys.stderr.flush()


# Buildkite cancels with TERM, a terminal with INT (Ctrl-C) or QUIT (Ctrl-\), a lost agent
# session with HUP. Each ends the command's tree first; QUIT's default (exit, no clean-up)
# would leave the tree running.
FORWARDED_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


@contextlib.contextmanager
def _signals_recorded(received: list[int] | None = None) -> Iterator[list[int]]:
    """While a command runs, the `FORWARDED_SIGNALS` are recorded in the yielded list, which
    the wait loop checks (main thread only: elsewhere they cannot be caught). `received`,
    when given, is the caller's: off the main thread it passes a signal on by appending it."""
    received = [] if received is None else received
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    old = {sig: signal.signal(sig, lambda n, _: received.append(n)) for sig in FORWARDED_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(128 + signum, f"interrupted by signal {signum}")


def install_interrupt_handlers() -> None:
    """Between commands, SIGTERM/SIGINT/SIGHUP/SIGQUIT end the task with 143/130/129/131
    (main thread).
    While a command runs, `run` forwards the signal to its tree first instead."""
    if threading.current_thread() is threading.main_thread():
        for sig in FORWARDED_SIGNALS:
            signal.signal(sig, _raise_interrupted)


def _popen(cmd: Command, redact: Redactor, **how: object) -> subprocess.Popen[bytes] | Result:
    """Start the command in its own session; bash's 127 when it is not found, 126 when it
    is there but not runnable."""
    env = {**os.environ, **cmd.env}
    argv0 = cmd.argv[0]
    exe = shutil.which(argv0, path=env.get("PATH", os.defpath))
    if exe is None and os.sep in argv0 and os.path.exists(argv0):
        return Result(126, "", redact(f"error: cannot execute {argv0}: permission denied"))
    if exe is None:
        return Result(127, "", redact(f"error: command not found: {argv0}"))
    try:
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            [exe, *cmd.argv[1:]], cwd=cmd.cwd, env=env, start_new_session=True, **how
        )
    except OSError as exc:
        return Result(126, "", redact(f"error: cannot start {argv0}: {exc}"))


def _streams(
    output: Output, redact: Redactor, log: _Log | None = None
) -> tuple[int | None, int | None, list[_Relay]]:
    """The child's stdout and stderr, and the copies they go through: kept ("capture",
    unmasked), or masked (only when there is a secret to mask, or a `log` to write).
    "stderr": the child's stdout joins our stderr too, so that our stdout carries the
    task's result only."""
    if log is not None:  # one copy of both streams, to the log and our stderr (not for "null")
        relay = _Relay(None if output == "null" else sys.stderr.fileno(), redact, log=log)
        return relay.child_fd, relay.child_fd, [relay]
    if output == "null":
        return subprocess.DEVNULL, subprocess.DEVNULL, []
    if output == "capture":
        relays = [_Relay(None, Redactor()), _Relay(None, Redactor())]
        return relays[0].child_fd, relays[1].child_fd, relays
    targets = [sys.stderr] if output == "stderr" else [sys.stdout, sys.stderr]
    if redact:  # both streams of an "stderr" child share one copy: the order written stays
        relays = [_Relay(target.fileno(), redact) for target in targets]
        return relays[0].child_fd, relays[-1].child_fd, relays
    # Only "stderr" asks our stderr for its descriptor (a test's captured stream has none).
    return (sys.stderr.fileno(), None, []) if output == "stderr" else (None, None, [])


class _Log:
    """The file `run(log=…)` copies a command's output into: its first failure (open,
    write, or a delayed one at close: NFS, quota) is kept in `problem` and, unless
    `quiet` (the caller says it), said once on stderr; only the copy to it stops, the
    command and its streamed output go on."""

    def __init__(self, path: str, who: str, redact: Redactor, quiet: bool = False) -> None:
        self.path, self.who, self.redact, self.quiet = path, who, redact, quiet
        self.problem = ""
        self.fd: int | None = None
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            self._fail(exc)

    def write(self, data: bytes) -> None:
        while data and self.fd is not None:
            try:
                data = data[os.write(self.fd, data) :]
            except OSError as exc:
                self._fail(exc)

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.close(fd)
            except OSError as exc:
                self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        self.problem = self.problem or f"could not write {self.path}: {exc.strerror or exc}"
        if not self.quiet:
            note(f"{self.who}: {self.problem}; the output still streams", redact=self.redact)
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self.fd = None


class _Relay:
    """Copies a child's output stream to one of ours, every secret masked, or keeps it in
    `kept` (`target_fd` None); with a `log`, what it copies goes there too (and with no
    `target_fd`, only there). The child
    writes to a pseudo-terminal when our stream is a terminal (and there is no log), so
    it still sees one (colours, line buffering); `finish` waits until what it wrote is
    copied. A process it left running holds the stream open: it is still copied while
    we live, but never waited for."""

    def __init__(self, target_fd: int | None, redact: Redactor, log: _Log | None = None) -> None:
        self.target_fd = target_fd
        self.kept: list[bytes] = []
        self._log = log
        self._stream = StreamRedactor(redact)
        self._exited = threading.Event()
        self._drained = threading.Event()
        self._broken = False
        self._thread = threading.Thread(target=self._copy, daemon=True)
        if target_fd is not None and log is None and os.isatty(target_fd):
            self.read_fd, self.child_fd = _pty_pair(target_fd)
        else:
            self.read_fd, self.child_fd = os.pipe()

    def start(self) -> None:
        os.close(self.child_fd)  # the child holds its own copy: EOF once its tree is done
        self._thread.start()

    def finish(self, bound: float = 5.0) -> None:
        self._exited.set()
        self._drained.wait(bound)

    def _copy(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.read_fd], [], [], POLL)
                if not ready:
                    if self._exited.is_set() and not self._drained.is_set():
                        self._write(self._stream.flush())  # all the child wrote is out
                        self._drained.set()
                    continue
                try:
                    data = os.read(self.read_fd, 65536)
                except OSError:  # EIO: a pseudo-terminal whose writers are all gone
                    data = b""
                if not data:
                    break
                self._write(self._stream.feed(data))
        finally:
            self._write(self._stream.flush())
            if self._log is not None:
                self._log.close()
            self._drained.set()
            with contextlib.suppress(OSError):
                os.close(self.read_fd)

    def _write(self, data: bytes) -> None:
        if self._log is not None:
            self._log.write(data)
        if self.target_fd is None:
            if self._log is None:
                self.kept.append(data)
            return
        while data and not self._broken:
            try:
                data = data[os.write(self.target_fd, data) :]
            except OSError:  # our stream is gone (closed pipe, full disk): keep draining
                self._broken = True


def _pty_pair(like_fd: int) -> tuple[int, int]:
    """A pseudo-terminal (master, slave) with `like_fd`'s size, that keeps newlines as written."""
    import fcntl
    import termios

    master, slave = os.openpty()
    with contextlib.suppress(OSError, termios.error):
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
    with contextlib.suppress(OSError):
        size = fcntl.ioctl(like_fd, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
    return master, slave


def _end_group(root: int, grace: float, hurry: Callable[[], bool] = lambda: False) -> bool:
    """End a `leaves_nothing` program (it starts no daemon: its session is all of it): TERM
    its group, KILL the group if the root outlives `grace` (or at once when `hurry()`);
    True if KILL was needed. The root is not reaped yet (WNOWAIT), so the group's id
    cannot be reused."""

    with contextlib.suppress(OSError):
        os.killpg(root, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while not _exited(root) and time.monotonic() < deadline and not hurry():
        time.sleep(POLL)
    killed = not _exited(root)
    with contextlib.suppress(OSError):
        os.killpg(root, signal.SIGKILL)  # and whatever else of the group is left
    return killed


def _exited(pid: int) -> bool:
    """Whether our child `pid` has exited; it is not reaped (WNOWAIT), so its pid, and the
    id of the group it led, cannot be reused by another process yet."""
    with contextlib.suppress(ChildProcessError):
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    return True


def exit_code(returncode: int) -> int:
    """Popen's -N for "killed by signal N" becomes the shell's 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def run(
    cmd: Command,
    output: Output = "stderr",
    check: bool = False,
    *,
    quiet: bool = False,
    leaves_nothing: bool = False,
    cancel: list[int] | None = None,
    log: str | None = None,
    leftovers: Callable[[psutil.Process], object] | None = None,
) -> Result:
    """Run one command; its exit status (and output when captured).
    `output`: "stderr" streams the child's stdout to our stderr (our stdout is the
    task's result); "stdout" lets the child write it; "capture" keeps; "null" drops.
    `leaves_nothing`: a program that starts no daemon, ended as its group (`_end_group`).
    `cancel`: a signal number appended to it ends the command as that signal would (for
    commands run off the main thread, which receives every signal): `Interrupted`.
    `log` (with "stderr", or "null": only the log): the output, masked, also goes to this
    file, as `2>&1 | tee` did, except that a process the command left running holding it
    is not waited for; what could not be written is `Result.log_problem` (and said on
    stderr unless `quiet`).
    `leftovers`: when the command exits, what it left running of its tree is ended (TERM,
    KILL after `SIGNAL_GRACE`) before its output is finished; each process is handed to
    `leftovers` first (to be listed). Without it, what is left runs on."""
    redact = cmd.redactor()
    if not quiet:
        echo(cmd, redact)
    if log is not None and output not in ("stderr", "null"):
        raise ValueError("a log is written only for output='stderr' or 'null'")
    if leftovers is not None and leaves_nothing:
        raise ValueError("a command that leaves nothing has no leftovers to end")
    sink = None if log is None else _Log(log, cmd.description or cmd.argv[0], redact, quiet)
    out, err, relays = _streams(output, redact, sink)
    cgroup = preexec = None
    if not leaves_nothing:
        from ci import proctree

        # Before the child exists: an orphan made in its first instant (`(setsid x &)`)
        # must re-parent to us, not to init, or no sweep can ever find it.
        proctree.become_subreaper()
        cgroup = proctree.Cgroup.create()  # where cgroup v2 is writable; the child joins it
        preexec = cgroup.joiner() if cgroup else None
    with _signals_recorded(cancel) as received:
        # Started and known as a command's root at once (`proctree.STARTING`).
        with contextlib.nullcontext() if leaves_nothing else proctree.STARTING:
            proc = _popen(
                cmd, redact, stdout=out, stderr=err, preexec_fn=preexec,
                stdin=subprocess.DEVNULL if cmd.stdin is None else subprocess.PIPE,
            )  # fmt: skip
            tree = None
            if not (leaves_nothing or isinstance(proc, Result)):
                tree = proctree.Tree(proc.pid, cgroup)
        for relay in relays:
            relay.start()  # where no child started, its copy ends at once
        try:
            if isinstance(proc, Result):
                if cgroup is not None:
                    cgroup.retire()
                if check:
                    raise CommandFailed(proc.code, proc.stderr)
                return proc
            code, timed_out = _wait(proc, cmd, tree, received, leftovers)
        finally:
            for relay in relays:
                relay.finish()

    if received:  # the first signal says why we stop (a second one only hurried the end)
        _raise_interrupted(received[0], None)
    kept = (b"".join(r.kept).decode(errors="replace") for r in relays)
    stdout, stderr = kept if output == "capture" else ("", "")
    result = Result(code, stdout, stderr, timed_out, sink.problem if sink else "")
    if timed_out and not quiet:
        note(f"timeout: {cmd.line(redact)} exceeded {cmd.timeout:g}s (exit {code})", redact=redact)
    if check and code != 0:
        raise failed(cmd, result, redact)
    return result


def failed(cmd: Command, result: Result, redact: Redactor | None = None) -> CommandFailed:
    """The error that ends a task on a failed command: its line, its exit, what it said."""
    mask = redact or cmd.redactor()
    detail = f": {result.stderr.strip()}" if result.stderr.strip() else ""
    return CommandFailed(
        result.code, mask(f"error: {cmd.line(mask)} failed with exit {result.code}{detail}")
    )


def _wait(
    proc: subprocess.Popen[bytes],
    cmd: Command,
    tree: Tree | None,
    received: list[int],
    leftovers: Callable[[psutil.Process], object] | None = None,
) -> tuple[int, bool]:
    """Wait for the child, enforcing the timeout and forwarding signals. A signal ends the
    tree (TERM, KILL after the grace); another signal during that grace KILLs it at once.
    With `leftovers` (`run`'s), once the child exits the rest of its tree is ended, the
    child still unreaped (so its group's id cannot name another group meanwhile)."""
    if cmd.stdin is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(cmd.stdin.encode())
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()

    deadline = None if cmd.timeout is None else time.monotonic() + cmd.timeout
    timed_out = False
    code: int | None = None
    exited: list[int] = []  # readable the moment the child exits (a pidfd: Linux 5.3+)
    with contextlib.suppress(OSError, AttributeError):
        exited.append(os.pidfd_open(proc.pid))

    def end(grace: float, hurry: Callable[[], bool] = lambda: False) -> bool:
        return tree.terminate(grace, hurry) if tree else _end_group(proc.pid, grace, hurry)

    while code is None:
        if tree:
            tree.sweep()
        select.select(exited, [], [], POLL)  # without a pidfd, a plain poll
        if leftovers is not None and tree is not None and _exited(proc.pid):
            tree.terminate(SIGNAL_GRACE, lambda: bool(received), seen=leftovers)
            code = exit_code(proc.wait())
        elif proc.poll() is not None:
            code = exit_code(proc.returncode)
        elif received:
            end(min(cmd.grace, SIGNAL_GRACE), _another_signal(received))
            code = exit_code(proc.wait())
        elif deadline is not None and time.monotonic() >= deadline:
            timed_out = True
            code = 137 if end(cmd.grace, lambda: bool(received)) else 124
            proc.wait()
    for fd in exited:
        os.close(fd)
    if tree:
        tree.close()
    return code, timed_out


def _another_signal(received: list[int]) -> Callable[[], bool]:
    """Whether a signal came after those `received` holds now."""
    seen = len(received)
    return lambda: len(received) > seen


Runner = Callable[[Command, Output, bool], Result]  # `run`, or `run` under a deadline


def execute(
    plan: Plan,
    *,
    dry_run: bool = False,
    output: Output = "stderr",
    check: bool = False,
    log_dry_run: bool = False,
    runner: Runner = run,
    log: Callable[[str], None] | None = None,
) -> int:
    """Run the plan's steps in order, each under its policy; the first failure not
    tolerated ends it with its exit code (`CommandFailed` with `check`).
    `dry_run` prints the plan on stdout, or with `log_dry_run` as `(dry-run) not run: …`
    lines through `log` (default: stderr)."""
    if dry_run:
        if log_dry_run:
            for line in plan.not_run():
                (log or note)(line)
        else:
            sys.stdout.write(plan.render())
            sys.stdout.flush()
        return 0
    for cmd in plan.commands:
        result = runner(cmd, cmd.output or output, check and cmd.tolerate is None)
        if result.ok:
            continue
        if cmd.tolerate is not None:
            if cmd.tolerate:
                note(cmd.tolerate.format(code=result.code))
        elif check:
            raise failed(cmd, result)
        else:
            return result.code
    return 0


@dataclass(frozen=True)
class Service:
    """A long-running program started by `spawn`: what to find it by again, later."""

    pid: int
    started: float  # the process's start time, so that a recycled pid is never signalled
    argv: tuple[str, ...]
    log: str


def spawn(cmd: Command, log: str) -> Service:
    """Start a service that outlives us (the sandbox's dockerd, registry) in its own
    session and return at once: output to `log`, stdin /dev/null, echoed like any."""
    from ci import proctree

    redact = cmd.redactor()
    echo(cmd, redact)
    with open(log, "ab") as sink:
        proc = _popen(cmd, redact, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
    if isinstance(proc, Result):
        raise CommandFailed(proc.code, proc.stderr)
    proctree.exempt(proc.pid)  # an orphan sweep of a later command must never claim it
    ident = proctree._identity(proc.pid)
    return Service(proc.pid, ident[1] if ident else 0.0, cmd.argv, log)


def alive(service: Service) -> bool:
    """The service's process still runs (same pid *and* start time, not a zombie)."""
    from ci import proctree

    return proctree.running((service.pid, service.started)) is not None


def stop(service: Service, *, grace: float = 30.0) -> bool:
    """SIGTERM the service, wait up to `grace` seconds, then SIGKILL (`proctree.end`; a
    zombie, exited but not reaped by its parent, is stopped). True if KILL was needed."""
    from ci import proctree

    ident = (service.pid, service.started)
    return proctree.end(lambda: [p for p in [proctree.running(ident)] if p], [], grace)


def capture(
    argv: Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = CAPTURE_TIMEOUT,
    grace: float = DEFAULT_GRACE,
) -> Result:
    """A short read-only probe (git rev-parse, docker version): quiet, captured, and
    `leaves_nothing`, so that it costs little more than the program itself. Never
    unbounded: past `timeout` it is ended, and its stderr names it (`PROGRAM timed out
    after Ns`)."""
    cmd = Command(tuple(argv), env=env or {}, cwd=cwd, timeout=timeout, grace=grace)
    result = run(cmd, "capture", quiet=True, leaves_nothing=True)
    if result.timed_out:
        said = f"{argv[0]} timed out after {timeout:g}s"
        return dataclasses.replace(result, stderr="\n".join(filter(None, [result.stderr, said])))
    return result


@contextlib.contextmanager
def buildkite_group(title: str) -> Iterator[None]:
    """A collapsible log section around a block of work (stderr only)."""
    if _in_buildkite():
        sys.stderr.write(f"--- {Redactor.for_env()(title)}\n")
    else:
        note(f"== {title}")
    yield
