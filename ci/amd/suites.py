"""Which AMD suites a build runs: the one rule, in `select_suites`.

As `select_test_suites.py`: a debug override wins, then `main` (merge, or
nightly when NIGHTLY=1), then the PR's labels (ready, merge, nightly), else ready.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TypeVar

from ci import topology
from ci.errors import TaskError, UserError, close_match
from ci.platforms import Platform
from ci.refnames import branch_error


@dataclass(frozen=True)
class Suite:
    name: str  # ready / merge / nightly
    group: str  # the spec prefix, also the combined pipeline's group name
    file: str  # relative to .buildkite/amd
    label: str  # the PR label that selects it
    level: str | None  # the skip-ci level that gates it; nightly is never gated

    @property
    def spec(self) -> str:
        return f"{self.group}:{self.file}"


# The ROCm rows of the platform-by-tier table, in tier order (ready, merge, nightly).
SUITES: tuple[Suite, ...] = tuple(
    Suite(
        row.tier.value,
        f"{row.tier.value.upper()}_TESTS",
        PurePosixPath(row.file).name,
        row.label,
        None if row.level == "l45" else row.level,
    )
    for row in topology.rows(Platform.ROCM)
)
BY_NAME = {s.name: s for s in SUITES}
FALLBACK_NOTICE = (
    "No AMD ready/merge/nightly label found; preserving the legacy ready-suite fallback."
)


@dataclass(frozen=True)
class Selection:
    suites: tuple[Suite, ...]
    notice: str | None = None


def split_labels(labels: str) -> list[str]:
    """Labels as the script reads them (one per line), also accepting commas."""
    return [part.strip() for part in re.split(r"[\n,]", labels) if part.strip()]


def label_warnings(labels: str) -> list[str]:
    """A `warning:` line per label no tier knows (`redy`), with a guess: a typo in `--labels`
    would otherwise just select the fallback. Only a warning: GitHub labels are free-form."""
    known = list(topology.LABELS.values())
    lines: list[str] = []
    for label in dict.fromkeys(split_labels(labels)):
        if label in known:
            continue
        guess = close_match(label, known)
        hint = f"; did you mean {guess!r}?" if guess else ""
        lines.append(
            f"warning: --labels: {label!r} is no tier's label{hint} (the tiers' labels:"
            f" {', '.join(known)}; any other selects nothing)"
        )
    return lines


def parse_debug_suites(value: str) -> tuple[Suite, ...]:
    """DEBUG_TEST_YAML: a case-insensitive comma list, validated left to right."""
    items = [item.strip().lower() for item in value.split(",") if item.strip()]
    if not items:
        raise UserError("DEBUG_TEST_YAML did not contain a test suite")
    chosen: list[Suite] = []
    for item in items:
        if item not in BY_NAME:
            raise UserError(
                f"DEBUG_TEST_YAML entries must be 'merge', 'nightly', or 'ready', got {item!r}"
            )
        if BY_NAME[item] in chosen:
            raise UserError(f"duplicate DEBUG_TEST_YAML suite {item!r}")
        chosen.append(BY_NAME[item])
    return tuple(chosen)


def parse_nightly(value: str | int) -> bool:
    text = str(value).strip()
    if text not in ("0", "1"):
        raise UserError(f"NIGHTLY must be 0 or 1, got {text!r}")
    return text == "1"


def select_suites(
    branch: str, labels: str, debug_test_yaml: str = "", nightly: bool = False
) -> Selection:
    if debug_test_yaml:
        return Selection(parse_debug_suites(debug_test_yaml))
    if branch == "main":
        return Selection((BY_NAME["nightly"] if nightly else BY_NAME["merge"],))
    present = set(split_labels(labels))
    chosen = tuple(s for s in SUITES if s.label in present)
    return Selection(chosen) if chosen else Selection((BY_NAME["ready"],), FALLBACK_NOTICE)


T = TypeVar("T")


def attempt(problems: list[str], parse: Callable[[], T], default: T) -> T:
    """`parse()`, else `default` with its problems added: every input problem is told at once."""
    try:
        return parse()
    except TaskError as exc:
        problems += exc.problems
        return default


def select_from_args(
    branch: str | None, labels: str, debug_test_yaml: str, nightly: str
) -> Selection:
    """`select-suites`: every input problem at once (exit 2), then the selection
    (`branch` None: `--branch` not given; an empty branch is a value, not `main`)."""
    problems: list[str] = []
    if branch is None:
        problems.append("the following arguments are required: --branch")  # argparse's words
    # Every task's rule for a branch (a fork PR's `owner:name` included; empty is a value).
    elif problem := branch_error("--branch", branch, fork_prefix=True):
        problems.append(problem)
    night = attempt(problems, lambda: parse_nightly(nightly), False)
    if debug_test_yaml:
        attempt(problems, lambda: parse_debug_suites(debug_test_yaml), None)
    UserError.collect(problems)
    return select_suites(branch or "", labels, debug_test_yaml, night)
