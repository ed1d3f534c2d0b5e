"""Errors that end a task with a chosen exit code and no traceback.

The exit-code table of the foundation issue is the contract callers depend on;
the constants below name its rows so that tasks never use bare numbers.
"""

from __future__ import annotations

from collections.abc import Iterable

# Bad input: a usage error or any other input error, found before anything runs
# (image builds included: the scripts exited 1 there, which amd-build retried).
BAD_INPUT = 2
FAILURE = 1  # a check found problems, or a command we ran failed (the scripts' 1)
# Our stdout could not be written (a full disk, `> /dev/full`): sysexits' EX_IOERR,
# distinct from every task's own outcome (0/1/2), and never 0, so that a caller
# such as `if word=$(vllm-omni-ci skip-ci …)` does not take a lost answer for "stop".
STDOUT_FAILED = 74


class UserError(Exception):
    """Bad input: one `error: ...` line per problem, then exit `code`."""

    def __init__(self, *problems: str, code: int = BAD_INPUT) -> None:
        super().__init__("; ".join(problems))
        self.problems: tuple[str, ...] = tuple(problems)
        self.code = code

    @classmethod
    def collect(cls, problems: Iterable[str], code: int = BAD_INPUT) -> None:
        """Raise once for all problems found, so users fix them in one round."""
        found = tuple(problems)
        if found:
            raise cls(*found, code=code)


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
