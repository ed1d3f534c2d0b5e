"""Start-up cost of the task runners, measured in one run.

`inv` and `nox` start in every CI job, so importing the namespace must cost
little more than Invoke itself. Prints the median of each command and the
ratios; the goal is `inv --list` at most 1.25x a bare one-task collection.
The commands take turns, round by round, so that load from other processes
on a shared machine falls on every command alike.

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


def seconds(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def medians(commands: dict[str, tuple[list[str], Path]], runs: int) -> dict[str, float]:
    """Round-robin: each round runs every command once, so a busy moment on a
    shared machine slows all of them alike instead of skewing one ratio."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (argv, cwd) in commands.items():
            samples[name].append(seconds(argv, cwd))
    return {name: statistics.median(values) for name, values in samples.items()}


def script(name: str) -> str:
    """The console script next to this interpreter (not a version-manager shim)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name) or name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    inv = script("inv")
    cli = script("vllm-omni-ci")
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp)
        (bare / "tasks.py").write_text(BARE)
        commands = {
            "python -c pass": ([sys.executable, "-c", "pass"], ROOT),
            "bare collection (inv --list)": ([inv, "--list"], bare),
            "inv --list": ([inv, "--list"], ROOT),
            "vllm-omni-ci --list": ([cli, "--list"], bare),
        }
        results = medians(commands, args.runs)
    for name, seconds in results.items():
        print(f"{name:32s} {seconds * 1000:8.1f} ms (median of {args.runs})")
    floor = results["bare collection (inv --list)"]
    ratio = results["inv --list"] / floor
    print(f"inv --list / bare collection     {ratio:8.2f}x  (goal <= 1.25x)")
    print(f"vllm-omni-ci --list / bare       {results['vllm-omni-ci --list'] / floor:8.2f}x")
    print(f"bare collection / python -c pass {floor / results['python -c pass']:8.2f}x")


if __name__ == "__main__":
    main()
