"""Overhead of `run-tests` and `step` over running the same thing with bash, in one run.

A job runs its commands once, so what matters is the fixed cost the runner
adds: Python start-up, rendering, the door's process-tree watch. Prints the
median wall and CPU time of each, and the ratios against the rendered
program under plain `bash -c` (which is what the original script cost).
Goal: under 1 s of CPU added per job.

    python benchmarks/runner.py [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def median_seconds(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """Median wall time and median CPU time (user + sys of the whole child tree)."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(
            argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    cli = shutil.which("vllm-omni-ci") or "vllm-omni-ci"
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "VLLM_CI_DOCKER_DISABLED": "1",
            "VLLM_CI_EXPECTED_GPU_COUNT": "0",
            "BUILDKITE_JOB_ID": "benchmark-runner",
            "HF_HOME": f"{tmp}/hf",
            "TEST_COMMANDS": "true",
        }
        program = subprocess.run(
            [cli, "run-tests", "--platform", "rocm", "--dry-run"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        bash = median_seconds(["bash", "-c", program], env, args.runs)
        runner = median_seconds([cli, "run-tests", "--platform", "rocm"], env, args.runs)
        plain = median_seconds(["true"], env, args.runs)
        step = median_seconds([cli, "step", "--", "true"], env, args.runs)
        shutil.rmtree("/tmp/vllm-omni-native-benchmark-runner", ignore_errors=True)
    rows = [
        ("bash -c PROGRAM", bash, None),
        ("run-tests --platform rocm", runner, bash),
        ("true", plain, None),
        ("step -- true", step, plain),
    ]
    for name, (wall, cpu), base in rows:
        line = f"{name:26} wall {wall * 1000:7.1f} ms  cpu {cpu * 1000:7.1f} ms"
        if base is not None:
            line += f"  ratio {wall / base[0]:5.1f}x  added cpu {cpu - base[1]:.2f} s"
        print(line)
    added = max(runner[1] - bash[1], step[1] - plain[1])
    print(f"goal: under 1 s of CPU added per job: {'met' if added < 1 else 'NOT met'}")
    print("(wall times include waiting for a CPU; on a loaded machine trust the cpu column)")


if __name__ == "__main__":
    main()
