"""Finding and ending a child's whole process tree.

A process-group kill misses descendants that called `setsid`, and a psutil
walk of the children misses orphans whose parent already exited. So we use
both, and we make our process a child subreaper (Linux), so that orphans are
re-parented to us instead of to init and stay findable. Every process is
identified by pid *and* start time, so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

import psutil

_PR_SET_CHILD_SUBREAPER = 36
_subreaper_done = False
_active_roots: set[int] = set()


def become_subreaper() -> None:
    global _subreaper_done
    if _subreaper_done or not sys.platform.startswith("linux"):
        return
    _subreaper_done = True
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


Identity = tuple[int, float]


def _identity(proc: psutil.Process) -> Identity | None:
    try:
        return (proc.pid, proc.create_time())
    except psutil.Error:
        return None


def exempt(pid: int) -> None:
    """A child of ours that no command's tree may claim: a service `door.spawn` started."""
    _active_roots.add(pid)


class Tree:
    """The processes started by one command: its group plus every descendant seen."""

    def __init__(self, root_pid: int) -> None:
        become_subreaper()
        self.root = root_pid
        self.known: set[Identity] = set()
        _active_roots.add(root_pid)
        with contextlib.suppress(psutil.Error):
            ident = _identity(psutil.Process(root_pid))
            if ident:
                self.known.add(ident)
        self._started = time.time() - 1.0

    def sweep(self) -> None:
        """Remember every current descendant, so it can be found after re-parenting."""
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.root).children(recursive=True):
                ident = _identity(child)
                if ident:
                    self.known.add(ident)
        # Orphans re-parented to us (we are a subreaper) that appeared after our
        # root started and belong to no other running command.
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process().children(recursive=False):
                if child.pid in _active_roots:
                    continue
                ident = _identity(child)
                if ident and ident[1] >= self._started and self._is_ours(child):
                    self.known.add(ident)
                    for grandchild in child.children(recursive=True):
                        gid = _identity(grandchild)
                        if gid:
                            self.known.add(gid)

    def _is_ours(self, proc: psutil.Process) -> bool:
        # An orphan is ours if we saw it before, or it still sits in our group.
        if any(pid == proc.pid for pid, _ in self.known):
            return True
        try:
            if os.getpgid(proc.pid) == self.root:
                return True
        except OSError:
            return False
        # An orphan in a new session (`(setsid server &)`) that exited its parent
        # before a sweep saw it: when ours is the only command running, an orphan
        # re-parented to us after it started can only descend from it.
        return _active_roots == {self.root}

    def alive(self) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        for pid, started in self.known:
            try:
                proc = psutil.Process(pid)
                if proc.create_time() != started:
                    continue
                if proc.status() == psutil.STATUS_ZOMBIE:
                    self._reap(pid)
                    continue
                found.append(proc)
            except psutil.Error:
                continue
        return found

    def _reap(self, pid: int) -> None:
        if pid == self.root:
            return  # Popen reaps its own child
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)

    def signal(self, signum: int) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.root, signum)
        for proc in self.alive():
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signum)

    def terminate(self, grace: float) -> bool:
        """TERM everything, then KILL what is left after `grace`. True if KILL was needed."""
        self.sweep()
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            self.sweep()
            if not self.alive() and not self._group_alive():
                self.close()
                return False
            time.sleep(0.05)
        self.sweep()
        self.signal(signal.SIGKILL)
        end = time.monotonic() + 5
        while (self.alive() or self._group_alive()) and time.monotonic() < end:
            time.sleep(0.05)
        self.close()
        return True

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.root, 0)
        except OSError:
            return False
        # killpg(…, 0) also succeeds for a zombie group leader; check for real members.
        for proc in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(proc.pid) == self.root and proc.status() != psutil.STATUS_ZOMBIE:
                    ident = _identity(proc)
                    if ident:
                        self.known.add(ident)
                    return True
            except (OSError, psutil.Error):
                continue
        return False

    def close(self) -> None:
        _active_roots.discard(self.root)
