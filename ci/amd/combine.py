"""Putting the selected AMD suites into one document.

One suite keeps its structure; several become one group per suite (named by the
spec prefix), their env merged (a variable with two values is an error). A step
deep-equal to an earlier suite's is kept once, as upstream does (docs/differences.md).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci import yamlio
from ci.amd.suites import Suite
from ci.errors import UserError
from ci.pipeline import commands, model


@dataclass(frozen=True)
class SuiteDoc:
    suite: Suite
    env: model.Document
    steps: list[Any]


@dataclass
class Combined:
    env: model.Document = field(default_factory=dict)
    steps: list[Any] = field(default_factory=list)
    dropped: list[tuple[Suite, model.Document]] = field(default_factory=list)


def load_suite(amd_dir: Path, suite: Suite) -> SuiteDoc:
    path = amd_dir / suite.file
    data = yamlio.load(path)
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise UserError(f"{path}: not an AMD suite (a mapping with a `steps` list)", code=1)
    env = data.get("env") or {}
    if not isinstance(env, dict):
        raise UserError(f"{path}: `env` must be a mapping", code=1)
    UserError.collect(_step_problems(path, data["steps"]), code=1)
    return SuiteDoc(suite, dict(env), list(data["steps"]))


def _step_problems(path: Path, steps: list[Any]) -> list[str]:
    """Entries the template would have dropped without a word: not a mapping."""
    problems: list[str] = []
    for i, entry in enumerate(steps):
        if not isinstance(entry, dict):
            problems.append(f"{path}: steps[{i}] must be a mapping, got {entry!r}")
        elif "group" in entry:
            children = entry.get("steps")
            if not isinstance(children, list):
                problems.append(f"{path}: steps[{i}] (group): `steps` must be a list")
                continue
            problems += [
                f"{path}: steps[{i}].steps[{j}] must be a mapping, got {child!r}"
                for j, child in enumerate(children)
                if not isinstance(child, dict)
            ]
    # A step's command must be shell text; the same check as every other consumer's.
    return problems + commands.all_problems(steps, str(path))


def flatten(steps: list[Any]) -> list[Any]:
    """The suite's steps with its groups opened (a group's own keys are dropped)."""
    return [model.emit_node(step) for step, _ in model.leaves(model.nodes(steps))]


def merge_env(docs: list[SuiteDoc]) -> model.Document:
    env: model.Document = {}
    for doc in docs:
        for name, value in doc.env.items():
            if name in env and env[name] != value:
                raise UserError(
                    f"Conflicting environment value for {name}: {env[name]!r} != {value!r}", code=1
                )
            env[name] = value
    return env


def combine(docs: list[SuiteDoc]) -> Combined:
    if len(docs) == 1:
        return Combined(env=dict(docs[0].env), steps=list(docs[0].steps))
    combined = Combined(env=merge_env(docs))
    seen: list[Any] = []
    for doc in docs:
        steps = flatten(doc.steps)
        combined.dropped += [(doc.suite, step) for step in steps if step in seen]
        kept = [step for step in steps if step not in seen]
        seen.extend(kept)
        if kept:
            combined.steps.append({"group": doc.suite.group, "steps": kept})
    return combined


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def report_dropped(combined: Combined, note: Callable[[str], None] = _stderr) -> None:
    """One line per dropped duplicate, to `note` (stderr by default)."""
    for suite, step in combined.dropped:
        label = step.get("label", "<unlabelled>")
        note(
            f"Dropped duplicate {suite.group} step {label!r}: "
            "identical to a step of an earlier suite."
        )
