"""Finding and ending a child's whole process tree.

A process-group kill misses descendants that called `setsid`, and a psutil walk
misses orphans whose parent exited, so we use both, as a child subreaper (Linux)
that orphans re-parent to. A process is known by pid *and* start time, so a
recycled pid is never signalled. Where cgroup v2 is writable each command also
gets a child cgroup whose `cgroup.kill` ends everything in it, forks in flight
included (`VLLM_OMNI_CI_CGROUP=0` turns that off); without one, TERM/KILL repeat
until a sweep finds nothing left.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable

import psutil

_PR_SET_CHILD_SUBREAPER = 36
_active_roots: set[int] = set()  # the roots of running commands, and services
_exempt: set[int] = set()

# After KILL, how many rounds of "kill what is left, sweep again" before giving up,
# and how long one round waits for what it killed to be gone.
KILL_ROUNDS = 20
ROUND_WAIT = 1.0
POLL = 0.05
CGROUP_ENV = "VLLM_OMNI_CI_CGROUP"
# Commands run side by side in threads (the tiers' jobs). This is held from a command's
# start until its root is in `_active_roots` (`Tree`), and while our children are looked
# at as orphans: a root just started is never claimed by another command's tree (and
# ended with its leftovers), nor reaped from under its owner.
STARTING = threading.RLock()


@functools.cache
def become_subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        if sys.platform.startswith("linux"):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


Identity = tuple[int, float]


def _identity(proc: psutil.Process | int) -> Identity | None:
    try:
        found = psutil.Process(proc) if isinstance(proc, int) else proc
        return (found.pid, found.create_time())
    except psutil.Error:
        return None


def running(ident: Identity) -> psutil.Process | None:
    """The process `ident` names while it runs (a zombie has ended)."""
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(ident[0])
        if proc.create_time() == ident[1] and proc.status() != psutil.STATUS_ZOMBIE:
            return proc
    return None


def exempt(pid: int) -> None:
    """A child of ours that no command's tree may claim: a service `door.spawn` started."""
    _active_roots.add(pid)
    _exempt.add(pid)


def _own_cgroup_dir() -> str | None:
    """The directory of our cgroup in a mounted cgroup v2 hierarchy, or None."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            path = next((line[3:].strip() for line in fh if line.startswith("0::")), "")
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            mounts = [line.split() for line in fh if " - cgroup2 " in line]
    except OSError:
        return None
    for fields in mounts if path else ():
        # A mount of a sub-tree (a container without a cgroup namespace) shows it at its root.
        root = fields[3].rstrip("/")
        candidate = os.path.join(fields[4], path[len(root) :].lstrip("/"))
        if (path + "/").startswith(root + "/") and os.path.isfile(f"{candidate}/cgroup.procs"):
            return candidate
    return None


class Cgroup:
    """A child cgroup of ours that holds one command's processes."""

    _count = 0

    def __init__(self, path: str) -> None:
        self.path = path
        self.owner = os.getpid()  # a forked copy of us must not release it at its exit
        self.ended = False  # its command ended; what is still inside is left over

    @classmethod
    def create(cls) -> Cgroup | None:
        """A new, empty child cgroup, or None where cgroup v2 is missing or not writable."""
        if os.environ.get(CGROUP_ENV, "").strip().lower() in ("0", "off", "no", "false"):
            return None
        base = _own_cgroup_dir()  # None off Linux: there is no /proc
        if base is None:
            return None
        # First, the empty cgroups a killed vllm-omni-ci left here (rmdir fails on one in use).
        with contextlib.suppress(OSError):
            for name in os.listdir(base) if cls._count == 0 else ():
                parts = name.split("-")
                ours = len(parts) == 5 and parts[:3] == ["vllm", "omni", "ci"]
                if ours and parts[3].isdigit() and not psutil.pid_exists(int(parts[3])):
                    cls(os.path.join(base, name)).remove()
        cls._count += 1
        path = os.path.join(base, f"vllm-omni-ci-{os.getpid()}-{cls._count}")
        try:
            os.mkdir(path)
        except OSError:
            return None
        made = cls(path)
        _cgroups.append(made)
        return made

    def pids(self) -> list[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs"), encoding="ascii") as fh:
                return [int(word) for word in fh.read().split()]
        except (OSError, ValueError):
            return []

    def populated(self) -> bool:
        try:
            with open(os.path.join(self.path, "cgroup.events"), encoding="ascii") as fh:
                return "populated 1" in fh.read()
        except FileNotFoundError:
            return False
        except OSError:
            return bool(self.pids())

    def signal(self, signum: int) -> None:
        """KILL through `cgroup.kill` (Linux 5.14+: nested cgroups and forks in flight
        included); any other signal, or without it, to each pid listed."""
        if signum == signal.SIGKILL and _write(os.path.join(self.path, "cgroup.kill"), b"1"):
            return
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signum)

    def remove(self) -> bool:
        """rmdir, child cgroups (a nested vllm-omni-ci's) first; True once it is gone."""
        for parent, dirs, _files in os.walk(self.path, topdown=False):
            for name in dirs:
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(parent, name))
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            pass
        except OSError:
            return False
        with contextlib.suppress(ValueError):
            _cgroups.remove(self)
        return True

    def joiner(self) -> Callable[[], object]:
        """For Popen's `preexec_fn`: the child joins this cgroup before it runs the program,
        so the command never forks outside it. Only `os` calls; a refusal is silent (the
        child runs anyway, and the sweep still finds its tree)."""
        target = os.fsencode(os.path.join(self.path, "cgroup.procs"))
        return lambda: _write(target, b"0")

    def retire(self) -> None:
        """Its command ended: remove it, or keep it (`ended`) while processes are inside."""
        self.ended = True
        deadline = time.monotonic() + 1.0
        while not self.remove():
            if self.pids() or time.monotonic() >= deadline:
                return
            time.sleep(POLL)  # the last process is still exiting


def _write(path: str | bytes, data: bytes) -> bool:
    """Write a cgroup control file; False when the kernel refuses."""
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


# Every cgroup we made and did not remove yet. One whose command ended with
# processes inside stays (`ended`) until `end_leftovers` ends them; at exit,
# whatever nobody ended is handed back to our own cgroup and the rest removed.
_cgroups: list[Cgroup] = []


@atexit.register
def _release_cgroups() -> None:
    for cgroup in list(_cgroups):
        if cgroup.owner == os.getpid():
            procs = os.path.join(os.path.dirname(cgroup.path), "cgroup.procs")
            for _ in range(KILL_ROUNDS):  # what is inside may fork while it is moved
                pids = cgroup.pids()
                for pid in pids:
                    _write(procs, str(pid).encode())
                if not pids:
                    break
            cgroup.remove()


class Tree:
    """The processes started by one command: its group plus every descendant seen."""

    def __init__(self, root_pid: int, cgroup: Cgroup | None) -> None:
        """`cgroup`: the one the child joined before exec (`Cgroup.joiner`), if any."""
        self.root = root_pid
        self.cgroup = cgroup
        _active_roots.add(root_pid)
        ident = _identity(root_pid)
        self.known: set[Identity] = {ident} if ident else set()
        self._started = time.time() - 1.0

    def sweep(self) -> None:
        """Remember every current descendant, so it can be found after re-parenting."""
        with contextlib.suppress(psutil.Error):
            self._know(psutil.Process(self.root).children(recursive=True))
        self._know(self.cgroup.pids() if self.cgroup is not None else ())
        # Orphans re-parented to us (we are a subreaper) that appeared after our
        # root started and belong to no other running command.
        with STARTING, contextlib.suppress(psutil.Error):
            for child in psutil.Process().children(recursive=False):
                if child.pid in _active_roots:
                    continue
                ident = _identity(child)
                if ident and ident[1] >= self._started and self._is_ours(child):
                    self._know([child, *child.children(recursive=True)])

    def _know(self, procs: Iterable[psutil.Process | int]) -> None:
        self.known |= {i for i in map(_identity, procs) if i}

    def _is_ours(self, proc: psutil.Process) -> bool:
        """An orphan is ours if we saw it before, it sits in our cgroup or still in our
        group. One in a new session (`(setsid server &)`) whose parent exited before a
        sweep saw it: when ours is the only command running, an orphan re-parented to us
        after it started can only descend from it."""
        return (
            any(pid == proc.pid for pid, _ in self.known)
            or (self.cgroup is not None and proc.pid in self.cgroup.pids())
            or _pgid(proc.pid) == self.root
            or _active_roots == {self.root}
        )

    def alive(self) -> list[psutil.Process]:
        """What of the tree runs now; a member of the root's group is found even unseen."""
        reap_orphans()  # first, so that the sweep walks no zombie; never the root (Popen's)
        self.sweep()
        found = [p for p in map(running, self.known) if p]
        if not found:
            with contextlib.suppress(OSError):
                os.killpg(self.root, 0)  # raises once the group has no member, zombie or not
                self._know(p for p in psutil.process_iter() if _pgid(p.pid) == self.root)
                found = [p for p in map(running, self.known) if p]
        return found

    def terminate(
        self,
        grace: float,
        hurry: Callable[[], bool] = lambda: False,
        seen: Callable[[psutil.Process], object] = lambda _: None,
    ) -> bool:
        """End the tree (`end`, `seen` as its), its group and cgroup too. True if KILL was
        needed."""
        cgroups = [c for c in [self.cgroup] if c]
        return end(self.alive, cgroups, grace, group=self.root, seen=seen, hurry=hurry)

    def close(self) -> None:
        _active_roots.discard(self.root)
        if self.cgroup is not None:
            self.cgroup.retire()


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return -1


def reap_orphans() -> None:
    """Collect exited orphans re-parented to us: they ended, they did not leak. Not the
    roots of running commands or services: their owner waits for them."""
    with STARTING, contextlib.suppress(psutil.Error):
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.Error, ChildProcessError, OSError):
                if child.pid not in _active_roots and child.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(child.pid, os.WNOHANG)


def leftovers(keep: Collection[Identity] = ()) -> list[psutil.Process]:
    """Live processes commands left behind: our descendants not in `keep`, except services
    `door.spawn` started (and theirs), and the contents of ended commands' cgroups."""
    reap_orphans()
    candidates: list[psutil.Process | int] = []
    with STARTING, contextlib.suppress(psutil.Error):
        for child in psutil.Process().children(recursive=False):
            if child.pid not in _exempt:
                candidates.append(child)
                with contextlib.suppress(psutil.Error):
                    candidates += child.children(recursive=True)
    candidates += (pid for cgroup in _cgroups if cgroup.ended for pid in cgroup.pids())
    found: dict[Identity, psutil.Process] = {}
    for each in candidates:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(each) if isinstance(each, int) else each
            ident = _identity(proc)
            if ident and ident not in keep and ident not in found and _running(proc):
                found[ident] = proc
    return list(found.values())


def end(
    find: Callable[[], list[psutil.Process]],
    cgroups: list[Cgroup],
    grace: float,
    group: int = 0,
    seen: Callable[[psutil.Process], object] = lambda _: None,
    hurry: Callable[[], bool] = lambda: False,
) -> bool:
    """End what `find()` returns, the `cgroups` and the process `group`: TERM, TERM what
    appears (re-spawners fork on) until `grace` is up, `hurry()` says so (a second
    signal to us) or nothing is left, then KILL, wait and look again until a look after
    a KILL finds nothing (at most `KILL_ROUNDS`). `seen` gets each process once, before
    its first signal. True if KILL was needed."""
    signalled: set[Identity] = set()

    def fresh(procs: list[psutil.Process]) -> list[psutil.Process]:
        new = {i: p for p in procs if (i := _identity(p)) and i not in signalled}
        for proc in new.values():
            seen(proc)
        signalled.update(new)
        return list(new.values())

    def send(signum: int, procs: Iterable[psutil.Process], everything: bool = True) -> None:
        if everything:
            with contextlib.suppress(OSError):
                if group:
                    os.killpg(group, signum)
            for cgroup in cgroups:
                cgroup.signal(signum)
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signum)  # psutil checks pid + start time first

    def gone(procs: list[psutil.Process]) -> bool:
        return not procs and not any(c.populated() for c in cgroups)

    found = find()
    if gone(found):
        return False
    send(signal.SIGTERM, fresh(found))
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not hurry():
        time.sleep(POLL)
        if gone(found := find()):
            return False
        send(signal.SIGTERM, fresh(found), everything=False)
    for _ in range(KILL_ROUNDS):
        fresh(found)
        send(signal.SIGKILL, found)
        wait = time.monotonic() + ROUND_WAIT
        while time.monotonic() < wait and any(map(_running, found)):
            time.sleep(POLL)
        # A killed process's children are re-parented to us by now: look again.
        if gone(found := find()):
            break
    return True


def end_leftovers(
    keep: Collection[Identity] = (),
    grace: float = 5.0,
    seen: Callable[[psutil.Process], object] = lambda _: None,
    hurry: Callable[[], bool] = lambda: False,
) -> None:
    """End what `leftovers(keep)` finds and what ended commands' cgroups hold (`end`),
    then remove those cgroups."""
    ended = [c for c in _cgroups if c.ended]
    end(lambda: leftovers(keep), ended, grace, seen=seen, hurry=hurry)
    reap_orphans()
    for cgroup in ended:
        cgroup.remove()


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
