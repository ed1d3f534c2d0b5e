"""The test suite's cost, measured in one run: phases, slowest tests, heaviest files.

Runs our own tests the way the nox `tests` session does (both cores, the groups
tests/conftest.py gives), in phases, and prints each phase's wall time, the
15 slowest tests and the 15 heaviest test files of each phase (summed test
time, which exceeds the wall time when both workers are busy). No test asserts
a duration; this script is where the suite's speed is read.

    python benchmarks/suite.py                  # everything but Docker, then Docker
    python benchmarks/suite.py --phase not-docker
    python benchmarks/suite.py --serial         # one process, for a baseline
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = {"not-docker": "not docker", "docker": "docker"}
SHOWN = 15


@dataclass(frozen=True)
class Case:
    """One test's reported time (setup, call and teardown), from pytest's JUnit XML."""

    file: str
    name: str
    seconds: float


def cases(junit: Path) -> list[Case]:
    found = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").removeprefix("tests.").split(".")[0]
        found.append(Case(module, case.get("name", ""), float(case.get("time", 0))))
    return found


def run_phase(marker: str, serial: bool, folder: Path) -> tuple[float, int, list[Case]]:
    junit = folder / f"{marker.replace(' ', '-')}.xml"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker]
    argv += ["--durations=0", f"--junitxml={junit}"]
    argv += ["-n", "0"] if serial else ["-n", "auto", "--dist", "loadgroup"]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    return wall, done.returncode, cases(junit) if junit.exists() else []


def report(phase: str, wall: float, code: int, found: list[Case]) -> None:
    summed = sum(c.seconds for c in found)
    print(f"== {phase}: {wall:.0f} s wall, {len(found)} tests, {summed:.0f} s of test time,"
          f" pytest exit {code}")  # fmt: skip
    print(f"   slowest {SHOWN} tests:")
    for case in sorted(found, key=lambda c: c.seconds, reverse=True)[:SHOWN]:
        print(f"   {case.seconds:7.2f} s  {case.file}::{case.name}")
    per_file: dict[str, float] = {}
    for case in found:
        per_file[case.file] = per_file.get(case.file, 0.0) + case.seconds
    print(f"   heaviest {SHOWN} files:")
    for file, seconds in sorted(per_file.items(), key=lambda kv: kv[1], reverse=True)[:SHOWN]:
        print(f"   {seconds:7.1f} s  {file}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=sorted(PHASES), action="append")
    parser.add_argument("--serial", action="store_true", help="one process (-n 0)")
    options = parser.parse_args()
    worst = 0
    with tempfile.TemporaryDirectory(prefix="suite-bench-") as folder:
        total = 0.0
        for phase in options.phase or list(PHASES):
            wall, code, found = run_phase(PHASES[phase], options.serial, Path(folder))
            report(phase, wall, code, found)
            total += wall
            worst = max(worst, code)
        print(f"== total: {total:.0f} s wall ({'serial' if options.serial else 'xdist'})")
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
