"""Putting the selected AMD suites into one document.

One suite keeps its own structure. Several become one group per suite, their env
merged (a variable with two values is an error); a step deep-equal to one of an
earlier suite is kept once, as upstream's combiner does (docs/differences.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci import yamlio
from ci.amd.suites import Suite
from ci.errors import Failure
from ci.pipeline import model, stepshape


@dataclass(frozen=True)
class SuiteDoc:
    suite: Suite
    env: model.Document
    steps: list[Any]


@dataclass
class Combined:
    env: model.Document = field(default_factory=dict)
    steps: list[Any] = field(default_factory=list)
    dropped: list[tuple[Suite, model.Document]] = field(default_factory=list)  # duplicates


def load_suite(amd_dir: Path, suite: Suite) -> SuiteDoc:
    path = amd_dir / suite.file
    data = yamlio.load(path)
    tree = model.parse(data)
    if not isinstance(data, dict) or tree.steps is None:
        raise Failure(f"{path}: not an AMD suite (a mapping with a `steps` list)")
    env = data.get("env") or {}
    if not isinstance(env, dict):
        raise Failure(f"{path}: `env` must be a mapping")
    # A step's command must be shell text; the same check as every other consumer's.
    problems = [f"{path}: {p}" for p in _not_mappings(tree.steps)]
    Failure.collect(problems + stepshape.all_problems(data["steps"], str(path)))
    return SuiteDoc(suite, dict(env), list(data["steps"]))


def _not_mappings(entries: Iterable[model.Node], at: str = "steps") -> Iterator[str]:
    """Entries the template would have dropped without a word: not a mapping."""
    for i, entry in enumerate(entries):
        if isinstance(entry, model.Shorthand):
            yield f"{at}[{i}] must be a mapping, got {entry.value!r}"
        elif isinstance(entry, model.Group):
            yield from _not_mappings(entry.steps, f"{at}[{i}].steps")
        elif "group" in entry:
            yield f"{at}[{i}] (group): `steps` must be a list"


def combine(docs: list[SuiteDoc], note: Callable[[str], None]) -> Combined:
    """The suites as one document; `note` gets one line per duplicate dropped."""
    if len(docs) == 1:
        return Combined(dict(docs[0].env), list(docs[0].steps))
    combined = Combined()
    for name, value in ((k, v) for doc in docs for k, v in doc.env.items()):
        if combined.env.get(name, value) != value:
            was = combined.env[name]
            raise Failure(f"Conflicting environment value for {name}: {was!r} != {value!r}")
        combined.env[name] = value
    seen: list[Any] = []
    for doc in docs:
        # Opened groups: a suite's group keys are dropped.
        steps = [model.emit_node(step) for step, _ in model.leaves(model.nodes(doc.steps))]
        for step in steps:
            if step in seen:
                combined.dropped.append((doc.suite, step))
                label = step.get("label", "<unlabelled>")
                why = "identical to a step of an earlier suite."
                note(f"Dropped duplicate {doc.suite.group} step {label!r}: {why}")
        kept = [step for step in steps if step not in seen]
        seen.extend(kept)
        if kept:
            combined.steps.append({"group": doc.suite.group, "steps": kept})
    return combined
