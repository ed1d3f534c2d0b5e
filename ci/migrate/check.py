"""`migrate --check`: the old CI and the new CI, side by side, on this checkout.

Before: the checkout's own old scripts at its HEAD. After: our commands on the
same revision with `migrate` applied (in a private clone; the checkout is never
touched). Each side runs every cell of the matrix (`ci.migrate.matrix`) with the
recording stand-ins, and `ci.migrate.compare` judges the cells job by job.
Exit 0 only when every cell is the same (documented differences named) or
skipped by both; 1 otherwise.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

from ci import door
from ci.errors import FAILURE, UserError
from ci.migrate import edits, known, report, rewrites, standins
from ci.migrate.compare import Cell, compare
from ci.migrate.matrix import SITUATIONS, Change, changes
from ci.migrate.simulate import Outcome, run_build
from ci.platforms import Platform
from ci.target import resolve_repo

# Where each platform's CI starts: the pipeline file Buildkite's hook uploads, or
# the command of the one step written in the Buildkite pipeline's settings.
ENTRIES: Final[dict[Platform, str | Path]] = {
    Platform.ROCM: "bash .buildkite/amd/scripts/bootstrap-amd-omni.sh",
    Platform.CUDA: Path(".buildkite/cuda/pipeline.yml"),
    Platform.NPU: Path(".buildkite/npu/pipeline-npu.yml"),
    Platform.XPU: "bash .buildkite/intel/scripts/bootstrap-intel-omni.sh",
}
SIDES: Final = ("before", "after")
Clones = dict[tuple[str, str, Platform], tuple[Path, str]]  # side, change, platform: clone, commit


def run(repo: Path, fmt: str, *, migrate: Callable[[Path], None] | None = None) -> int:
    """Build both sides, run the matrix, print the report in `fmt`; the exit code."""
    if fmt not in report.FORMATS:
        raise UserError(f"--format: {fmt!r} is not one of {', '.join(report.FORMATS)}")
    checkout = resolve_repo(repo)
    if not door.capture(["git", "rev-parse", "HEAD"], cwd=str(checkout)).ok:
        raise UserError(f"--repo: {checkout} is not a git checkout with a commit")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vllm-omni-ci-check-") as scratch:
        root = Path(scratch)
        tools = root / "bin"
        standins.install(tools)
        kinds = changes(checkout)
        clones = _prepare(checkout, root, kinds, migrate or edits.apply)
        outcomes = _run_all(clones, tools, root)
    cells = [
        Cell(change.name, situation.name, platform, *compare(
            outcomes["before", change.name, situation.name, platform],
            outcomes["after", change.name, situation.name, platform],
            situation, known.KNOWN, platform.value,
        ))
        for change in kinds for situation in SITUATIONS for platform in ENTRIES
    ]  # fmt: skip
    print(report.render(cells, fmt, seconds=time.monotonic() - started), end="")
    return 0 if all(c.verdict != "differs" for c in cells) else FAILURE


def _git(cwd: Path, *args: str) -> str:
    result = door.capture(["git", *args], cwd=str(cwd), env=_IDENTITY)
    if not result.ok:
        raise UserError(f"git {' '.join(args)} in {cwd}: {result.stderr.strip()}", code=FAILURE)
    return result.stdout.strip()


_IDENTITY: Final = {
    "GIT_AUTHOR_NAME": "vllm-omni-ci migrate --check",
    "GIT_AUTHOR_EMAIL": "migrate-check@localhost",
    "GIT_COMMITTER_NAME": "vllm-omni-ci migrate --check",
    "GIT_COMMITTER_EMAIL": "migrate-check@localhost",
}


def _prepare(
    checkout: Path, root: Path, kinds: tuple[Change, ...], migrate: Callable[[Path], None]
) -> Clones:
    """One clone per side, change and platform (so builds can run side by side: an old
    script may write into its checkout), at that change's commit, with `origin/main` at
    the side's main (the checkout's HEAD, or HEAD with migrate applied)."""
    base = root / "base"
    _git(root, "clone", "-q", "--shared", "--", str(checkout), str(base))
    head = _git(base, "rev-parse", "HEAD")
    migrate(base)
    _git(base, "add", "-A")
    _git(base, "commit", "-q", "--allow-empty", "-m", "migrate")
    mains = {"before": head, "after": _git(base, "rev-parse", "HEAD")}
    clones: Clones = {}
    for side in SIDES:
        for number, change in enumerate(kinds):
            _git(base, "checkout", "-q", "--detach", mains[side])
            for rel, text in change.files.items():
                path = base / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a") as out:
                    out.write(text)
            _git(base, "add", "-A")
            _git(base, "commit", "-q", "-m", f"migrate --check: {change.name}")
            commit = _git(base, "rev-parse", "HEAD")
            for platform in ENTRIES:
                clone = root / f"{side}-{number}-{platform.value}"
                _git(root, "clone", "-q", "--shared", "--no-checkout", "--", str(base), str(clone))
                ref = ("refs/remotes/origin/main", mains[side])
                _git(clone, "update-ref", "--end-of-options", *ref)
                _git(clone, "checkout", "-q", "--detach", commit)
                clones[side, change.name, platform] = clone, commit
    return clones


def _run_all(
    clones: Clones, tools: Path, root: Path
) -> dict[tuple[str, str, str, Platform], Outcome]:
    """Every cell on both sides, one clone per worker at a time, as many workers as CPUs
    (plus one for the time builds wait on files); the longest clones start first."""

    def one_clone(key: tuple[str, str, Platform]) -> dict[tuple[str, str, str, Platform], Outcome]:
        side, change, platform = key
        entry = ENTRIES[platform]
        if side == "after" and not isinstance(entry, Path):
            entry = rewrites.rewrite(entry)[0]
        clone, commit = clones[key]
        record = root / f"record-{clone.name}"
        return {
            (side, change, situation.name, platform): run_build(
                clone, commit, entry, situation, tools, record
            )
            for situation in SITUATIONS
        }

    # Ours run more processes per build than the old scripts; CUDA uploads the most.
    order = sorted(clones, key=lambda k: (k[0] != "after", _COST.index(k[2])))
    outcomes: dict[tuple[str, str, str, Platform], Outcome] = {}
    with ThreadPoolExecutor(max_workers=(os.cpu_count() or 1) + 1) as pool:
        for done in pool.map(one_clone, order):
            outcomes.update(done)
    return outcomes


_COST: Final = (Platform.CUDA, Platform.NPU, Platform.ROCM, Platform.XPU)
