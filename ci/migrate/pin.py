"""`migrate --pin`: the vllm-omni-ci a checkout installs, as a version or as a URL.

A version gives `vllm-omni-ci==VERSION`, installed from PyPI or a mirror. A URL
lets a project pin before the first upload to PyPI: a git URL at a release tag
or a wheel's URL, which pip installs as a PEP 508 direct reference
(`vllm-omni-ci @ URL`). The entry steps' tools image is tagged by a version, so
a URL must say one: the tag (`@v0.1.0`) or the wheel's file name.

The pin is written inside a double-quoted Dockerfile argument and into YAML, so a
URL is read strictly (fail closed): one of three schemes, a short alphabet that
holds no whitespace, quote, `#` or shell metacharacter, and no password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from ci.errors import UserError

DIST: Final = "vllm-omni-ci"
VERSION = re.compile(r"\d+(?:\.\d+)*(?:(?:a|b|rc|\.post|\.dev)\d+)*")
SCHEMES: Final = ("https", "git+https", "git+ssh")
# What a URL may hold: unreserved characters, `:` `/` `@` `+` and percent escapes.
URL_CHARS: Final = "letters, digits and . _ ~ : / @ + % -"
_URL_CHAR = re.compile(r"[A-Za-z0-9._~:/@+%-]")
ACCEPTED: Final = (
    "a version (1.2.3, 1.2.3rc1), git+https://HOST/ORG/vllm-omni-ci@vVERSION"
    " (or git+ssh://), or https://HOST/PATH/vllm_omni_ci-VERSION-py3-none-any.whl"
)
_TAG = re.compile(rf"v?({VERSION.pattern})")
# A wheel's file name: name-version[-build]-python-abi-platform.whl (PEP 427).
_WHEEL = re.compile(r"(?P<name>[^-/]+)-(?P<version>[^-/]+)(?:-\d[^-/]*)?-[^-/]+-[^-/]+-[^-/]+\.whl")


@dataclass(frozen=True)
class ToolPin:
    """The pip requirement written in the CI Dockerfiles, and the tools image's tag."""

    requirement: str  # vllm-omni-ci==1.2.3, or vllm-omni-ci @ URL
    version: str


def _version_of(scheme: str, path: str) -> str | None:
    """The version a URL's path says: its tag (git) or its wheel file name (https)."""
    if scheme.startswith("git+"):
        tag = _TAG.fullmatch(path.rpartition("@")[2]) if "@" in path else None
        return tag.group(1) if tag else None
    wheel = _WHEEL.fullmatch(path.rpartition("/")[2])
    if wheel is None or re.sub(r"[-_.]+", "_", wheel["name"].lower()) != "vllm_omni_ci":
        return None
    return wheel["version"] if VERSION.fullmatch(wheel["version"]) else None


def _url_problems(text: str) -> tuple[list[str], str | None]:
    """The problems of a URL pin (each naming what is accepted), and its version."""
    problems: list[str] = []
    if bad := sorted({c for c in text if not _URL_CHAR.fullmatch(c)}):
        problems.append(
            f"--pin: {text!r} holds {', '.join(map(repr, bad))}: a pinned URL is written into"
            f" Dockerfiles and YAML, so it may hold only {URL_CHARS}"
        )
    scheme, _, rest = text.partition("://")
    if scheme not in SCHEMES:
        problems.append(f"--pin: scheme {scheme!r} is not accepted ({', '.join(SCHEMES)})")
        return problems, None
    host, _, path = rest.partition("/")
    user, at, _ = host.rpartition("@")
    if not host.removeprefix(f"{user}{at}") or not path:
        problems.append(f"--pin: {text!r} names no host and path")
    elif at and (scheme != "git+ssh" or ":" in user):
        problems.append(
            f"--pin: {text!r} carries credentials, which would be written into Dockerfiles"
            " (only git+ssh may name a user, without a password)"
        )
    version = _version_of(scheme, path)
    if version is None:
        problems.append(
            f"--pin: {text!r} says no version for the tools image; accepted: {ACCEPTED}"
        )
    return problems, version


def parse(text: str) -> ToolPin:
    """`--pin`'s value as a ToolPin; every problem at once (exit 2), before any edit."""
    if VERSION.fullmatch(text):
        return ToolPin(f"{DIST}=={text}", text)
    if "://" not in text:
        raise UserError(f"--pin: {text!r} is not a version or a URL; accepted: {ACCEPTED}")
    problems, version = _url_problems(text)
    UserError.collect(problems)
    if version is None:  # not reached: a URL without a version is one of the problems
        raise UserError(f"--pin: {text!r}: accepted: {ACCEPTED}")
    return ToolPin(f"{DIST} @ {text}", version)
