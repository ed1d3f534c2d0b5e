"""Errors that end a task with a chosen exit code and no traceback.

The exit-code table of the foundation issue is the contract callers depend on;
the constants below name its rows so that tasks never use bare numbers.
"""

from __future__ import annotations

from collections.abc import Iterable

USAGE = 2  # bad arguments or usage, and any other input error
FAILURE = 1  # a validation failure whose code the original scripts fixed at 1
IMAGE_INPUT = 2  # image builds: moved from the original's 1 (amd-build retries exit 1)
COV_ARGS = 2
# Our stdout could not be written (a full disk, `> /dev/full`): sysexits' EX_IOERR,
# distinct from every task's own outcome (0/1/2), and never 0, so that a caller
# such as `if word=$(vllm-omni-ci skip-ci …)` does not take a lost answer for "stop".
STDOUT_FAILED = 74


class UserError(Exception):
    """Bad input: one `error: ...` line per problem, then exit `code`."""

    def __init__(self, *problems: str, code: int = USAGE) -> None:
        super().__init__("; ".join(problems))
        self.problems: tuple[str, ...] = tuple(problems)
        self.code = code

    @classmethod
    def collect(cls, problems: Iterable[str], code: int = USAGE) -> None:
        """Raise once for all problems found, so users fix them in one round."""
        found = tuple(problems)
        if found:
            raise cls(*found, code=code)


class Stop(Exception):
    """End the task with `code`, after printing `lines` verbatim to stderr.

    For outcomes that are not input errors but still need a specific code,
    such as skip-ci's 0/1 or a runner's mapped exit status.
    """

    def __init__(self, code: int, *lines: str) -> None:
        super().__init__(f"exit {code}")
        self.code = code
        self.lines: tuple[str, ...] = tuple(lines)
