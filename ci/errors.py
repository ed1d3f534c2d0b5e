"""Errors that end a task with a chosen exit code and no traceback.

The exit-code table of the foundation issue is the contract callers depend on;
the constants below name its rows so that tasks never use bare numbers. Two kinds of
problem end a task with `error:` lines, and each has its own type so that a raise says
which it is: `UserError` (the input is wrong: exit 2) and `Failure` (a check found
problems, or something outside us failed: exit 1). `TaskError` is what both are, for a
caller that reports or gathers either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

# Bad input: a usage error or any other input error, found before anything runs
# (image builds included: the scripts exited 1 there, which amd-build retried).
BAD_INPUT = 2
FAILURE = 1  # a check found problems, or a command we ran failed (the scripts' 1)
NOT_FOUND = 127  # a program we need is not on PATH (the shell's code for it)
# Our stdout could not be written (a full disk, `> /dev/full`): sysexits' EX_IOERR,
# distinct from every task's own outcome (0/1/2), and never 0, so that a caller
# such as `if word=$(vllm-omni-ci skip-ci …)` does not take a lost answer for "stop".
STDOUT_FAILED = 74


class TaskError(Exception):
    """One `error: ...` line per problem, then exit `code`: the type decides the code, so
    a subclass names one row of the exit-code table and a raise never picks a number."""

    code: ClassVar[int]

    def __init__(self, *problems: str) -> None:
        super().__init__("; ".join(problems))
        self.problems: tuple[str, ...] = tuple(problems)

    @classmethod
    def collect(cls, problems: Iterable[str]) -> None:
        """Raise once for all problems found, so users fix them in one round."""
        found = tuple(problems)
        if found:
            raise cls(*found)


class UserError(TaskError):
    """Bad input (an option, an argument, a build variable, the target checkout's shape):
    exit 2, before anything runs."""

    code = BAD_INPUT


class Failure(TaskError):
    """The input was fine but the work was not: a check found problems (a pipeline that
    does not validate, a gate's findings) or something outside us failed (a registry, an
    API, a file we could not write, a command's odd output): exit 1."""

    code = FAILURE


class ProgramMissing(Failure):
    """A program we need is not on PATH: exit 127, as a shell says `command not found`.
    A subclass rather than a `code=` keyword on `Failure`, so that each type keeps one
    code and no raise can slip a bare number back in."""

    code = NOT_FOUND


class Unavailable(UserError):
    """Input naming what this repo or host does not have (a tier for a platform): exit 2 like
    any input error; a caller that can skip instead (a nox session) skips with `reason`."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class Stop(Exception):
    """End the task with `code` after printing `lines` to stderr (skip-ci's 0/1, a runner's
    mapped exit status: outcomes that are not input errors)."""

    def __init__(self, code: int, *lines: str) -> None:
        super().__init__(f"exit {code}")
        self.code = code
        self.lines: tuple[str, ...] = tuple(lines)


def close_match(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate `word` most likely misspells (`paln` → `plan`), if one is close: the
    `did you mean` of an `error:` or `warning:` line (here, below every module that says one)."""
    import difflib  # only on an error

    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None
