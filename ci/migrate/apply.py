"""`migrate`: the changes as a unified diff (exit 1 while any is pending), or written.

Like `ruff format --check`: without `--apply` nothing is written, stdout is the
diff and the exit code says whether anything is left to do. Every call of a
replaced script that no row rewrites is a `manual:` line on stderr and keeps
the exit code at 1, also after `--apply`; so is every problem the
`lint-pipelines` gate finds in the migrated result (`would fail:` lines), even
with no edit pending: the migration is not done while CI would fail.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

from ci import door
from ci.errors import FAILURE, Stop
from ci.migrate import edits, gates
from ci.migrate import pin as pins
from ci.migrate.edits import FileChange


def _lines(text: str) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def unified(change: FileChange) -> str:
    """The change as a unified diff; a deleted file goes to /dev/null, a new one comes from it."""
    source = "/dev/null" if change.created else f"a/{change.path}"
    target = "/dev/null" if change.new is None else f"b/{change.path}"
    diff = difflib.unified_diff(_lines(change.old), _lines(change.new or ""), source, target)
    return "".join(
        line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in diff
    )


def run(repo: Path, *, apply: bool, pin: str, delete_replaced: bool) -> None:
    """Show (or with `apply`, write) the migration of `repo`; stop with the exit code."""
    pinned = pins.parse(pin) if pin else None  # before anything is read
    work = edits.plan(repo, pin=pinned, delete_replaced=delete_replaced)
    failing = gates.would_fail(repo, work.changes)
    for line in work.notes:
        door.note(f"note: {line}")
    for line in work.manual:
        door.note(f"manual: {line}")
    for line in failing:
        door.note(f"would fail: {gates.GATE}: {line}")
    left = bool(work.manual or failing)
    if apply:
        for change in work.changes:
            edits.write(repo, change)
        door.note(f"migrate: {len(work.changes)} files changed")
        raise Stop(FAILURE if left else 0)
    sys.stdout.write("".join(unified(change) for change in work.changes))
    sys.stdout.flush()
    raise Stop(FAILURE if work.changes or left else 0)
