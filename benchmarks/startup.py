"""Start-up cost of the task runners, measured in one run.

`inv` and `nox` start in every CI job, so importing the namespace must cost
little more than Invoke itself. Prints the median of each command and the
ratios; the goal is `inv --list` at most 1.25x a bare one-task collection.

    python benchmarks/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BARE = "from invoke import task\n\n\n@task\ndef hello(c):\n    pass\n"


def median_seconds(argv: list[str], cwd: Path, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    inv = shutil.which("inv") or "inv"
    cli = shutil.which("vllm-omni-ci") or "vllm-omni-ci"
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp)
        (bare / "tasks.py").write_text(BARE)
        results = {
            "python -c pass": median_seconds([sys.executable, "-c", "pass"], ROOT, args.runs),
            "bare collection (inv --list)": median_seconds([inv, "--list"], bare, args.runs),
            "inv --list": median_seconds([inv, "--list"], ROOT, args.runs),
            "vllm-omni-ci --list": median_seconds([cli, "--list"], bare, args.runs),
        }
    for name, seconds in results.items():
        print(f"{name:32s} {seconds * 1000:8.1f} ms (median of {args.runs})")
    floor = results["bare collection (inv --list)"]
    ratio = results["inv --list"] / floor
    print(f"inv --list / bare collection     {ratio:8.2f}x  (goal <= 1.25x)")
    print(f"vllm-omni-ci --list / bare       {results['vllm-omni-ci --list'] / floor:8.2f}x")
    print(f"bare collection / python -c pass {floor / results['python -c pass']:8.2f}x")


if __name__ == "__main__":
    main()
