"""skip-ci's git work: the original's per-file diffs against our batched resolver.

`skip_ci.py` ran `git diff --name-only` and then one `git diff <range> -- <file>`
per changed test file, and the AMD bootstrap repeated that for every gated
suite. We resolve once per process and fetch every test file's patch in one
git call. This builds a real git repository whose PR adds a skip mark to N test
files plus a docs change, and measures in one run:

* floor: the original's git processes for ONE gate (name-only + N per-file diffs);
* ours: `skipci.decision()` in-process (all git work included), asked for two gates.

    python benchmarks/skipci.py [--files 40] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

IDENTITY = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}
TEST = "import pytest\n\n\ndef test_{n}():\n    assert {n} == {n}\n"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **IDENTITY}
    done = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    return done.stdout.decode()


def make_repo(path: Path, files: int) -> tuple[str, list[str]]:
    git(path, "init", "-q", "-b", "main")
    names = [f"tests/area{n % 5}/test_{n}.py" for n in range(files)]
    for n, name in enumerate(names):
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(TEST.format(n=n))
    (path / "docs").mkdir()
    (path / "docs/index.md").write_text("docs\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    git(path, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(path, "checkout", "-q", "-b", "pr")
    for n, name in enumerate(names):
        text = TEST.format(n=n).replace("def test", '@pytest.mark.skip(reason="flaky")\ndef test')
        (path / name).write_text(text)
    (path / "docs/index.md").write_text("docs, edited\n")
    git(path, "commit", "-q", "-am", "skip flaky tests")
    return git(path, "rev-parse", "HEAD").strip(), names


def original_gate(repo: Path, commit: str) -> None:
    rng = f"origin/main...{commit}"
    git(repo, "rev-parse", "--verify", "origin/main")
    listed = git(repo, "diff", "--name-only", rng).split()
    for name in listed:
        if name.startswith("tests/") and name.endswith(".py"):
            git(repo, "diff", rng, "--", name)


def ours(repo: Path, commit: str) -> None:
    from ci import skipci

    skipci.clear_cache()
    env = {"BUILDKITE_PULL_REQUEST": "1", "BUILDKITE_COMMIT": commit, "BUILDKITE_BRANCH": "pr"}
    for level in ("l2", "l3"):
        made = skipci.decision(repo, env=env)
        assert made.gate("amd", level) == "skip-all", made.message


def median(fn: object, repo: Path, commit: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn(repo, commit)  # type: ignore[operator]
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        commit, _ = make_repo(repo, args.files)
        # Silence our [diff]/[skip-ci] log lines while timing.
        devnull = open(os.devnull, "w")
        sys.stderr = devnull
        try:
            ours(repo, commit)  # warm imports
            floor = median(original_gate, repo, commit, args.runs)
            mine = median(ours, repo, commit, args.runs)
        finally:
            sys.stderr = sys.__stderr__
            devnull.close()
    print(f"changed test files                    {args.files}")
    print(f"original, one gate (git processes)    {floor * 1000:8.1f} ms (median of {args.runs})")
    print(f"ours, two gates (in-process)         {mine * 1000:8.1f} ms (median of {args.runs})")
    print(f"ours / original one gate              {mine / floor:8.2f}x  (goal <= 1x)")
    print(f"ours / original two gates             {mine / (2 * floor):8.2f}x")


if __name__ == "__main__":
    main()
