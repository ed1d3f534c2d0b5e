"""A PR that changes 100,001 files: skip-ci, plan and bootstrap within 10 s (issue 32, item 8).

They once ran one `git show` per changed test file and were still running after
180 s. Now a diff's patches and new files are read with a fixed number of git
processes (`ci.diff`). This builds a copy of the sample checkout whose PR adds
N-1 new test files under tests/ (a module-level skip mark in each other one, so
that skip-ci reads its content) and edits one product file, with `git
fast-import` (no 100,001 files on disk); then times each task once, as a user
runs it (the CLI, a new process), and prints the seconds and the ratio to the
10 s goal. `upload-pipeline`, which reads no file contents, is the floor.

    python benchmarks/large_diff.py [--files 100001]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "omni-sample"
GOAL = 10.0  # seconds, for each task
IDENTITY = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}
SKIPPED = (
    "import pytest\n\npytestmark = pytest.mark.skip(reason='wip')\n\n\ndef test_{n}():\n    pass\n"
)
PLAIN = "def test_{n}():\n    assert {n} == {n}\n"


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **IDENTITY}, input=stdin,
        check=True, capture_output=True,
    )  # fmt: skip
    return done.stdout.decode()


def make_repo(path: Path, files: int) -> str:
    """The sample on `main` (also `origin/main`), and branch `pr` with the big change."""
    shutil.copytree(
        SAMPLE, path, ignore=shutil.ignore_patterns("wheelhouse", "build", "__pycache__")
    )
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "sample")
    git(path, "update-ref", "refs/remotes/origin/main", "HEAD")
    stream = [b"commit refs/heads/pr\ncommitter bench <b@x> 0 +0000\ndata 2\npr\nfrom main\n"]
    for n in range(files - 1):
        body = (SKIPPED if n % 2 else PLAIN).format(n=n).encode()
        name = f"tests/bulk/area{n % 100}/test_{n}.py"
        stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(body), body))
    product = b"VERSION = 2\n"
    stream.append(b"M 100644 inline setup_extra.py\ndata %d\n%s\n" % (len(product), product))
    git(path, "fast-import", "--quiet", stdin=b"".join(stream))
    # Check out `pr` without writing its files: the index and HEAD move, the tree stays.
    git(path, "symbolic-ref", "HEAD", "refs/heads/pr")
    git(path, "read-tree", "pr")
    return git(path, "rev-parse", "HEAD").strip()


def timed(argv: list[str], repo: Path, env: dict[str, str]) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=repo, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False)  # fmt: skip
    return time.perf_counter() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=100_001)
    args = parser.parse_args()
    cli = [sys.executable, "-c", "from ci.cli import main; main()"]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp, "repo")
        started = time.perf_counter()
        commit = make_repo(repo, args.files)
        built = time.perf_counter() - started
        env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE")}
        env |= {"PYTHONPATH": str(ROOT), "BUILDKITE_PULL_REQUEST": "1",
                "BUILDKITE_BRANCH": "pr", "BUILDKITE_COMMIT": commit}  # fmt: skip
        tasks = {
            "upload-pipeline (floor)": ["upload-pipeline", ".buildkite/cuda/test-ready.yml",
                                        "--dry-run"],
            "skip-ci": ["skip-ci", "--platform", "cuda", "--level", "l2"],
            "bootstrap --dry-run": ["bootstrap", "--platform", "cuda", "--dry-run"],
            "plan": ["plan", "--platform", "cuda", "--labels", "ready"],
        }  # fmt: skip
        results = {name: timed([*cli, *argv], repo, env) for name, argv in tasks.items()}
    print(f"changed files                      {args.files}")
    print(f"repository built in                {built:8.2f} s")
    for name, (seconds, code) in results.items():
        print(
            f"{name:34s} {seconds:8.2f} s  exit {code}  ({seconds / GOAL:.2f}x the {GOAL:g} s goal)"
        )


if __name__ == "__main__":
    main()
