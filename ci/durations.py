"""Durations as CI people write them: `80m`, `2m`, `1s`, `1h30m`, or plain seconds.

Every duration option is bounded (`MAX_SECONDS`): a value like 99999999999999999999
would overflow a wait (`threading.Event.wait`, `select`) only once the command ran.
"""

from __future__ import annotations

import re

from ci.errors import UserError

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
# A week: longer than any CI job (Buildkite's longest timeouts are hours).
MAX_SECONDS = 7 * 24 * 3600.0
MAX = "168h (a week)"


def parse_duration(text: str, *, name: str = "duration", positive: bool = False) -> float:
    """Seconds; `positive`: 0 is refused too (a timeout of 0 would end the command at once)."""
    raw = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        seconds = float(raw)
    else:
        parts = _PART.findall(raw)
        if not raw or "".join(n + u for n, u in parts) != raw:
            raise UserError(f"{name}: {text!r} is not a duration (examples: 90s, 80m, 1h30m)")
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds > MAX_SECONDS or (positive and seconds <= 0):
        allowed = f"more than 0, up to {MAX}" if positive else f"0 to {MAX}"
        raise UserError(f"{name}: {text!r} is out of range: allowed {allowed}")
    return seconds
