"""Durations as CI people write them: `80m`, `2m`, `1s`, `1h30m`, or plain seconds."""

from __future__ import annotations

import re

from ci.errors import UserError

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str, *, name: str = "duration") -> float:
    raw = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        return float(raw)
    parts = _PART.findall(raw)
    if not raw or "".join(n + u for n, u in parts) != raw:
        raise UserError(f"{name}: {text!r} is not a duration (examples: 90s, 80m, 1h30m)")
    return sum(float(n) * _UNITS[u] for n, u in parts)
