"""`task`: Invoke's decorator, plus the exit-code contract and the short flags.

Every task raises `UserError` (one `error:` line per problem) or `Stop` (a
chosen code); this wrapper turns both into Invoke's `Exit`, so neither `inv`
nor `vllm-omni-ci` ever shows a traceback for a user error.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

from invoke.exceptions import Exit
from invoke.parser.argument import Argument
from invoke.tasks import Task
from invoke.tasks import task as invoke_task

from ci.errors import Stop, TaskError
from ci.redact import Redactor

F = TypeVar("F", bound=Callable[..., Any])


def after_dashdash(argv: Sequence[str] | None = None) -> list[str]:
    """Everything after the first `--`, with its quoting intact: Invoke joins it into one
    string (`Context.remainder`), so `-m 'a and b'` would come back as three words."""
    args = list(sys.argv if argv is None else argv)
    return args[args.index("--") + 1 :] if "--" in args else []


# Set by a caller that reports UserError and Stop its own way (the nox tier sessions): the
# task wrapper and `CiProgram.run` then let them through unprinted.
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


# The only short flags, each with one meaning in every task. Invoke's automatic
# ones gave `-r` to --repo, --root and --dry-run, and `-p` four meanings; the
# core options' own (`-h`, `-l`, `-V`, ...) are Invoke's and mean the same everywhere.
SHORT_FLAGS = {"repo": "r", "dry_run": "n", "jobs": "j"}
# The help of an option every task means the same by, unless a task words its own.
COMMON_HELP = {
    "repo": "target checkout (default: git top-level of the current directory)",
    "dry_run": "print the plan and run nothing",
    "to_ref": "end of that range (default HEAD; WORKTREE = include uncommitted work)",
}


class CiTask(Task[Any]):
    """A task with our short flags only, and, for a task that replaces a script,
    the script's name: its arguments then follow the script's grammar (ci.grammar)."""

    def __init__(self, body: Callable[..., Any], *, script: str = "", **kwargs: Any) -> None:
        super().__init__(body, auto_shortflags=False, **kwargs)
        self.script = script

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        kept = dict(self.help)  # Invoke pops each help string: a second parse had none
        try:
            arguments = super().get_arguments(ignore_unknown_help)
        finally:
            self.help = kept
        for argument in arguments:
            if argument.name in SHORT_FLAGS:
                argument.names = (*argument.names, SHORT_FLAGS[argument.name])
        return arguments


def task(**kwargs: Any) -> Callable[[F], Task[Any]]:
    """Use like `@invoke.task(...)` (always with parentheses); `script=` as in `CiTask`."""

    def decorate(fn: F) -> Task[Any]:
        @functools.wraps(fn)
        def body(*a: Any, **kw: Any) -> Any:
            from ci.door import install_interrupt_handlers

            try:
                install_interrupt_handlers()
                return fn(*a, **kw)
            except (TaskError, Stop) as exc:
                if PASS_ERRORS.get():
                    raise
                raise Exit(code=report(exc)) from None

        params = inspect.signature(fn).parameters
        common = {name: text for name, text in COMMON_HELP.items() if name in params}
        kwargs["help"] = {**common, **kwargs.get("help", {})}
        made: Task[Any] = invoke_task(klass=CiTask, **kwargs)(body)
        return made

    return decorate
