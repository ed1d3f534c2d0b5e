"""Process-leak check: which processes exist after a command that did not before.

Identity is pid + start time, so a recycled pid cannot hide a leak. Zombies
count (nobody reaped them); `ps` entries (as in the original awk) and our own
process do not. Scope `tree` is our descendants (as a child subreaper we get
the command's orphans); scope `all` every visible process, as the original saw
in a pod's PID namespace.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ci import door

if TYPE_CHECKING:
    import psutil

SCOPES = ("tree", "all")
# The original's verdict lines, verbatim in process-cleanup.txt; on stderr each
# starts with PREFIX, so that a PASS is not read as the step's own verdict.
PASS_LINE = "status=PASS leaked_processes=0"
FAIL_LINE = "status=FAIL leaked_processes_detected=1"
PREFIX = "leak check: "
# How long what a command left behind gets between TERM and KILL.
LEFTOVER_GRACE = 5.0
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Proc:
    pid: int
    started: float
    ppid: int = 0
    status: str = ""
    name: str = ""
    cmdline: str = ""

    @property
    def identity(self) -> tuple[int, float]:
        return (self.pid, self.started)

    def line(self) -> str:
        """One line per process: control characters in the command line are escaped (`\\n`)."""
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.started))
        what = _CONTROL.sub(lambda m: repr(m.group())[1:-1], self.cmdline or self.name)
        return f"pid={self.pid} ppid={self.ppid} started={when} status={self.status} cmd={what}"


def leaked(before: Iterable[Proc], after: Iterable[Proc]) -> list[Proc]:
    """Processes of `after` whose identity is not in `before` (pure)."""
    known = {p.identity for p in before}
    return [p for p in after if p.identity not in known and p.name != "ps"]


def report(leaks: Sequence[Proc]) -> list[str]:
    """The original's output: one line per leaked process, then the status line."""
    if not leaks:
        return [PASS_LINE]
    return [*(p.line() for p in leaks), FAIL_LINE]


def snapshot(scope: str = "tree") -> list[Proc]:
    """The processes in scope now (our own process excluded)."""
    import psutil

    me = psutil.Process()
    procs: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        procs = me.children(recursive=True) if scope == "tree" else list(psutil.process_iter())
    return [d for d in map(describe, procs) if d is not None and d.pid != me.pid]


def describe(proc: psutil.Process) -> Proc | None:
    """A `Proc` for a live psutil process, or None once it is gone."""
    import psutil

    try:
        info = proc.as_dict(["ppid", "status", "name", "cmdline"], ad_value=None)
        started = proc.create_time()
    except psutil.Error:
        return None
    cmdline = " ".join(info["cmdline"] or ())
    return Proc(
        proc.pid, started, info["ppid"] or 0, info["status"] or "", info["name"] or "", cmdline
    )


def settle(
    before: Sequence[Proc], scope: str, seconds: float, stop: Callable[[], bool] = lambda: False
) -> list[Proc]:
    """Leaks still present after up to `seconds` of letting leftovers exit (or until `stop()`)."""
    from ci import proctree

    deadline = time.monotonic() + seconds
    while True:
        proctree.reap_orphans()  # exited orphans re-parented to us ended, they did not leak
        found = leaked(before, snapshot(scope))
        if not found or time.monotonic() >= deadline or stop():
            return found
        time.sleep(0.2)


def recording(ended: list[Proc]) -> Callable[[psutil.Process], None]:
    """A `seen` for the enders (`ci.proctree.end`, `door.run(leftovers=…)`): each process
    is described into `ended` before it is signalled, as it was while it ran."""

    def seen(proc: psutil.Process) -> None:
        if (described := describe(proc)) is not None:
            ended.append(described)

    return seen


def listing(ended: Sequence[Proc], who: str, what: str) -> list[str]:
    """`WHO: ended N process(es) the WHAT left running:`, then a line each (none: none)."""
    if not ended:
        return []
    return [f"{who}: ended {len(ended)} process(es) the {what} left running:"] + [
        f"  {proc.line()}" for proc in ended
    ]


def end_and_list_leftovers(
    keep: Iterable[Proc], who: str, what: str, hurry: Callable[[], bool] = lambda: False
) -> None:
    """End our descendants not in `keep`, then one stderr line per process ended.

    TERM, then KILL after LEFTOVER_GRACE (at once when `hurry()`), repeated until a
    look finds nothing left (`ci.proctree.end_leftovers`); each is listed as first seen.
    """
    from ci import proctree

    ended: list[Proc] = []
    kept = {p.identity for p in keep}
    proctree.end_leftovers(kept, LEFTOVER_GRACE, seen=recording(ended), hurry=hurry)
    for line in listing(ended, who, what):
        door.note(line)
