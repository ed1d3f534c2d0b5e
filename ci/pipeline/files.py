"""Reading and walking a target checkout without tracebacks or hangs.

A checkout can hold symlink loops, dangling links, FIFOs and non-UTF-8 bytes;
`Path.read_text` blocks on a FIFO and `Path.resolve` raises on a loop. Here each is
one `Failure` line naming the file (exit 1), and `walk` lists an unreadable entry (so that
reading it reports the problem) instead of skipping it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from ci.errors import Failure

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class Unreadable(Failure):
    """`source: cannot read: why` (or `source: not UTF-8 text …`); `why` alone for rewording."""

    def __init__(self, source: str, why: str, *, verb: bool = True) -> None:
        super().__init__(f"{source}: {'cannot read: ' if verb else ''}{why}")
        self.why = why


def why_unreadable(path: Path, exc: OSError) -> str:
    """`exc` from opening `path`, in words that say what the entry is."""
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        try:
            return f"dangling symlink to {os.readlink(path)}"
        except OSError:  # pragma: no cover - removed meanwhile
            return "dangling symlink"
    if exc.errno == errno.EISDIR:
        return "a directory, not a regular file"
    return exc.strerror or str(exc)


def _open_regular(path: Path, source: str) -> int:
    """An fd of `path` when it is a regular file; else one `Unreadable` (a FIFO never blocks)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise Unreadable(source, why_unreadable(path, exc)) from None
    if not stat.S_ISREG(mode := os.fstat(fd).st_mode):  # an open fd's fstat cannot fail
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise Unreadable(source, f"{kind}, not a regular file")
    return fd


def check_readable(path: Path, source: str) -> None:
    """`Unreadable` unless `path` opens as a regular file (nothing is read)."""
    os.close(_open_regular(path, source))


def read_bytes(path: Path, source: str) -> bytes:
    """The bytes of a regular file; anything else is one `source: cannot read: why` line."""
    with os.fdopen(_open_regular(path, source), "rb") as handle:
        try:
            return handle.read()
        except OSError as exc:
            raise Unreadable(source, exc.strerror or str(exc)) from None


def read_text(path: Path, source: str) -> str:
    """A regular file's UTF-8 text; any other entry or encoding is one error line."""
    data = read_bytes(path, source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(source, not_utf8(exc), verb=False) from None


def not_utf8(exc: UnicodeDecodeError) -> str:
    return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"


def exists(path: Path) -> bool:
    """The entry is there, even as a dangling or looping symlink (`Path.exists` says no)."""
    return os.path.lexists(path)


def realpath(path: Path) -> Path:
    """The resolved path; a loop resolves as far as it goes instead of raising."""
    return Path(os.path.realpath(path))


def given(name: str, repo: Path) -> Path | None:
    """A file named on the command line (relative: to the cwd, else `repo`), resolved;
    an unreadable entry is found too, so that reading it says why."""
    for candidate in (Path.cwd() / name, repo / name):  # an absolute name is both
        if exists(candidate) and not candidate.is_dir():
            return realpath(candidate)
    return None


def walk(
    root: Path,
    wanted: Callable[[str], bool],
    *,
    enter: Callable[[str], bool] = lambda _name: True,
) -> list[Path]:
    """Every non-directory entry below `root` whose name `wanted` keeps, sorted by path;
    `enter(name)` decides whether a subdirectory is walked (symlinks to one are not)."""
    found: list[Path] = []
    pending = [root]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as entries:
                listed = sorted(entries, key=lambda e: e.name)
        except OSError as exc:
            raise Failure(f"{current}: cannot list: {why_unreadable(current, exc)}") from None
        for entry in listed:
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                if enter(entry.name):
                    pending.append(path)
            elif entry.is_symlink() and _links_to_dir(path):
                continue  # not followed, as os.walk / rglob do
            elif wanted(entry.name):
                found.append(path)
    return sorted(found)


def _links_to_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:  # a loop or a dangling link: listed, so that reading it says why
        return False
