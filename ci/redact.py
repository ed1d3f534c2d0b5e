"""Which values are secrets, and how they are hidden in everything we print.

The rule is the foundation issue's: a value is secret when its variable's name
says so (suffixes below, or exactly TOKEN/PASSWORD/SECRET), or when a caller
marks it. Buildkite's own bookkeeping names such as BUILDKITE_STEP_KEY are not
secrets even though they end in _KEY, and values shorter than 6 characters are
ignored because replacing "1" or "true" everywhere would make logs unreadable.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

MASK = "[REDACTED]"
MIN_LENGTH = 6
SECRET_SUFFIXES = (
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_KEY",
    "_ACCESS_KEY",
    "_SECRET_KEY",
    "_PRIVATE_KEY",
    "_CONNECTION_STRING",
)
SECRET_NAMES = frozenset({"TOKEN", "PASSWORD", "SECRET"})
# Buildkite names that end in _KEY but identify things rather than grant access.
_BUILDKITE_ID_SUFFIXES = ("_STEP_KEY", "_GROUP_KEY", "_PIPELINE_KEY", "_CACHE_KEY")


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    if upper in SECRET_NAMES:
        return True
    if upper.startswith("BUILDKITE_") and upper.endswith(_BUILDKITE_ID_SUFFIXES):
        return False
    return upper.endswith(SECRET_SUFFIXES)


def secrets_from_env(env: Mapping[str, str] | None = None) -> set[str]:
    source = os.environ if env is None else env
    return {v for k, v in source.items() if is_secret_name(k) and len(v) >= MIN_LENGTH}


class Redactor:
    """Replaces every known secret; longest first so overlapping values mask fully."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values = sorted({v for v in values if len(v) >= MIN_LENGTH}, key=len, reverse=True)

    @classmethod
    def for_env(cls, *envs: Mapping[str, str], extra: Iterable[str] = ()) -> Redactor:
        found = secrets_from_env()
        for env in envs:
            found |= secrets_from_env(env)
        return cls([*found, *extra])

    def __call__(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, MASK)
        return text
