"""Which values are secrets, and how they are hidden in everything we print.

A value is secret when its variable's name says so (`is_secret_name`: the
original runners' `*_TOKEN|*_KEY|*_SECRET|*PASSWORD*`, widened; Buildkite's
BUILDKITE_STEP_KEY and the like are not), when a caller marks it, or when it
was learnt at run time and `remember`ed (the ECR password `aws` prints).

Masking fails closed, as Buildkite's agent does: a secret is replaced wherever
its text occurs, in any letter case. Values under 6 characters are never masked
("1" or "true" everywhere would ruin logs). Its printed forms are masked too:
shell-quoted, Python-repr, JSON-escaped and, for a multi-line value, each long line.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping

MASK = "[REDACTED]"
MIN_LENGTH = 6
# `_TOKEN`, `_SECRET_KEY` and the like need no suffix: a part or substring below catches them.
SECRET_SUFFIXES = ("_KEY", "_CONNECTION_STRING")
# A name with one of these as an `_`-separated part is secret wherever the part
# sits (HF_TOKEN_PATH, SECRET_KEY_BASE), but TOKENIZERS_PARALLELISM is not.
SECRET_PARTS = frozenset({"TOKEN", "SECRET", "PASSWD"})
SECRET_SUBSTRINGS = ("PASSWORD",)  # anywhere: PASSWORD_FOR_REG, DOCKERHUBPASSWORD
# Buildkite names that end in _KEY but identify things rather than grant access.
_BUILDKITE_ID_SUFFIXES = ("_STEP_KEY", "_GROUP_KEY", "_PIPELINE_KEY", "_CACHE_KEY")

_remembered: set[str] = set()
_learnt = 0  # how many times `remember` added a secret: a long-lived masker rebuilds on a change


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    if any(part in upper for part in SECRET_SUBSTRINGS) or SECRET_PARTS & set(upper.split("_")):
        return True
    buildkite_id = upper.startswith("BUILDKITE_") and upper.endswith(_BUILDKITE_ID_SUFFIXES)
    return not buildkite_id and upper.endswith(SECRET_SUFFIXES)


def secrets_from_env(env: Mapping[str, str]) -> set[str]:
    return {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_LENGTH}


def remember(*values: str) -> None:
    """Secrets learnt at run time: masked from now on by every `Redactor.for_env` in this
    process (door's echo, error lines and streamed output), so they never print again."""
    global _learnt
    new = {v for v in values if v and len(v.strip()) >= MIN_LENGTH} - _remembered
    if new:
        _remembered.update(new)
        _learnt += 1


def learnt() -> int:
    """Changes whenever `remember` learns a secret (a `Redactor` built before lacks it)."""
    return _learnt


def forms(value: str) -> set[str]:
    """Every text under which `value` can appear in what we print (none when it is too short)."""
    stripped = value.strip()  # masking it masks the raw value, and keeps the newline after it
    if len(stripped) < MIN_LENGTH:
        return set()
    found = {stripped, *(line.strip() for line in stripped.splitlines())}
    for text in list(found):
        found.add(shlex.quote(text))  # a whole shell word
        found.add(text.replace("'", "'\"'\"'"))  # inside a shell-quoted word
        found.add(repr(text)[1:-1])  # inside a Python repr
        found.add(json.dumps(text)[1:-1])  # inside a JSON string
        found.add(json.dumps(text, ensure_ascii=False)[1:-1])
    return {f for f in found if len(f) >= MIN_LENGTH}


class Redactor:
    """Replaces every known secret (`values`: the texts it masks)."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        # Longest first, so that overlapping values mask fully.
        self.values = sorted(set().union(*map(forms, values)), key=len, reverse=True)
        # In any letter case: a secret printed lower- or upper-cased (an input normalised
        # before it is compared, then quoted in an error) still gives it away.
        either = "|".join(map(re.escape, self.values))
        self._pattern = re.compile(either, re.IGNORECASE) if self.values else None

    @classmethod
    def for_env(cls, *envs: Mapping[str, str], extra: Iterable[str] = ()) -> Redactor:
        """Secrets of os.environ and of `envs`, the `remember`ed ones, and `extra`."""
        found = _remembered.union(*map(secrets_from_env, [os.environ, *envs]))
        return cls([*found, *extra])

    def __bool__(self) -> bool:
        return bool(self.values)

    def __call__(self, text: str) -> str:
        return self._pattern.sub(MASK, text) if self._pattern else text


class StreamRedactor:
    """Masks secrets in output that arrives in pieces (a child's, read as it comes), read
    as UTF-8 with every other byte passed as it is. `feed` returns what can be printed
    now: everything except a tail that could still grow into a secret, or that cuts one
    in two. `flush` returns the rest (at the end, or while nothing more comes)."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact  # replaceable between pieces (a secret learnt meanwhile)
        self._held = ""
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape").decode

    def feed(self, data: bytes) -> bytes:
        return self.feed_text(self._decode(data)).encode("utf-8", errors="surrogateescape")

    def flush(self) -> bytes:
        rest = self.feed_text(self._decode(b"", True)) + self.flush_text()
        return rest.encode("utf-8", errors="surrogateescape")

    def feed_text(self, text: str) -> str:
        """`feed` for text already decoded (our own stdout)."""
        buffer = self._held + text
        cut = self._safe_cut(buffer)
        self._held = buffer[cut:]
        return self.redact(buffer[:cut])

    def flush_text(self) -> str:
        rest, self._held = self._held, ""
        return self.redact(rest)

    def _safe_cut(self, buffer: str) -> int:
        """Where what is printable now ends. A secret that the cut would split (one that
        straddles it, or a tail that could still grow into one) moves it back to its
        start, until none does: what is before the cut is masked on its own."""
        # Compared in lower case, as the redactor masks (where lowering keeps the length).
        folded = buffer.lower()
        text = folded if len(folded) == len(buffer) else buffer
        cut, moved = len(buffer), True
        while moved:
            moved = False
            for secret in self.redact.values:
                value = secret.lower() if text is folded else secret
                at = text.find(value[0], max(0, cut - len(value) + 1), cut)
                while at != -1 and not value.startswith(text[at : at + len(value)]):
                    at = text.find(value[0], at + 1, cut)
                if at != -1:
                    cut, moved = at, True
        return cut
