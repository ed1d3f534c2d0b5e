"""Docker SDK calls through the door: each says on stderr what it asks the engine, masked.

The XPU image build and runner ask the engine through the SDK, which would
otherwise happen unseen, outside the door's echo, redaction and dry-run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ci import door

T = TypeVar("T")


def ask(what: str, fn: Callable[[], T], *, quiet: bool = False) -> T:
    """A read-only call, `fn()`, after one stderr line `docker sdk: <what>` (none if `quiet`)."""
    if not quiet:
        door.note(f"docker sdk: {what}")
    return fn()


def change(
    what: str, fn: Callable[[], object], *, quiet: bool = False, dry_run: bool = False
) -> None:
    """A call that changes the engine's state: said (not if `quiet`, a retry), then made;
    under `dry_run` only said."""
    if dry_run:
        door.note(f"(dry-run) not asked: docker sdk: {what}")
        return
    ask(what, fn, quiet=quiet)
