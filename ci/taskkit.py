"""`task`: Invoke's decorator, plus the exit-code contract.

Every task raises `UserError` (one `error:` line per problem) or `Stop` (a
chosen code); this wrapper turns both into Invoke's `Exit`, so neither `inv`
nor `vllm-omni-ci` ever shows a traceback for a user error.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from invoke.exceptions import Exit
from invoke.tasks import Task
from invoke.tasks import task as invoke_task

from ci.errors import Stop, UserError
from ci.redact import Redactor

F = TypeVar("F", bound=Callable[..., Any])


def report(exc: UserError | Stop) -> int:
    redact = Redactor.for_env()
    if isinstance(exc, UserError):
        lines = [p if p.startswith("error:") else f"error: {p}" for p in exc.problems]
    else:
        lines = list(exc.lines)
    for line in lines:
        sys.stderr.write(redact(line) + "\n")
    sys.stderr.flush()
    return exc.code


def task(**kwargs: Any) -> Callable[[F], Task[Any]]:
    """Use like `@invoke.task(...)` (always with parentheses)."""

    def decorate(fn: F) -> Task[Any]:
        @functools.wraps(fn)
        def body(*a: Any, **kw: Any) -> Any:
            from ci.door import install_interrupt_handlers

            try:
                install_interrupt_handlers()
                return fn(*a, **kw)
            except (UserError, Stop) as exc:
                raise Exit(code=report(exc)) from None

        made: Task[Any] = invoke_task(**kwargs)(body)
        return made

    return decorate
