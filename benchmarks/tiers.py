"""The sample's ROCm ready tier in containers: one job at a time against `-j 2`, in one run.

Builds the sample's ROCm image once (`build-image --builder engine --no-push`, under a
registry name and commit of this run only, from a copy with its wheelhouse, as
tests/test_tiers_docker.py does), then runs `tier ready --platform rocm` on it with
`-j 1` and with `-j 2`, each into a results folder of its own, and prints both wall
times and their ratio. Goal: -j 2 / -j 1 <= 0.6 (printed, never asserted: it depends
on the cores free here). Needs the sandbox (`vllm-omni-ci sandbox up`).

    python benchmarks/tiers.py [--keep-image]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "omni-sample"
REGISTRY = "127.0.0.1:5000/omni-ci-bench/tiers-rocm"
GOAL = 0.6


def cli() -> str:
    return shutil.which("vllm-omni-ci") or "vllm-omni-ci"


def tier(repo: Path, env: dict[str, str], results: Path, jobs: int) -> float:
    """Wall seconds of the ready tier with `-j jobs`; its exit must be 0 (all blocking passed)."""
    argv = [cli(), "tier", "ready", "--platform", "rocm", "--repo", str(repo)]
    argv += ["-j", str(jobs), "--results", str(results)]
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"tier -j {jobs} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep-image", action="store_true", help="keep the image built")
    args = parser.parse_args()
    commit = f"bench-{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE") and k != "CI"}
    env |= {"BUILDKITE_COMMIT": commit, "ROCM_CI_IMAGE_REGISTRY": REGISTRY}
    image = f"{REGISTRY}:{commit}"
    docker = os.environ.get("VLLM_OMNI_CI_DOCKER") or "docker"
    with tempfile.TemporaryDirectory(prefix="tiers-bench-") as tmp:
        repo = Path(tmp) / "omni-sample"
        shutil.copytree(SAMPLE, repo, symlinks=True, ignore=shutil.ignore_patterns("wheelhouse"))
        wheels = [cli(), "wheelhouse", "--dest", str(repo / "wheelhouse")]
        subprocess.run(wheels, check=True, capture_output=True)  # not timed
        build = [cli(), "build-image", "--platform", "rocm", "--repo", str(repo)]
        built = subprocess.run([*build, "--builder", "engine", "--no-push"], env=env, text=True,
                               capture_output=True)  # fmt: skip
        if built.returncode:
            raise SystemExit(f"build-image exited {built.returncode}:\n{built.stderr[-3000:]}")
        try:
            one = tier(repo, env, Path(tmp) / "j1", 1)
            two = tier(repo, env, Path(tmp) / "j2", 2)
        finally:
            if not args.keep_image:
                subprocess.run([docker, "rmi", "-f", image], capture_output=True)
    ratio = two / one
    print(f"image                {image}")
    print(f"ready tier, -j 1     {one:7.1f} s")
    print(f"ready tier, -j 2     {two:7.1f} s")
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(f"-j 2 / -j 1          {ratio:7.3f}  (goal <= {GOAL}: {verdict})")
    print(f"(CPUs here: {os.cpu_count()}; on a loaded machine the ratio rises)")


if __name__ == "__main__":
    main()
