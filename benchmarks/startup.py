"""Start-up cost of the task runners and of `vllm-omni-ci`, measured in one run.

`inv`, `nox` and `vllm-omni-ci` start in every CI job, so importing them must
cost little. Prints, in one run on this machine:

* the median wall time and CPU (user + sys) of each command below; the goals:
  `inv --list` at most 1.25x a bare one-task Invoke collection, and
  `vllm-omni-ci --version` at most 2x `python -c "import yaml"`;
* the CPU that `vllm-omni-ci step -- true` adds to a job: its median CPU minus
  that of `true` alone (goal: at most 0.15 s). CPU is the rusage of waited-for
  children (`resource.getrusage(RUSAGE_CHILDREN)` before and after each run),
  so it counts `step`'s own child too;
* how many modules four commands leave in `sys.modules`: ours (`ci`, `ci.*`)
  and the others, and the third-party packages among them (goal: at most 30 of
  ours for `bootstrap --platform rocm --dry-run`).

The timed commands take turns, round by round, so that load from other
processes on a shared machine falls on every command alike.

Module counts: a fresh `python -c` imports the console script's entry point,
read from the installed metadata (`importlib.metadata.entry_points`, group
console_scripts, name vllm-omni-ci; the parent reads it, so the child does not
import importlib.metadata), calls it with the command's arguments, and in a
`finally` writes the sorted names in `sys.modules` to the file named by
$BENCH_MODULES_OUT. That counts exactly what a run imported, also lazily inside
functions, and does not depend on how the front end is built (Invoke or not);
`-X importtime` would need its stderr parsed apart from the command's own. The
commands run over the sample (examples/omni-sample, committed in a temporary
git repo, tests/gitrepo.py's `sample_checkout`), with no BUILDKITE_* variables
and `--labels` given, so nothing asks the network.

    python benchmarks/startup.py [--runs 15]

Every command runs with PYTHONPATH set to this checkout, so `vllm-omni-ci`
measures this tree's `ci`. Nothing is written into the repository.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.gitrepo import sample_checkout  # noqa: E402

BARE = "from invoke import task\n\n\n@task\ndef hello(c):\n    pass\n"
SAMPLE = ROOT / "examples" / "omni-sample"
MODULES_OUT = "BENCH_MODULES_OUT"
# Calls the entry point `sys.argv[1]` ("module:attr"; empty: call nothing) with the
# rest of the arguments as its command line, then lists sys.modules, whatever it raised.
RUNNER = f"""
import functools, importlib, os, sys
entry = sys.argv[1]
sys.argv = ["vllm-omni-ci", *sys.argv[2:]]
try:
    if entry:
        module, _, attr = entry.partition(":")
        call = functools.reduce(getattr, attr.split("."), importlib.import_module(module))
        call()
finally:
    with open(os.environ["{MODULES_OUT}"], "w") as out:
        out.write("\\n".join(sorted(sys.modules)) + "\\n")
"""
# (name, arguments, extra environment) of the module counts.
MODULE_COMMANDS: tuple[tuple[str, tuple[str, ...], dict[str, str]], ...] = (
    ("--version", ("--version",), {}),
    ("step -- true", ("step", "--", "true"), {}),
    (
        "upload-pipeline --dry-run",
        ("upload-pipeline", "--pipeline", ".buildkite/cuda/test-ready.yml", "--dry-run"),
        {},
    ),
    (
        "bootstrap --platform rocm --dry-run",
        ("bootstrap", "--platform", "rocm", "--dry-run", "--labels", ""),
        {},
    ),
    # The same in a PR build labelled `ready`: the diff, the skip-ci gate and the suites.
    (
        "  the same, PR build, labels ready",
        ("bootstrap", "--platform", "rocm", "--dry-run", "--labels", "ready"),
        {"BUILDKITE": "true", "BUILDKITE_BRANCH": "feature", "BUILDKITE_PULL_REQUEST": "7"},
        # BUILDKITE_COMMIT: added once the sample's feature commit exists.
    ),
)
BOOTSTRAP = "bootstrap --platform rocm --dry-run"

Command = tuple[list[str], Path]


def job_env() -> dict[str, str]:
    """This environment without the outer build's BUILDKITE_* and schedule, with this
    checkout first on the import path."""
    drop = ("NIGHTLY", "WEEKLY", "NON_CRITICAL", "DEBUG_TEST_YAML", "MIRROR_HW")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE") and k not in drop}
    return {**env, "PYTHONPATH": str(ROOT)}


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run, its descendants' CPU included."""
    cpu = cpu_of_children()
    started = time.perf_counter()
    quiet = subprocess.DEVNULL
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=quiet, stderr=quiet)
    return time.perf_counter() - started, cpu_of_children() - cpu


def medians(
    commands: dict[str, Command], runs: int, env: dict[str, str]
) -> dict[str, tuple[float, float]]:
    """Round-robin: each round runs every command once, so a busy moment on a
    shared machine slows all of them alike instead of skewing one ratio."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (argv, cwd) in commands.items():
            samples[name].append(timed(argv, cwd, env))
    return {
        name: (statistics.median(w for w, _ in got), statistics.median(c for _, c in got))
        for name, got in samples.items()
    }


def script(name: str) -> str:
    """The console script next to this interpreter (not a version-manager shim)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name) or name


def entry_point() -> str:
    """The installed console script's target, "module:attr" (ci.cli:main today)."""
    found = importlib.metadata.entry_points(group="console_scripts", name="vllm-omni-ci")
    if not found:
        raise SystemExit("error: no vllm-omni-ci console script installed (pip install -e .)")
    return next(iter(found)).value


def modules(entry: str, args: tuple[str, ...], cwd: Path, env: dict[str, str]) -> list[str]:
    """The module names in sys.modules when the entry point returns or raises."""
    with tempfile.NamedTemporaryFile(suffix=".txt") as out:
        done = subprocess.run(
            [sys.executable, "-c", RUNNER, entry, *args],
            cwd=cwd,
            env={**env, MODULES_OUT: out.name},
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        names = Path(out.name).read_text().split()
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        print(f"  note: {' '.join(args)} exited {done.returncode}: {last[0]}")
    return names


def ours(name: str) -> bool:
    return name == "ci" or name.startswith("ci.")


@functools.cache
def stdlib() -> frozenset[str]:
    return frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names) | {"__main__"}


def third_party(names: list[str]) -> list[str]:
    """Top-level packages that are neither ours nor the standard library's."""
    tops = {name.split(".")[0] for name in names if not ours(name)}
    # Leading underscore: import hooks and compiled helpers (the editable install's
    # finder, _distutils_hack, _cython_*), not packages a task chose to load.
    return sorted(t for t in tops - stdlib() if not t.startswith("_") and t != "cython_runtime")


def sample_pr(path: Path) -> tuple[Path, str]:
    """The sample on `main` (pushed), then one commit on `feature`: (checkout, its sha)."""
    repo = sample_checkout(path, SAMPLE)
    repo.branch("feature")
    repo.commit_files({"omni_sample/benchmark_change.py": "CHANGED = True\n"})
    return repo.path, repo.sha()


def module_counts(env: dict[str, str], sample: Path, commit: str) -> dict[str, int]:
    entry = entry_point()
    bare = set(modules("", (), sample, env))
    print(
        f"\nmodules in sys.modules at exit (entry point {entry}; a bare interpreter: {len(bare)})"
    )
    print(f"{'command':40s} {'ours':>5s} {'others':>7s} {'beyond bare':>12s}  third-party packages")
    counted: dict[str, int] = {}
    for name, args, extra in MODULE_COMMANDS:
        build = {**extra, "BUILDKITE_COMMIT": commit} if extra else {}
        names = modules(entry, args, sample, {**env, **build})
        mine = [n for n in names if ours(n)]
        others = [n for n in names if not ours(n)]
        beyond = [n for n in others if n not in bare]
        packages = ", ".join(third_party(names)) or "-"
        print(f"{name:40s} {len(mine):5d} {len(others):7d} {len(beyond):12d}  {packages}")
        counted[name] = len(mine)
    return counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    inv = script("inv")
    cli = script("vllm-omni-ci")
    env = job_env()
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare"
        bare.mkdir()
        (bare / "tasks.py").write_text(BARE)
        sample, commit = sample_pr(Path(tmp) / "sample")
        commands: dict[str, Command] = {
            "python -c pass": ([sys.executable, "-c", "pass"], ROOT),
            'python -c "import yaml"': ([sys.executable, "-c", "import yaml"], ROOT),
            "bare collection (inv --list)": ([inv, "--list"], bare),
            "inv --list": ([inv, "--list"], ROOT),
            "vllm-omni-ci --list": ([cli, "--list"], bare),
            "vllm-omni-ci --version": ([cli, "--version"], bare),
            "true": (["true"], bare),
            "vllm-omni-ci step -- true": ([cli, "step", "--", "true"], bare),
        }
        results = medians(commands, args.runs, env)
        print(f"{'command':32s} {'wall':>11s} {'CPU':>11s}   (medians of {args.runs})")
        for name, (seconds, cpu) in results.items():
            print(f"{name:32s} {seconds * 1000:8.1f} ms {cpu * 1000:8.1f} ms")
        wall = {name: w for name, (w, _) in results.items()}
        floor = wall["bare collection (inv --list)"]
        yaml_floor = wall['python -c "import yaml"']
        step_cpu = results["vllm-omni-ci step -- true"][1] - results["true"][1]
        print(
            f"inv --list / bare collection     {wall['inv --list'] / floor:8.2f}x  (goal <= 1.25x)"
        )
        print(f"vllm-omni-ci --list / bare       {wall['vllm-omni-ci --list'] / floor:8.2f}x")
        print(f"bare collection / python -c pass {floor / wall['python -c pass']:8.2f}x")
        version = wall["vllm-omni-ci --version"] / yaml_floor
        print(f"--version / python -c import yaml {version:7.2f}x  (goal <= 2x)")
        print(f"CPU added per job by step -- true {step_cpu:7.3f} s  (goal <= 0.15 s)")
        counted = module_counts(env, sample, commit)
    print(f"ours imported by {BOOTSTRAP}: {counted[BOOTSTRAP]}  (goal <= 30)")


if __name__ == "__main__":
    main()
