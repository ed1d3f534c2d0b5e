"""The wheelhouse: vllm-omni-ci and its runtime dependencies as wheels, for offline images.

CI images build with no network, so the host, where the index is reachable,
collects every wheel once into the build contexts; images then `pip install
--no-index --find-links wheelhouse`. The wheels target the images' interpreter
(Debian bookworm's CPython 3.11), not the host's.
"""

from __future__ import annotations

import filecmp
import os
import platform as host_platform
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ci.door import Command, Plan, execute, note, run
from ci.errors import Failure, Stop, UserError

# Debian bookworm's python3, the interpreter of every image built offline here.
DEFAULT_PYTHON_VERSION = "3.11"
# Installed next to vllm-omni-ci in the images: the sample's test runner.
EXTRA_REQUIREMENTS = ("pytest",)
# Our own wheels; each build leaves exactly one, so an image's `pip install vllm-omni-ci`
# from the wheelhouse cannot pick an older commit's wheel.
OUR_WHEELS = "vllm_omni_ci-*.whl"
# The download step's pin before step 1 has built the wheel (a dry run shows it so).
BUILT = "<the built wheel's version>"
_PY_VERSION = re.compile(r"^3\.\d{1,2}$")
_MANYLINUX = ("manylinux_2_28", "manylinux_2_17", "manylinux2014")
# Fixed zip timestamps (1980-01-01, the zip epoch): an unchanged source gives a
# byte-identical wheel, so image layers that COPY the wheelhouse stay cached.
REPRODUCIBLE_EPOCH = "315532800"


def project_root() -> Path:
    """The source checkout this package was installed from (editable installs only)."""
    return Path(__file__).resolve().parents[1]


def default_dests(root: Path) -> tuple[Path, ...]:
    """The build contexts that need wheels: this repo (tools image) and the sample."""
    return (root / "wheelhouse", root / "examples" / "omni-sample" / "wheelhouse")


@dataclass(frozen=True)
class WheelhouseOptions:
    root: Path
    dests: tuple[Path, ...]
    python_version: str = DEFAULT_PYTHON_VERSION
    machine: str = ""
    python: str = sys.executable


def built_version(dest: Path) -> str:
    """The version in the name of the one vllm-omni-ci wheel in `dest`: the wheel that was
    built is the one the images install, whatever the installed copy says."""
    wheels = sorted(dest.glob(OUR_WHEELS))
    if len(wheels) != 1:
        names = ", ".join(w.name for w in wheels) or "none"
        raise Failure(f"wheelhouse: expected one vllm-omni-ci wheel in {dest}, found {names}")
    return wheels[0].name.split("-")[1]


def plan(options: WheelhouseOptions, version: str = BUILT) -> Plan:
    """Build our wheel, then download the dependency wheels for the images' Python, into the
    first destination (`sync` copies it to the others: the index is asked once). The download
    pins `version`, the built wheel's."""
    problems: list[str] = []
    if not _PY_VERSION.match(options.python_version):
        problems.append(f"--python-version must look like 3.11, got {options.python_version!r}")
    if not options.dests:
        problems.append("--dest: at least one directory is needed")
    # os.path's test: False, not an OSError, for a name the system refuses (too long).
    files = [d for d in options.dests if os.path.isfile(d)]
    problems += [f"--dest: {d} is a file, not a directory" for d in files]
    UserError.collect(problems)
    dest = str(options.dests[0])
    machine = options.machine or host_platform.machine() or "x86_64"
    pip = (options.python, "-m", "pip")
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    platforms = [word for tag in _MANYLINUX for word in ("--platform", f"{tag}_{machine}")]
    abi = f"cp{options.python_version.replace('.', '')}"
    build = Command(
        (*pip, "wheel", "--no-deps", "--wheel-dir", dest, str(options.root)),
        description="build the vllm-omni-ci wheel (reproducible)",
        env={**env, "SOURCE_DATE_EPOCH": REPRODUCIBLE_EPOCH},
    )
    argv = (
        *pip, "download", "--dest", dest, "--find-links", dest, "--only-binary=:all:",
        "--python-version", options.python_version, "--implementation", "cp",
        "--abi", abi, "--abi", "abi3", "--abi", "none", *platforms,
        f"vllm-omni-ci=={version}", *EXTRA_REQUIREMENTS,
    )  # fmt: skip
    download = Command(
        argv,
        description=f"download runtime dependency wheels for CPython {options.python_version}",
        env=env,
    )
    return Plan(
        commands=(build, download),
        facts=(
            ("vllm-omni-ci", version),
            ("python", options.python_version),
            ("machine", machine),
            ("wheelhouse", dest),
            ("copied to", ", ".join(str(d) for d in options.dests[1:]) or "-"),
            ("reuse", "step 2 runs with --no-index first; the index only if a wheel is missing"),
        ),
        title="wheelhouse",
    )


def sync(source: Path, others: tuple[Path, ...]) -> None:
    """Mirror the wheels of `source` into each other directory (stale wheels removed)."""
    wheels = sorted(source.glob("*.whl"))
    names = {w.name for w in wheels}
    for other in others:
        other.mkdir(parents=True, exist_ok=True)
        for stale in other.glob("*.whl"):
            if stale.name not in names:
                stale.unlink()
        for wheel in wheels:
            target = other / wheel.name
            if not target.exists() or not filecmp.cmp(wheel, target, shallow=False):
                shutil.copy2(wheel, target)
        note(f"wheelhouse: {len(wheels)} wheels in {other}")


def offline(download: Command) -> Command:
    """The download step restricted to the wheels already in the wheelhouse."""
    at = download.argv.index("download") + 1
    return Command(
        (*download.argv[:at], "--no-index", *download.argv[at:]),
        description=download.description + " (offline, from the wheelhouse)",
        env=download.env,
    )


def build(options: WheelhouseOptions, *, dry_run: bool = False) -> None:
    the_plan = plan(options)
    if dry_run:
        execute(the_plan, dry_run=True)
        return
    for dest in options.dests:
        try:
            dest.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--dest: cannot create {dest}: {exc.strerror}") from None
        if not os.access(dest, os.W_OK | os.X_OK):
            raise UserError(f"--dest: {dest} is not writable")
    for stale in options.dests[0].glob(OUR_WHEELS):
        stale.unlink()
    code = run(the_plan.commands[0]).code
    if code == 0:
        download = plan(options, built_version(options.dests[0])).commands[1]
        if not run(offline(download), output="capture", quiet=True).ok:
            code = run(download).code
    if code != 0:
        raise Stop(code, f"error: wheelhouse: a pip command failed (exit {code})")
    sync(options.dests[0], options.dests[1:])
    sys.stdout.write("".join(f"{d}\n" for d in options.dests))
    note(f"wheelhouse: {len(list(options.dests[0].glob('*.whl')))} wheels in {options.dests[0]}")
