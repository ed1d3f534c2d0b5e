"""`migrate --check`: the old CI and the new CI, side by side, on this checkout.

Before: the checkout's own old scripts at its HEAD. After: our commands on the
same revision with `migrate` applied (in a private clone; the checkout is never
touched). Each side runs every cell of the matrix (`ci.migrate.matrix`) with the
recording stand-ins, and `ci.migrate.compare` judges the cells job by job.
Exit 0 only when every cell is the same (documented differences named) or
skipped by both; 1 otherwise. Progress goes to stderr (`ci.migrate.progress`), the
report to stdout; with `--format markdown` (short enough for a PR description) the
complete per-cell report goes to a file (`FULL_REPORT` unless `full_report` names
one). A platform whose old CI entry the checkout lacks is not compared (a `note:`
line says so); none left is an input error.

The check's scratch folder goes on every way out. SIGTERM, SIGINT and SIGHUP end
the builds that run (their commands within `simulate.GRACE` seconds), then the
check, with 143, 130 or 129, well inside Buildkite's 10 s between TERM and KILL.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Final

from ci import door
from ci.errors import FAILURE, Failure, UserError
from ci.migrate import edits, known, progress, report, rewrites, standins
from ci.migrate.compare import Cell, agrees, compare
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


def run(
    repo: Path,
    fmt: str,
    *,
    migrate: Callable[[Path], None] | None = None,
    platforms: Collection[Platform] | None = None,
    change_names: Collection[str] | None = None,
    full_report: Path | None = None,
) -> int:
    """Build both sides, run the matrix, print the report in `fmt`; the exit code.

    The full per-cell Markdown goes to `full_report` when given, and with `markdown`
    to `FULL_REPORT` (in the current folder) when not; a `note:` line names the file.

    `platforms` and `change_names` (None: all) keep only those columns and rows of the
    matrix: a caller that changed one platform's files runs the cells that can show it,
    not all of them (the planted-regression test does). Every situation still runs."""
    if fmt not in report.FORMATS:
        raise UserError(f"--format: {fmt!r} is not one of {', '.join(report.FORMATS)}")
    if full_report is None and fmt == "markdown":
        full_report = Path(FULL_REPORT)
    if full_report is not None and not full_report.absolute().parent.is_dir():
        raise UserError(f"--full-report: {full_report}: its folder does not exist")
    checkout = resolve_repo(repo)
    if not door.capture(["git", "rev-parse", "HEAD"], cwd=str(checkout)).ok:
        raise UserError(f"--repo: {checkout} is not a git checkout with a commit")
    kinds = _selected(changes(checkout), change_names)
    compared, missing = comparable(checkout, platforms)
    for line in missing:
        door.note(f"note: {line}; not compared")
    if not compared:
        raise UserError(f"--repo: {checkout}: no platform's old CI entry; nothing to compare")
    if missing:
        door.note(f"note: compared: {', '.join(p.value for p in compared)}")
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    try:
        with progress.shown(len(kinds) * len(SITUATIONS) * len(compared)) as shown:
            tools = root / "bin"
            standins.install(tools)
            clones = _prepare(checkout, root, kinds, migrate or edits.apply, compared)
            outcomes = _run_all(clones, tools, root, shown)
    finally:
        held = _remove(root)
    if held:  # a signal while the folder went: it ends the check now
        raise door.Interrupted(128 + held[0], f"interrupted by signal {held[0]}")
    cells = [
        Cell(change.name, situation.name, platform, *compare(
            outcomes["before", change.name, situation.name, platform],
            outcomes["after", change.name, situation.name, platform],
            situation, known.KNOWN, platform.value,
        ))
        for change in kinds for situation in SITUATIONS for platform in compared
    ]  # fmt: skip
    seconds = time.monotonic() - started
    full = None
    if full_report is not None:
        _write(full_report, report.full_markdown(cells, seconds=seconds, not_compared=missing))
        door.note(f"note: full report (every cell): {full_report}")
        full = str(full_report)
    shown_report = report.render(cells, fmt, seconds=seconds, not_compared=missing, full=full)
    print(shown_report, end="")
    return 0 if all(agrees(c.verdict) for c in cells) else FAILURE


FULL_REPORT: Final = "migrate-check-full.md"


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise UserError(f"--full-report: {path}: {exc.strerror or exc}") from exc


SCRATCH_PREFIX: Final = "vllm-omni-ci-check-"


def _selected(kinds: tuple[Change, ...], names: Collection[str] | None) -> tuple[Change, ...]:
    """The changes named (None: all). A name that is no change, or no name, is the caller's
    mistake: it fails here rather than leave a matrix that runs nothing and passes."""
    if names is None:
        return kinds
    unknown = set(names) - {change.name for change in kinds}
    if unknown or not names:
        known_names = ", ".join(change.name for change in kinds)
        raise ValueError(f"change_names: {sorted(unknown)} not among {known_names}")
    return tuple(change for change in kinds if change.name in names)


def entry_file(entry: str | Path) -> str:
    """The checkout's file a platform's CI starts from: its entry pipeline, or the script
    that the settings' one step runs."""
    return entry.as_posix() if isinstance(entry, Path) else entry.split()[-1]


def comparable(
    checkout: Path, among: Collection[Platform] | None = None
) -> tuple[tuple[Platform, ...], tuple[str, ...]]:
    """The platforms (of `among`; None: all) whose old CI can run at the checkout's HEAD
    (its entry file is there), and for each other one why not
    (`cuda: .buildkite/cuda/pipeline.yml not found`)."""
    wanted = {
        platform: entry_file(entry)
        for platform, entry in ENTRIES.items()
        if among is None or platform in among
    }
    listed = _git(checkout, "ls-tree", "--name-only", "HEAD", "--", *wanted.values())
    there = set(listed.splitlines())
    return (
        tuple(p for p, rel in wanted.items() if rel in there),
        tuple(f"{p.value}: {rel} not found" for p, rel in wanted.items() if rel not in there),
    )


@contextlib.contextmanager
def _signals_held() -> Iterator[list[int]]:
    """SIGTERM, SIGINT and SIGHUP only recorded in the yielded list (main thread), so that
    the stop itself (ending the builds, removing the folder; bounded by `simulate.GRACE`)
    is not cut short and leaves nothing behind."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    old = {sig: signal.signal(sig, lambda n, _: held.append(n)) for sig in door.FORWARDED_SIGNALS}
    try:
        yield held
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _remove(root: Path) -> list[int]:
    """Remove the scratch folder, safe from signals; the signals that came meanwhile.
    Its clones go side by side: one after another took seconds on a busy machine."""
    with _signals_held() as held:
        with ThreadPoolExecutor(max_workers=_REMOVERS) as pool:
            parts = list(root.iterdir()) if root.is_dir() else []
            pool.map(lambda path: shutil.rmtree(path, ignore_errors=True), parts)
        shutil.rmtree(root, ignore_errors=True)
    return held


_REMOVERS: Final = 16


def _git(cwd: Path, *args: str) -> str:
    result = door.capture(["git", *args], cwd=str(cwd), env=_IDENTITY)
    if not result.ok:
        raise Failure(f"git {' '.join(args)} in {cwd}: {result.stderr.strip()}")
    return result.stdout.strip()


_IDENTITY: Final = {
    "GIT_AUTHOR_NAME": "vllm-omni-ci migrate --check",
    "GIT_AUTHOR_EMAIL": "migrate-check@localhost",
    "GIT_COMMITTER_NAME": "vllm-omni-ci migrate --check",
    "GIT_COMMITTER_EMAIL": "migrate-check@localhost",
}


def _prepare(
    checkout: Path,
    root: Path,
    kinds: tuple[Change, ...],
    migrate: Callable[[Path], None],
    platforms: tuple[Platform, ...],
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
            for platform in platforms:
                clone = root / f"{side}-{number}-{platform.value}"
                _git(root, "clone", "-q", "--shared", "--no-checkout", "--", str(base), str(clone))
                ref = ("refs/remotes/origin/main", mains[side])
                _git(clone, "update-ref", "--end-of-options", *ref)
                _git(clone, "checkout", "-q", "--detach", commit)
                clones[side, change.name, platform] = clone, commit
    return clones


def _run_all(
    clones: Clones, tools: Path, root: Path, shown: progress.Progress
) -> dict[tuple[str, str, str, Platform], Outcome]:
    """Every cell on both sides, one clone per worker at a time, as many workers as CPUs
    (plus one for the time builds wait on files); the longest clones start first, each
    change's two sides one after the other (a cell is done, and counted, when both are).
    A signal reaches only this thread: it is passed on to every worker through `cancel`,
    which ends the command each runs; the first failure ends the others so too."""
    cancel: list[int] = []

    def one_clone(key: tuple[str, str, Platform]) -> dict[tuple[str, str, str, Platform], Outcome]:
        side, change, platform = key
        entry = ENTRIES[platform]
        if side == "after" and not isinstance(entry, Path):
            entry = rewrites.rewrite(entry)[0]
        clone, commit = clones[key]
        record = root / f"record-{clone.name}"
        found = {}
        for situation in SITUATIONS:
            build = (side, change, situation.name, platform)
            shown.started(build)
            found[build] = run_build(clone, commit, entry, situation, tools, record, cancel)
            shown.ended(build)
        return found

    # CUDA uploads the most; ours run more processes per build than the old scripts.
    order = sorted(clones, key=lambda k: (_COST.index(k[2]), k[1], k[0] != "after"))
    outcomes: dict[tuple[str, str, str, Platform], Outcome] = {}
    pool = ThreadPoolExecutor(max_workers=(os.cpu_count() or 1) + 1)
    try:
        pending = {pool.submit(one_clone, key) for key in order}
        while pending:
            # Wake up often: the kernel may hand a signal to a worker thread, and Python runs
            # its handler only when this (main) thread runs, which a wait without a timeout
            # would put off until a whole clone's builds had finished.
            done, pending = wait(pending, timeout=_POLL, return_when=FIRST_COMPLETED)
            for future in done:
                outcomes.update(future.result())
    except BaseException as exc:
        with _signals_held():
            cancel.append(exc.code - 128 if isinstance(exc, door.Interrupted) else signal.SIGTERM)
            pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    return outcomes


_COST: Final = (Platform.CUDA, Platform.NPU, Platform.ROCM, Platform.XPU)
_POLL: Final = 0.2  # seconds between the main thread's looks at the workers (and at signals)
