"""`vllm-omni-ci`: the same task namespace as `inv`, usable from any directory.

Our own Invoke `Program` (also behind `inv` and the nox tier sessions), since callers
tell a usage error from a failure by exit code: our grammar (`ci.grammar`) makes
each problem one `error:` line, exit 2; Invoke's `c.run()` options, `-f/--config`
and explicitly empty paths or choices are refused; a pipe closed early ends quietly
(141), a stdout that is closed or cannot be written is one `error:` line and exit 74.
No Invoke config file is read (`NoConfig`), and everything printed on stdout is
masked like every other stream (`_GuardedStdout`).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn, Protocol

from invoke.config import Config
from invoke.exceptions import Exit, UnexpectedExit
from invoke.parser import Parser, ParseResult
from invoke.program import Program

from ci.errors import STDOUT_FAILED, Stop, TaskError, Unavailable, UserError
from ci.grammar import REFUSED, RUN_ONLY_CORE, parse, refuse_empty_values, unexpected
from ci.redact import Redactor, StreamRedactor, learnt
from ci.taskkit import PASS_ERRORS, message_lines, report
from ci.tasks import ns

DISTRIBUTION = "vllm-omni-ci"


class NoConfig(Config):
    """Invoke's Config with none of its sources but the defaults: no task reads it.

    Invoke would read /etc/invoke.*, ~/.invoke.*, invoke.* beside tasks.py, the file
    `$INVOKE_RUNTIME_CONFIG` names and `INVOKE_*` variables, and run a `.py` one as code:
    anyone who can write one of those files would run code in every CI job, and a
    malformed one ended every task in a traceback. Nothing is opened, nothing is read.
    """

    def load_system(self, merge: bool = True) -> None:
        pass

    def load_user(self, merge: bool = True) -> None:
        pass

    def load_project(self, merge: bool = True) -> None:
        pass

    def load_runtime(self, merge: bool = True) -> None:
        pass

    def load_shell_env(self) -> None:
        pass

    def set_project_location(self, path: Any) -> None:
        super().set_project_location(None)

    def set_runtime_path(self, path: Any) -> None:
        super().set_runtime_path(None)


class CiProgram(Program):
    """Invoke's Program, parsing with our grammar (`ci.grammar`): usage errors exit 2."""

    def __init__(self, *args: Any, option_defaults: Mapping[str, str] | None = None, **kw: Any):
        super().__init__(*args, **{**kw, "config_class": NoConfig})  # no config file, ever
        # Values for task options the command line leaves out (`nox -s ready`: the sample).
        self.option_defaults = dict(option_defaults or {})

    def run(self, argv: list[str] | None = None, exit: bool = True) -> None:
        """Run the command line; every way out is an exit code (stdout flushed first).

        The process's own streams are made safe first (`_standard_streams`: a closed stdout
        is exit 74 before anything runs). While it runs, stdout, whatever it is (a caller's
        capture too), is masked, and a failed write is a `StdoutFailed` (any other OSError
        may be a task's own file)."""
        if sys.stdout is sys.__stdout__:
            _standard_streams()
        outer = sys.stdout
        if isinstance(outer, _GuardedStdout):
            self._run(argv)
            return
        guard = sys.stdout = _GuardedStdout(outer)
        try:
            self._run(argv)
        finally:
            with contextlib.suppress(OSError):  # held text of an early way out, best effort
                guard.flush()
            sys.stdout = outer

    def _run(self, argv: list[str] | None) -> None:
        code: str | int | None = 0
        try:
            try:
                self.parse(argv)
                self.refuse_run_options()
                refuse_empty_values(self.tasks)
                self.parse_cleanup()
                self.update_config()
                self.execute()
            except TaskError as exc:
                if PASS_ERRORS.get():
                    raise
                code = report(exc)
            except Exit as exc:
                if exc.message:
                    print(exc.message, file=sys.stderr)
                code = exc.code
            except UnexpectedExit as exc:
                code = int(exc.result.exited)
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

    def parse_core_args(self) -> None:
        """The whole command line, core options and tasks alike, in one pass of our grammar."""
        assert self.namespace is not None
        binary = self.binary or "vllm-omni-ci"
        self.parser = Parser(contexts=self.namespace.to_contexts())
        scripts = {
            name: getattr(self.namespace[name], "script", "") for name in self.parser.contexts
        }
        parsed = parse(self.argv[1:], self.initial_context, self.parser.contexts, scripts, binary)
        wanted = parsed[0].args["help"].value
        if isinstance(wanted, str) and wanted not in self.parser.contexts:  # `--help NAME`
            raise UserError(unexpected(parsed[0], self.parser.contexts, wanted, "", binary))
        self.core = ParseResult(parsed[:1])
        self.core.remainder = parsed.remainder
        # The tasks too (no `parse_tasks` pass), with `option_defaults` where an option is left out.
        self.tasks = ParseResult(parsed[1:])
        for context in self.tasks:
            for name, value in self.option_defaults.items():
                argument = context.args.get(name)
                if argument is not None and not argument.got_value:
                    argument.set_value(value)

    def parse(self, argv: list[str] | None) -> ParseResult:
        """The task contexts of `argv` (program name first), parsed and nothing run."""
        self.create_config()
        self.parse_core(argv)
        self.parse_collection()
        return self.tasks

    def refuse_run_options(self) -> None:
        """Invoke's `c.run()` options and `-f/--config` are errors: no task reads them, and
        accepted they mislead (`step --dry -- CMD` ran CMD; `-T 60` bounded nothing)."""
        problems = [
            f"--{name}: not accepted: Invoke's option for shell commands, which no task runs"
            + (" (did you mean --dry-run?)" if name == "dry" else "")
            for name in RUN_ONLY_CORE
            if self.args[name].got_value
        ]
        if self.args["config"].got_value:
            problems.append(
                "-f/--config: config files are not supported (no task reads one); give settings"
                f" as task options or environment variables (see `{self.binary} <task> --help`)"
            )
        UserError.collect(problems)

    def print_version(self) -> None:
        """`--version`: the installed distribution's version (the build read it from VERSION),
        looked up only when asked, so that startup stays cheap."""
        from importlib import metadata

        try:
            version = metadata.version(DISTRIBUTION)
        except metadata.PackageNotFoundError:  # run from a source tree that was never installed
            version = "unknown"
        print(f"{DISTRIBUTION} {version}")

    def print_help(self) -> None:
        """`--help` without the `c.run()` core options: they are refused, so not offered."""
        shown = [
            row
            for row in self.initial_context.help_tuples()
            if not {part.split("=")[0].split(" ")[0] for part in row[0].split(", ")} & REFUSED
        ]
        print(f"Usage: {self.binary} [--core-opts] <subcommand> [--subcommand-opts] ...\n")
        print("Core options:\n")
        self.print_columns(shown)
        self.list_tasks()


class StdoutFailed(OSError):
    """Writing our stdout failed (not a closed pipe: that is BrokenPipeError)."""


class _GuardedStdout:
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


def program(binary: str = "vllm-omni-ci", **option_defaults: str) -> CiProgram:
    return CiProgram(
        namespace=ns,
        name="vllm-omni-ci",
        binary=binary,
        option_defaults=option_defaults,
    )


def main() -> None:
    program().run()


def adopt_inv() -> None:
    """`inv` (from tasks.py): rerun the command line under `CiProgram`, so `inv TASK` and
    `vllm-omni-ci TASK` agree on usage errors and Ctrl-C."""
    if os.path.basename(sys.argv[0]) not in ("inv", "invoke"):
        return
    program(binary=os.path.basename(sys.argv[0])).run(list(sys.argv))
    sys.exit(0)


class NoxSession(Protocol):
    """What the tier sessions use of `nox.Session` (nox is not a dependency of `ci/`)."""

    posargs: list[str]

    def error(self, *args: Any) -> NoReturn: ...

    def skip(self, *args: Any) -> NoReturn: ...


def nox_tier(session: NoxSession, tier: str, *, default_repo: str) -> None:
    """`nox -s TIER -- OPTIONS` is `vllm-omni-ci tier TIER OPTIONS`, default --repo the sample.

    A problem ends the session, never nox, which then reports it and goes on to the next
    session: a tier the repo lacks is `session.skip` with its reason; bad input or a failed
    tier `session.error` with the line `tier` prints. A signal is nox's KeyboardInterrupt.
    """
    import logging
    import signal

    from ci.door import FORWARDED_SIGNALS, Interrupted

    # nox logs everything on the root logger, where Invoke would echo its parser's steps.
    logging.getLogger("invoke").setLevel(logging.WARNING)
    handlers = {sig: signal.getsignal(sig) for sig in FORWARDED_SIGNALS}  # the task sets ours
    passing = PASS_ERRORS.set(True)
    try:
        program(repo=default_repo).run(["vllm-omni-ci", "tier", tier, *session.posargs])
    except Unavailable as exc:
        session.skip(exc.reason)
    except Interrupted:
        raise KeyboardInterrupt from None
    except (TaskError, Stop) as exc:
        said = "; ".join(line.removeprefix("error: ").rstrip(":") for line in message_lines(exc))
        session.error(said or f"a blocking step failed (exit {exc.code}); see the summary")
    except SystemExit as exc:  # the program's own ways out (74: stdout not written)
        if exc.code:
            session.error(f"exit {exc.code}")
    finally:
        PASS_ERRORS.reset(passing)
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
