"""Compare what the old CI and the new CI upload for one build, job by job.

A job is a command, block or trigger step of any uploaded pipeline, named by the
step that uploaded it, its groups and its key (else its label). For each job
present on both sides, the fields below must be equal; commands are compared
after the old ones went through the migration's rewrite table, so a command is
the same when migrate's own rewrite explains the difference. A difference that
docs/differences.md describes is kept in the report with that heading's name.
When both sides fail the same steps for the same cause (the old uploader and
ours alike refuse an unregistered registry key), the cell is the same: "same:
both fail (cause)", not a difference. When one side fails otherwise, the cell is
"before failed" (the old CI could not run: nothing to compare with), "after
failed" or "both failed", not "differs": a maintainer acts on each differently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from ci import yamlio
from ci.migrate import rewrites
from ci.migrate.matrix import BuildCase
from ci.migrate.simulate import Outcome, holds
from ci.pipeline import model
from ci.platforms import Platform

# What each job is compared on, beyond its name and its commands.
FIELDS: Final = (
    "label",
    "agents",
    "env",
    "timeout_in_minutes",
    "retry",
    "parallelism",
    "soft_fail",
    "depends_on",
    "plugins",
    "artifact_paths",
    "if",
)
BUILD: Final = "(build)"  # the job name of a whole-build difference
JOB: Final = "(job)"  # the field name of a job only one side has
ERROR_ANNOTATION: Final = "error annotation"  # the field of an `annotate --style error`
BOTH_FAIL: Final = "same: both fail"  # the verdict's words, then the cause in parentheses
DIFFERS: Final = "differs"
BEFORE_FAILED: Final = "before failed"  # the old CI failed (the new one did not)
AFTER_FAILED: Final = "after failed"  # the new CI failed (the old one did not)
BOTH_FAILED: Final = "both failed"  # both failed, not for the same cause
FAILED: Final = (BEFORE_FAILED, AFTER_FAILED, BOTH_FAILED)
ERROR_STYLE: Final = "error\t"  # how the stand-in records an error annotation's style
# A failure as `simulate` records it: the step, its exit, the last line it printed, whose
# prefix (ours `error:`, the old scripts' Python exception name) is not part of the cause.
_FAILURE = re.compile(
    r"(?P<step>.*): exit (?P<code>\d+): (?:error: |[A-Za-z]\w*(?:Error|Exception): )?"
)


@dataclass(frozen=True)
class UploadedJob:
    name: str
    fields: dict[str, Any]
    runs: bool  # its `if`s (and its groups') hold for the build


@dataclass(frozen=True)
class Difference:
    job: str
    field: str
    before: str
    after: str
    documented: str | None = None  # the docs/differences.md heading that explains it


@dataclass(frozen=True)
class Cell:
    change: str
    situation: str
    platform: Platform
    verdict: str
    differences: tuple[Difference, ...]


@dataclass(frozen=True)
class Known:
    """A difference docs/differences.md describes: where it shows, and the heading."""

    heading: str
    platforms: tuple[str, ...]
    field: str
    applies: Callable[[Difference], bool]


def jobs(outcome: Outcome, situation: BuildCase) -> dict[str, UploadedJob]:
    """Every job the build uploaded, by name (a repeated name gets ` #2`, ...)."""
    found: dict[str, UploadedJob] = {}
    for upload in outcome.uploads:
        tree = model.parse(yamlio.loads(upload.text, source=upload.by))
        for step, groups in model.leaves(tree.steps or ()):
            path = [upload.by, *(model.name_of(g.fields) for g in groups)]
            path.append(str(step.get("key") or model.name_of(step.fields)))
            name = " > ".join(path)
            if name in found:
                name += f" #{sum(1 for n in found if n.startswith(name)) + 1}"
            runs = all(holds(g.get("if"), situation) for g in (*groups, step))
            found[name] = UploadedJob(name, dict(step.fields), runs)
    return found


def commands(fields: dict[str, Any], *, migrate: bool) -> str:
    value = fields.get("commands", fields.get("command"))
    listed = value if isinstance(value, list) else [] if value is None else [value]
    texts = [str(c).strip() for c in listed]
    if migrate:
        texts = [rewrites.rewrite(t)[0] for t in texts]
    return "\n".join(texts)


def compare(
    before: Outcome, after: Outcome, situation: BuildCase, known: tuple[Known, ...], platform: str
) -> tuple[str, tuple[Difference, ...]]:
    """The cell's verdict (`same`, `same: both fail (cause)`, `skipped by both`,
    `before failed`, `after failed`, `both failed`, `differs`) and its differences."""
    old, new = jobs(before, situation), jobs(after, situation)
    causes = shared_causes(before.failures, after.failures)
    found = list(_differences(before, after, old, new, failures=causes is None))
    explained = tuple(_explain(d, known, platform) for d in found)
    if any(d.documented is None for d in explained):
        if causes is None:  # a side failed, and not as the other did
            sides = (bool(before.failures), bool(after.failures))
            return {(True, False): BEFORE_FAILED, (False, True): AFTER_FAILED,
                    (True, True): BOTH_FAILED}[sides], explained  # fmt: skip
        return DIFFERS, explained
    if causes:
        return f"{BOTH_FAIL} ({'; '.join(causes)})", explained
    if not any(j.runs for j in old.values()) and not any(j.runs for j in new.values()):
        return "skipped by both", explained
    return "same", explained


def agrees(verdict: str) -> bool:
    """A cell that passes: the same (documented differences named), both failing for the
    same cause, or skipped by both."""
    return verdict not in (DIFFERS, *FAILED)


def shared_causes(before: tuple[str, ...], after: tuple[str, ...]) -> tuple[str, ...] | None:
    """The causes, when both sides' failures are the same steps failing with the same exit
    for the same reason (one by one, in order; () when neither failed); else None. The
    reason is the last line's message up to its first `; ` (the old uploader then lists
    the known keys, ours the nearest ones)."""
    if len(before) != len(after):
        return None
    causes = []
    for was, now in zip(before, after, strict=True):
        old, new = _cause(was), _cause(now)
        if old is None or old != new:
            return None
        causes.append(old[0] + ": " + old[2])
    return tuple(causes)


def _cause(failure: str) -> tuple[str, str, str] | None:
    """(step, exit, message head) of a recorded failure."""
    found = _FAILURE.match(failure)
    if found is None:
        return None
    head = failure[found.end() :].split("; ", 1)[0].strip()
    return (found["step"], found["code"], head) if head else None


def _differences(
    before: Outcome,
    after: Outcome,
    old: dict[str, UploadedJob],
    new: dict[str, UploadedJob],
    *,
    failures: bool = True,
) -> Iterator[Difference]:
    if failures:
        yield from (Difference(BUILD, "failed (before)", f, "") for f in before.failures)
        yield from (Difference(BUILD, "failed (after)", "", f) for f in after.failures)
    for field, error in (("skip-ci annotation", False), (ERROR_ANNOTATION, True)):
        notes = [_styled(o.annotations, error=error) for o in (before, after)]
        if bool(notes[0]) != bool(notes[1]):
            yield Difference(BUILD, field, _show(notes[0]), _show(notes[1]))
    for name in [*old, *(n for n in new if n not in old)]:
        if name not in new or name not in old:
            yield Difference(name, JOB, "present" if name in old else "absent",
                             "present" if name in new else "absent")  # fmt: skip
            continue
        a, b = old[name].fields, new[name].fields
        for field in FIELDS:
            if a.get(field) != b.get(field):
                yield Difference(name, field, _show(a.get(field)), _show(b.get(field)))
        was, now = commands(a, migrate=True), commands(b, migrate=False)
        if was != now:
            yield Difference(name, "commands", was, now)


def _styled(annotations: tuple[str, ...], *, error: bool) -> list[str]:
    """The error annotations' texts (`error`), or the others' (the skip-ci notice)."""
    return [a.partition("\t")[2] or a for a in annotations if a.startswith(ERROR_STYLE) == error]


def _explain(found: Difference, known: tuple[Known, ...], platform: str) -> Difference:
    for row in known:
        if platform in row.platforms and row.field in (found.field, "*") and row.applies(found):
            return Difference(found.job, found.field, found.before, found.after, row.heading)
    return found


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)
