"""Overhead of `run-tests` and `step` over running the same thing with bash, in one run.

A job runs its commands once, so what matters is the fixed cost the runner
adds: Python start-up, rendering, the door's process-tree watch. Prints the
median of each and the ratios against the rendered program under plain
`bash -c` (which is what the original script cost). Goal: under 1 s added
per job.

    python benchmarks/runner.py [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def median_seconds(argv: list[str], env: dict[str, str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


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
    added = runner - bash
    verdict = "met" if max(added, step - plain) < 1 else "NOT met"
    print(f"bash -c PROGRAM           {bash * 1000:8.1f} ms")
    print(
        f"run-tests --platform rocm {runner * 1000:8.1f} ms  {runner / bash:5.1f}x, +{added:.2f} s"
    )
    print(f"true                      {plain * 1000:8.1f} ms")
    print(f"step -- true              {step * 1000:8.1f} ms  +{step - plain:.2f} s")
    print(f"goal: under 1 s added per job: {verdict}")


if __name__ == "__main__":
    main()
