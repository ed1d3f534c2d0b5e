"""Which steps may run on this machine (`RULE`), and which failures block the tier.

A step with no `-m` at all is not CPU-runnable: nothing says it needs no
accelerator. Soft failures follow Buildkite: `soft_fail: true` (every AMD grade
except `Blocking`, missing grades included) or a list of `exit_status` rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ci.pipeline.mirror import m_expressions, polarities

_PYTHON_MODULE = re.compile(r"\bpython[0-9.]*\s+-m\s+\S+")

RULE = (
    "A step is CPU-runnable only if it has a pytest -m expression and every -m in it "
    "has a positive `cpu` term (not negated); those run here with the no-GPU pre-flight "
    "(VLLM_CI_EXPECTED_GPU_COUNT=0). Every other step needs hardware: it runs when this "
    "host has at least the devices its hardware asks for, else it is reported as "
    "`needs <hardware>: <why>` and does not run unless --force is given."
)


def marker_expressions(commands: Iterable[str]) -> list[str]:
    """Every pytest `-m EXPR` in the commands (`python -m module` switches removed)."""
    return m_expressions(_PYTHON_MODULE.sub(" ", "\n".join(commands)))


def cpu_runnable(commands: Iterable[str]) -> bool:
    """Every `-m` has `cpu` as a whole word not directly negated (and there is one)."""
    expressions = marker_expressions(commands)
    return bool(expressions) and all(any(polarities(e, "cpu")) for e in expressions)


@dataclass(frozen=True)
class SoftFail:
    """Buildkite's `soft_fail`: none, every non-zero exit, or listed exit statuses."""

    every: bool = False
    statuses: frozenset[int] = frozenset()

    def covers(self, code: int) -> bool:
        return code != 0 and (self.every or code in self.statuses)

    @property
    def blocking(self) -> bool:
        return not self.every and not self.statuses

    def describe(self) -> str:
        if self.statuses and not self.every:
            return "soft_fail on exit " + ", ".join(map(str, sorted(self.statuses)))
        return "soft_fail" if self.every else "blocking"


def as_int(value: Any) -> int | None:
    """A YAML number written as a number or a string (`"3"`); None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def soft_fail_of(value: Any) -> SoftFail:
    """Parse a step's `soft_fail` value (bool, "true", or a list of `{exit_status: N|"*"}`)."""
    if isinstance(value, bool):
        return SoftFail(every=value)
    if isinstance(value, str):
        return SoftFail(every=value.strip().lower() == "true")
    if isinstance(value, list):
        statuses: set[int] = set()
        for rule in value:
            status = rule.get("exit_status") if isinstance(rule, Mapping) else None
            if status == "*":
                return SoftFail(every=True)
            if (number := as_int(status)) is not None:
                statuses.add(number)
        return SoftFail(statuses=frozenset(statuses))
    return SoftFail()


@dataclass(frozen=True)
class Retry:
    """One `retry.automatic` rule on an exit status ("*" = any failure)."""

    status: int | None  # None = any non-zero exit
    limit: int

    def matches(self, code: int) -> bool:
        return code != 0 and (self.status is None or self.status == code)


def retries_of(value: Any) -> tuple[Retry, ...]:
    """A step's `retry.automatic` exit-status rules (`signal_reason` rules are infra-only).

    `automatic: true` and a rule without `limit` mean Buildkite's default of 2.
    """
    automatic = value.get("automatic") if isinstance(value, Mapping) else None
    if automatic is True:
        return (Retry(None, 2),)
    found = []
    for rule in automatic if isinstance(automatic, list) else [automatic]:
        if not isinstance(rule, Mapping) or "exit_status" not in rule:
            continue
        status, limit = as_int(rule["exit_status"]), as_int(rule.get("limit", 2))
        if (status is not None or rule["exit_status"] == "*") and limit and limit > 0:
            found.append(Retry(status, limit))
    return tuple(found)
