"""`migrate --check`'s progress on stderr, while its builds run (a minute or two).

As the tiers show theirs (`ci.tiers.session`): in a terminal a live display (the
cells done of all, and the builds running now); otherwise (not a terminal, or in
CI) one line each time a cell's two builds have ended:
`migrate --check: cuda: pr ready + docs change: 12/140`. Never on stdout, which
holds only the report. The workers call `started` and `ended` from their threads.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from ci import door
from ci.platforms import Platform
from ci.target import live_terminal

if TYPE_CHECKING:
    from rich.console import RenderableType

PREFIX: Final = "migrate --check"
Build = tuple[str, str, str, Platform]  # side, change, situation, platform


class Progress:
    """The cells done of `total`; a cell is done when both its sides' builds have ended."""

    def __init__(self, total: int, *, live: bool) -> None:
        self.total = total
        self.live = live
        self.done = 0
        self.stage = "preparing the clones"
        self.running: dict[Build, float] = {}  # the build, and when it started
        self._ended: set[Build] = set()
        self._lock = threading.Lock()
        self._started = time.monotonic()

    def started(self, build: Build) -> None:
        with self._lock:
            self.stage = "running the builds"
            self.running[build] = time.monotonic()

    def ended(self, build: Build) -> None:
        side, change, situation, platform = build
        other = ("after" if side == "before" else "before", change, situation, platform)
        with self._lock:
            self.running.pop(build, None)
            self._ended.add(build)
            if other not in self._ended:
                return
            self.done += 1
            line = f"{PREFIX}: {platform.value}: {situation} + {change} change:"
            line += f" {self.done}/{self.total}"
        if not self.live:
            door.note(line)

    def view(self) -> RenderableType:
        """The live display: cells done of all, then each build running and for how long."""
        from rich.text import Text

        with self._lock:
            now = time.monotonic()
            lines = [
                f"{PREFIX}: {self.done}/{self.total} cells done"
                f" ({now - self._started:.0f} s, {self.stage})"
            ]
            lines += [
                f"  {side}: {platform.value}: {situation} + {change} change ({now - began:.0f} s)"
                for (side, change, situation, platform), began in sorted(
                    self.running.items(), key=lambda item: item[1]
                )
            ]
        return Text("\n".join(lines))


@contextlib.contextmanager
def shown(total: int) -> Iterator[Progress]:
    """Progress for `total` cells, shown on stderr while the block runs."""
    live = live_terminal()
    progress = Progress(total, live=live)
    if not live:
        door.note(f"{PREFIX}: {total} cells, each an old and a new build; preparing the clones")
        yield progress
        return
    from rich.console import Console
    from rich.live import Live

    console = Console(stderr=True)
    with Live(console=console, get_renderable=progress.view, refresh_per_second=2, transient=True):
        yield progress
