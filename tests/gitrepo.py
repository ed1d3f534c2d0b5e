"""Real git repositories in temp dirs, for tests that need history (never mocked).

`GitRepo.create(path)` makes a repo on `main` with a bare `origin` next to it;
tests write files, commit, branch and push with real git. `buildkite_env`
builds an environment with every BUILDKITE_* variable of the outer job removed,
so tests behave the same locally and inside Buildkite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "omni-ci test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "omni-ci test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def buildkite_env(base: Mapping[str, str] | None = None, **values: str) -> dict[str, str]:
    """os.environ without BUILDKITE*/CI vars, plus `values`."""
    source = dict(os.environ if base is None else base)
    env = {k: v for k, v in source.items() if not k.startswith("BUILDKITE")}
    env.update(values)
    return env


@dataclass
class GitRepo:
    path: Path
    origin: Path | None = None

    @classmethod
    def create(cls, path: Path, *, origin: bool = True) -> GitRepo:
        path.mkdir(parents=True, exist_ok=True)
        repo = cls(path)
        repo.git("init", "-q", "-b", "main")
        repo.git("config", "commit.gpgsign", "false")
        if origin:
            bare = path.parent / f"{path.name}-origin.git"
            subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
            repo.git("remote", "add", "origin", str(bare))
            repo.origin = bare
        return repo

    def git(self, *args: str, cwd: Path | None = None) -> str:
        done = subprocess.run(
            ["git", *args],
            cwd=str(cwd or self.path),
            env={**os.environ, **IDENTITY},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def write(self, rel: str, text: str = "x\n") -> Path:
        path = self.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def remove(self, rel: str) -> None:
        (self.path / rel).unlink()

    def commit(self, message: str = "change") -> str:
        """Stage everything (deletions too) and commit; returns the new sha."""
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.sha()

    def commit_files(self, files: Mapping[str, str], message: str = "change") -> str:
        for rel, text in files.items():
            self.write(rel, text)
        return self.commit(message)

    def sha(self, rev: str = "HEAD") -> str:
        return self.git("rev-parse", rev).strip()

    def branch(self, name: str) -> None:
        self.git("checkout", "-q", "-b", name)

    def push(self, branch: str = "main") -> None:
        self.git("push", "-q", "origin", f"{branch}:{branch}")
        self.git("fetch", "-q", "origin")


def copy_tracked(source: Path, dest: Path, *within: str) -> Path:
    """The files git tracks under `source` (only those under the `within` paths, if given),
    copied to `dest`: what a fresh clone holds. The caches, wheelhouses and build outputs
    that runs leave in the working tree (another test may be writing them right now) stay.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *within], cwd=source, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / name, target, follow_symlinks=False)
    return dest


def sample_checkout(path: Path, sample: Path) -> GitRepo:
    """The embedded sample as a vLLM-Omni checkout of its own: committed on `main`, pushed.

    Only what git tracks is copied; callers branch from here.
    """
    repo = GitRepo.create(path)
    copy_tracked(sample, path)
    repo.commit("sample")
    repo.push("main")
    return repo


def git_counter(tmp_path: Path) -> tuple[Path, Path]:
    """A pass-through `git` that logs its arguments, then runs the real git.

    Returns the directory to put first on PATH and the log of calls.
    """
    real = shutil.which("git")
    assert real
    bin_dir = tmp_path / "counting-bin"
    bin_dir.mkdir()
    log = tmp_path / "git-calls"
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return bin_dir, log


def copy_repo(template: GitRepo, dest: Path) -> GitRepo:
    """A writable copy of `template` (and of its bare origin) under `dest`, the origin
    remote pointing at the copy: a fixture built once, each test writing to its own."""
    repo = GitRepo(dest / template.path.name)
    shutil.copytree(template.path, repo.path, symlinks=True)
    if template.origin is not None:
        repo.origin = dest / template.origin.name
        shutil.copytree(template.origin, repo.origin, symlinks=True)
        repo.git("remote", "set-url", "origin", str(repo.origin))
    return repo
