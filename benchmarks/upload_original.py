"""The original `upload_pipeline.py` against `vllm-omni-ci upload-pipeline`, in one run.

Both run as a CI job runs them: a fresh process each, printing the pipeline
(the original without `--upload`; ours with `--dry-run`), over one checkout of
vLLM-Omni built the way the tests that run the originals build it
(tests/migrate_fixture.py: ../shared/vllm-omni with ../shared/vllm-omni-scripts
overlaid, committed in a temporary git repo). Seven corpus scenarios, taken
from the corpus matrix of benchmarks/render_corpus.py: CUDA ready and NPU ready
unfiltered, a docs-only diff, one model's code diff, a tests/helpers/ diff, a
diff of the pipeline file itself, and MIRROR_HW=b200. Each diff is one commit
of a `main` build (BUILDKITE_COMMIT^..BUILDKITE_COMMIT), so both read the same
changed files from real git.

Rounds alternate which of the two goes first, and every round runs every
scenario, so load from other processes on a shared machine falls on both
alike. Prints each scenario's medians, the totals and the ratio ours/original
(goal: at most 0.5x). Before timing, each scenario runs once and the two
pipelines are compared as YAML data (the two dumpers format strings
differently); a difference is reported, not fatal.

    python benchmarks/upload_original.py [--rounds 5]

Ours runs with PYTHONPATH set to this checkout, so it measures this tree's
`ci`; the original runs without it (this repository's `tests` package would
shadow the checkout's `tests/helpers/mark.py`). Nothing is written into the
repository.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# This folder is on sys.path (a script's own): `benchmarks` is no package, for mypy.
from render_corpus import CASES  # noqa: E402

from tests.gitrepo import GitRepo  # noqa: E402
from tests.migrate_fixture import make_checkout  # noqa: E402

ORIGINAL = ".buildkite/common/scripts/upload_pipeline.py"
READY = ".buildkite/cuda/test-ready.yml"
# (scenario, test YAML, corpus-matrix case of render_corpus.CASES)
SCENARIOS = (
    ("cuda ready, all", READY, "all"),
    ("npu ready, all", ".buildkite/npu/test-npu-ready.yml", "all"),
    ("cuda ready, docs-only diff", READY, "docs-only"),
    ("cuda merge, model diff", ".buildkite/cuda/test-merge.yml", "model-code"),
    ("cuda ready, tests/helpers diff", READY, "tests-helpers"),
    ("cuda ready, the file's own diff", READY, "pipeline-itself"),
    # test-ready.yml has no B200 step (empty under b200); the nightly has some.
    ("cuda nightly, MIRROR_HW=b200", ".buildkite/cuda/test-nightly.yml", "mirror-b200"),
)


@dataclass(frozen=True)
class Scenario:
    name: str
    original: list[str]
    ours: list[str]
    env: dict[str, str]


def script(name: str) -> str:
    """The console script next to this interpreter (not a version-manager shim)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name) or name


def clean_env() -> dict[str, str]:
    """This environment without the outer build's BUILDKITE_* and MIRROR_HW."""
    drop = ("PYTHONPATH", "MIRROR_HW")
    return {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE") and k not in drop}


def commit_change(repo: GitRepo, changed: list[str]) -> str:
    """One commit touching `changed` (a comment line appended, or a new file); its sha.

    The lines are comments, so the working tree renders as before every commit."""
    for rel in changed:
        path = repo.path / rel
        old = path.read_text() if path.is_file() else ""
        repo.write(rel, old + "# benchmark change\n")
    return repo.commit(f"change {', '.join(changed)}")


def scenarios(repo: GitRepo) -> list[Scenario]:
    cli = script("vllm-omni-ci")
    built = []
    for name, pipeline, case in SCENARIOS:
        scope, changed, mirror_hw = CASES[case]
        env = clean_env()
        if mirror_hw:
            env["MIRROR_HW"] = mirror_hw
        flags = ["--all"] if scope == "all" else []
        if scope == "diff":
            sha = commit_change(repo, changed or [pipeline])
            env.update(
                BUILDKITE_BRANCH="main", BUILDKITE_PULL_REQUEST="false", BUILDKITE_COMMIT=sha
            )
        original = [sys.executable, ORIGINAL, *flags, pipeline]
        ours = [cli, "upload-pipeline", "--pipeline", pipeline, *flags, "--dry-run"]
        built.append(Scenario(name, original, ours, env))
    return built


def ours_env(env: dict[str, str]) -> dict[str, str]:
    return {**env, "PYTHONPATH": str(ROOT)}


def check(repo: Path, scenario: Scenario) -> str:
    """'same', or why the two pipelines differ (one run each, also a warm-up)."""
    runs = [
        subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, check=False)
        for argv, env in (
            (scenario.original, scenario.env),
            (scenario.ours, ours_env(scenario.env)),
        )
    ]
    for who, done in zip(("original", "ours"), runs, strict=True):
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
            return f"{who} exited {done.returncode}: {tail[0]}"
    original, ours = (yaml.safe_load(done.stdout) for done in runs)
    if original == ours:
        return f"same ({len((ours or {}).get('steps') or [])} top-level steps)"
    return "DIFFERENT pipelines (compare the two outputs by hand)"


def seconds(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        argv, cwd=cwd, env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - started


def measure(repo: Path, runs: list[Scenario], rounds: int) -> dict[str, dict[str, float]]:
    """Median seconds of each scenario's original and ours, round-robin, the order
    of the two swapped every round."""
    samples: dict[str, dict[str, list[float]]] = {
        s.name: {"original": [], "ours": []} for s in runs
    }
    for round_no in range(rounds):
        for s in runs:
            pair = [("original", s.original, s.env), ("ours", s.ours, ours_env(s.env))]
            for who, argv, env in pair[:: 1 if round_no % 2 == 0 else -1]:
                samples[s.name][who].append(seconds(argv, repo, env))
    return {
        name: {who: statistics.median(values) for who, values in pair.items()}
        for name, pair in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_checkout(Path(tmp) / "vllm-omni")
        runs = scenarios(repo)
        print(f"original: {sys.executable} {ORIGINAL}; ours: {script('vllm-omni-ci')}")
        for s in runs:
            print(f"  {s.name:34s} {check(repo.path, s)}")
        results = measure(repo.path, runs, args.rounds)
    print(f"\n{'scenario':34s} {'original':>10s} {'ours':>10s} {'ours/orig':>10s}")
    for name, pair in results.items():
        ratio = pair["ours"] / pair["original"]
        print(
            f"{name:34s} {pair['original'] * 1000:7.1f} ms {pair['ours'] * 1000:7.1f} ms"
            f" {ratio:9.2f}x"
        )
    original = sum(p["original"] for p in results.values())
    ours = sum(p["ours"] for p in results.values())
    print(f"{'total (sum of medians)':34s} {original * 1000:7.1f} ms {ours * 1000:7.1f} ms")
    print(f"ours / original, {len(results)} scenarios     {ours / original:8.2f}x  (goal <= 0.5x)")
    print(f"(medians of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
