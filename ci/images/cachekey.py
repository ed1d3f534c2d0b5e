"""Dependency-cache keys of the ROCm and CUDA CI images, each its old bash recipe.

The key names the registry ref BuildKit imports its cache from, so it stays
byte-identical to the bash recipes (any change makes every agent's cache cold
once). Unlike bash, a missing `requirements/`, an unreadable input or an
unhashable path is an input error, never a silently different key.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from ci.errors import UserError
from ci.platforms import Platform

ROCM_FIXED = (
    "docker/Dockerfile.rocm",
    "docker/Dockerfile.rocm.dockerignore",
    "pyproject.toml",
    "setup.py",
    "tools/install_torchcodec_rocm.sh",
)
CUDA_HEAD = ("pyproject.toml", "setup.py")
CUDA_TAIL = ("docker/Dockerfile.ci",)
REQUIREMENTS = "requirements"


@dataclass(frozen=True)
class CacheKey:
    """The key and the inputs it covers, in hashing order (relative to the repo)."""

    key: str
    inputs: tuple[str, ...]


def _requirements(repo: Path, *, symlinks: bool, dotfiles: bool) -> list[str]:
    """Depth-1 `*.txt` entries of requirements/, as `requirements/<name>`.

    ROCm (`find -maxdepth 1 -type f -name '*.txt'`): lstat regular files only,
    dot-files included. CUDA (shell glob `requirements/*.txt`): symlinks kept
    (their target is read later), dot-files excluded.
    """
    folder = repo / REQUIREMENTS
    if not folder.is_dir():
        raise UserError(f"cache-key input does not exist: {REQUIREMENTS}/")
    try:
        names = os.listdir(folder)
    except OSError as exc:
        raise UserError(
            f"cache-key input is not readable: {REQUIREMENTS}/: {exc.strerror}"
        ) from None
    found = []
    for name in names:
        if fnmatchcase(name, "*.txt") and (dotfiles or not name.startswith(".")):
            mode = os.lstat(folder / name).st_mode
            if stat.S_ISREG(mode) or (symlinks and stat.S_ISLNK(mode)):
                found.append(f"{REQUIREMENTS}/{name}")
    return sorted(found, key=os.fsencode)  # `LC_ALL=C sort`: raw bytes, whatever the locale


def _checked(repo: Path, paths: tuple[str, ...]) -> tuple[str, ...]:
    """The paths, once each is a readable file with a plain name; else every problem at once."""
    problems = []
    for rel in paths:
        if "\\" in rel or "\n" in rel:
            why = f"path contains a backslash or newline (sha256sum would escape it): {rel!r}"
        elif not (repo / rel).is_file():  # follows symlinks, like `[ -f ]`
            why = f"does not exist: {rel}"
        elif not os.access(repo / rel, os.R_OK):
            why = f"is not readable: {rel}"
        else:
            continue
        problems.append(f"cache-key input {why}")
    UserError.collect(problems)
    return paths


def _read(repo: Path, rel: str) -> bytes:
    try:
        return (repo / rel).read_bytes()
    except OSError as exc:  # raced with _check, or access() disagreed with open()
        raise UserError(f"cache-key input is not readable: {rel}: {exc.strerror}") from None


def rocm_inputs(repo: Path) -> tuple[str, ...]:
    """The inputs the ROCm key hashes, in order: the fixed files, then requirements/*.txt."""
    return (*ROCM_FIXED, *_requirements(repo, symlinks=False, dotfiles=True))


def rocm_stream(repo: Path, arch: str) -> bytes:
    """What the ROCm key hashes: the arch line, then `path=` and a sha256sum line per input."""
    parts = [b"rocm-arch=" + os.fsencode(arch) + b"\n"]
    for rel in _checked(repo, rocm_inputs(repo)):
        name = os.fsencode(rel)
        digest = hashlib.sha256(_read(repo, rel)).hexdigest().encode()
        parts += [b"path=" + name + b"\n", digest + b"  " + name + b"\n"]
    return b"".join(parts)


def rocm_key(repo: Path, arch: str) -> CacheKey:
    stream = rocm_stream(repo, arch)
    return CacheKey(hashlib.sha256(stream).hexdigest()[:16], rocm_inputs(repo))


def cuda_inputs(repo: Path) -> tuple[str, ...]:
    """pyproject.toml, setup.py, the requirements glob in C byte order (docs/differences.md),
    then docker/Dockerfile.ci: the CUDA script's order."""
    return (*CUDA_HEAD, *_requirements(repo, symlinks=True, dotfiles=False), *CUDA_TAIL)


def cuda_key(repo: Path) -> CacheKey:
    """SHA-256 of the plain concatenation of the inputs' contents, cut to 16 hex digits."""
    inputs = _checked(repo, cuda_inputs(repo))
    stream = b"".join(_read(repo, rel) for rel in inputs)
    return CacheKey(hashlib.sha256(stream).hexdigest()[:16], inputs)


def missing_inputs(repo: Path, platform: Platform) -> list[str]:
    """The files (and `requirements/`) that `platform`'s keyed image build hashes and `repo`
    lacks; [] when none, or for a platform without a keyed build. `tier` names them in its
    build hint, so that a checkout that cannot build the image (a pipelines-only copy) says
    so before the build fails on it."""
    fixed = {Platform.ROCM: ROCM_FIXED, Platform.CUDA: (*CUDA_HEAD, *CUDA_TAIL)}.get(platform)
    if fixed is None:
        return []
    missing = [rel for rel in fixed if not (repo / rel).is_file()]
    return missing + ([] if (repo / REQUIREMENTS).is_dir() else [f"{REQUIREMENTS}/"])
