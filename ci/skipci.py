"""skip-ci: may this build skip its L2/L3 tests, given what it changed?

* docs and/or pytest skip marks only: skip everything (`skip-all`);
* only whitelisted CI level YAML (maybe plus docs/skip marks): "yaml-gated",
  run just the platforms and levels whose YAML changed (`skip-l23` elsewhere);
* anything else, no changed file, or an unknown diff: run normally.

`decide` is pure; `decision_for` and `decision` add the shared diff resolver, a
per-process cache and the once-only `[skip-ci]:` line, so every caller agrees.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from ci import door, topology
from ci.diff import Diff, is_test_py, resolve_diff
from ci.diff import clear_cache as clear_diffs
from ci.errors import Stop, UserError, close_match
from ci.platforms import Platform, parse_platform
from ci.target import git, resolve_repo

# The platforms in the one order every message and the matrix use.
PLATFORMS: Final = tuple(topology.SKIP_CI_NAMES.values())
LEVELS: Final = ("l2", "l3")
# Every (platform, level) skip-ci can gate, in that order.
PAIRS: Final = tuple((p, lvl) for p in PLATFORMS for lvl in LEVELS)
LOG_PREFIX: Final = "[skip-ci]: "

# Test YAML -> (skip-ci platform, level): a change to one gates that platform's level.
_YAML: Final = {r.file: (topology.SKIP_CI_NAMES[r.platform], r.level) for r in topology.TABLE}

MSG_UNKNOWN: Final = "could not resolve changed files; run normal CI"
MSG_NORMAL: Final = "product or non-whitelisted changes present; run normal CI"
MSG_EMPTY: Final = "no changed files in the diff; run normal CI"
MSG_SKIP_ALL: Final = "CI skipped — docs or pytest skip-mark changes only"
SKIP_ANNOTATION: Final = f":memo: {MSG_SKIP_ALL}"
MSG_YAML_ONLY: Final = "only CI config YAML changed"
MSG_YAML_MIXED: Final = "CI config YAML + docs/skip-mark changed — follow CI YAML gating"

Word = Literal["skip-all", "skip-l23"]


def spec_platform(value: str | Platform) -> str:
    """The skip-ci name (cuda, amd, intel, npu) of any platform spelling; an unknown
    one is a `UserError` (the original silently skipped CI on a typo)."""
    return topology.SKIP_CI_NAMES[parse_platform(value)]


@dataclass(frozen=True)
class Buckets:
    """The changed paths, each in exactly one bucket (the first rule that matches wins)."""

    docs: tuple[str, ...] = ()
    skip_tests: tuple[str, ...] = ()
    other: tuple[str, ...] = ()
    l2: tuple[str, ...] = ()
    l3: tuple[str, ...] = ()
    l45: tuple[str, ...] = ()


def classify(paths: Iterable[str], changes: Diff | None = None) -> tuple[Buckets, tuple[str, ...]]:
    """Bucket every path; also return the skip-mark check's log lines."""
    found: dict[str, list[str]] = {name: [] for name in vars(Buckets())}
    notes: list[str] = []
    for path in filter(None, (raw.strip() for raw in paths)):
        if path.startswith("docs/") or path.endswith(".md") or path == "mkdocs.yml":
            bucket = "docs"
        elif is_test_py(path):
            ok = changes is not None and skip_mark_only(path, changes, notes)
            bucket = "skip_tests" if ok else "other"
        else:
            bucket = _YAML[path][1] if path in _YAML else "other"
        found[bucket].append(path)
    return Buckets(**{k: tuple(v) for k, v in found.items()}), tuple(notes)


_SKIP_MARK = re.compile(r"pytest\.mark\.skip|pytest\.mark\.skipif|pytest\.skip\(")
_ANY_MARK = re.compile(r"pytest\.mark\.\w+")


def patch_is_skip_mark_only(patch: str) -> bool:
    """Line scan of a test file's diff: only skip marks (and neutral lines) change, one is added.
    The original's quirks kept: a `+++`/`---` content line is taken for a header,
    a skip mark anywhere on a line qualifies it, `skipif` counts, only `()` balance."""
    pending = changed = 0
    added_skip = False
    for line in patch.splitlines():
        if line.startswith("@@"):
            pending = 0
            continue
        if line.startswith(("+++", "---")) or not line.startswith(("+", "-")):
            continue
        changed += 1
        body = line[1:]
        text = body.strip()
        if pending > 0:
            pending = max(0, pending + body.count("(") - body.count(")"))
            continue
        if not text or text.startswith("#"):
            continue
        if _SKIP_MARK.search(text):
            added_skip = added_skip or line.startswith("+")
            pending = max(0, body.count("(") - body.count(")"))
            continue
        if text in ("[", "]") or text.startswith("pytestmark") or _ANY_MARK.search(text):
            continue
        return False
    return changed > 0 and added_skip


def module_is_skipped(source: str) -> bool:
    """A module-level `pytestmark` that skips the file (how a new test file qualifies):
    a list holding `pytest.mark.skip`, or `pytest.mark.skip…` itself (so `skipif` too,
    as in the original). A file that does not parse does not qualify."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            continue
        segment = ast.get_source_segment(source, node.value) or ""
        if segment.startswith("pytest.mark.skip") or (
            isinstance(node.value, ast.List) and "pytest.mark.skip" in segment
        ):
            return True
    return False


def skip_mark_only(path: str, changes: Diff, log: list[str]) -> bool:
    """Is this test file's change only pytest skip marks (or, if new, is it skipped whole)?"""
    patch = changes.patch(path)
    if not patch or not patch.strip():
        log.append(
            f"skip-mark-only: {'git diff failed' if patch is None else 'empty diff'} for {path}"
        )
        return False
    only_marks = patch_is_skip_mark_only(patch)
    if only_marks or not ("new file mode" in patch or "--- /dev/null" in patch):
        return only_marks
    text = changes.new_text(path)
    if text is not None and module_is_skipped(text):
        return True
    log.append(f"skip-mark-only: new test file without module-level pytest.mark.skip: {path}")
    return False


@dataclass(frozen=True)
class Decision:
    """What CI should run for a diff, and why (`message`, logged as `[skip-ci]: …`);
    `runs`: the (skip-ci platform, level) pairs that stay on in yaml-gated mode."""

    skip_all: bool
    yaml_gated: bool
    message: str
    runs: frozenset[tuple[str, str]] = frozenset()
    buckets: Buckets = Buckets()
    notes: tuple[str, ...] = ()

    @property
    def normal(self) -> bool:
        return not self.skip_all and not self.yaml_gated

    def is_run(self, platform: str | Platform, level: str) -> bool:
        """Should `platform`'s `level` run? Levels beyond l2/l3 only stop under skip-all."""
        name = spec_platform(platform)
        gated = self.yaml_gated and level in LEVELS
        return not self.skip_all and (not gated or (name, level) in self.runs)

    def as_dict(self) -> dict[str, object]:
        """Plain data for JSON output (`plan --format json`): `run` lists the
        `platform/level` pairs that run, in the fixed order (all when not gated)."""
        mode = "skip-all" if self.skip_all else "yaml-gated" if self.yaml_gated else "normal"
        return {
            "mode": mode,
            "message": self.message,
            "run": [] if self.skip_all else _ordered(self.runs if self.yaml_gated else PAIRS),
            "buckets": {k: list(v) for k, v in vars(self.buckets).items() if v},
        }

    def gate(self, platform: str | Platform, level: str) -> Word | None:
        """The CLI's word: `skip-all`, `skip-l23`, or None (run)."""
        if self.is_run(platform, level):  # which also refuses an unknown platform
            return None
        return "skip-all" if self.skip_all else "skip-l23"


def _ordered(pairs: Collection[tuple[str, str]]) -> list[str]:
    """`platform/level` of each pair, in the order of `PAIRS`."""
    return [f"{p}/{lvl}" for p, lvl in PAIRS if (p, lvl) in pairs]


def decide(paths: Sequence[str] | None, changes: Diff | None = None) -> Decision:
    """The skip-ci decision for changed paths (None: unknown, normal CI). Pure; without
    `changes` (no diff range) a test edit cannot be skip-mark-only."""
    if paths is None:
        return Decision(False, False, MSG_UNKNOWN)
    buckets, notes = classify(paths, changes)
    if not any(vars(buckets).values()):
        # Nothing changed: the original's decision (normal CI), said as it is.
        return Decision(False, False, MSG_EMPTY, buckets=buckets, notes=notes)
    if buckets.other:
        return Decision(False, False, MSG_NORMAL, buckets=buckets, notes=notes)
    yamls = (("L2", buckets.l2), ("L3", buckets.l3), ("L4/L5", buckets.l45))
    if not any(files for _, files in yamls):
        return Decision(True, False, MSG_SKIP_ALL, buckets=buckets, notes=notes)
    # Exactly the platform/levels whose L2 or L3 YAML changed stay on (the original's three
    # override rules, L4/L5 then L2 then L3, come to this; an L4/L5 change alone runs none).
    runs = frozenset(_YAML[path] for path in (*buckets.l2, *buckets.l3))
    off = frozenset(PAIRS) - runs
    head = MSG_YAML_MIXED if (buckets.docs or buckets.skip_tests) else MSG_YAML_ONLY
    sep = "; " if head == MSG_YAML_MIXED else " — "
    changed = "; ".join(f"{n}=[{', '.join(sorted(set(f)))}]" for n, f in yamls if f)
    run, skip = (", ".join(_ordered(pairs)) or "none" for pairs in (runs, off))
    message = f"{head}{sep}changed: {changed}; run: {run}; skip: {skip}"
    return Decision(False, True, message, runs, buckets, notes)


_LOGGED: set[Diff] = set()


def _log(message: str) -> None:
    door.note(LOG_PREFIX + message)


@functools.cache
def _decided(diff: Diff) -> Decision:
    """The decision for `diff`, computed once per process (its per-file notes logged then)."""
    made = decide(diff.paths, diff if diff.range is not None else None)
    if made.notes:  # one write: a large diff has a note per file
        door.note("\n".join(LOG_PREFIX + note for note in made.notes))
    return made


def decision_for(diff: Diff, *, verdict: str = "") -> Decision:
    """The decision for a resolved diff, logged once per process as `[skip-ci]: <message>`
    (the CLI's `verdict`, `cuda/l2: run`, appended in parentheses)."""
    made = _decided(diff)
    if diff not in _LOGGED:
        _LOGGED.add(diff)
        _log(f"{made.message} ({verdict})" if verdict else made.message)
    return made


def decision(
    repo: str | os.PathLike[str], *, env: Mapping[str, str] | None = None, fetch: bool = True
) -> Decision:
    """Resolve the build's own diff (`ci.diff`; `fetch=False` under `--dry-run`) and decide;
    an explicit range is `decision_for`."""
    return decision_for(resolve_diff(repo, env=env, fetch=fetch))


def clear_cache() -> None:
    """Forget cached decisions and diffs (tests)."""
    _decided.cache_clear()
    _LOGGED.clear()
    clear_diffs()


def level_problem(level: str) -> str:
    """The `error:` line for a level that is not `l2`/`l3`. The script's argparse refused
    `L2` too, and so do we (the bootstraps write it lower case), but with a guess."""
    guess = close_match(level.lower(), LEVELS)
    hint = f"; did you mean {guess!r}?" if guess else ""
    return f"--level: unknown level {level!r}{hint}: allowed values are {', '.join(LEVELS)}"


def run_gate(platform: str, level: str, repo: str | None = None) -> None:
    """`skip-ci`: print the word and stop with 0, or stop with 1 to run."""
    problems = [] if platform else ["--platform is required: rocm (amd), cuda, npu or xpu (intel)"]
    try:
        name = spec_platform(platform) if platform else ""
    except UserError as exc:
        problems += [f"--platform: {p}" for p in exc.problems]
    if level not in LEVELS:
        problems.append(level_problem(level) if level else "--level is required: l2 or l3")
    UserError.collect(problems)
    target = resolve_repo(repo or None)
    if not git(target, "rev-parse", "--is-inside-work-tree").ok:
        # Without history every build would "run": a wrong --repo is an input error.
        raise UserError(f"--repo: {target} is not a git checkout")
    diff = resolve_diff(target)
    word = _decided(diff).gate(platform, level)
    decision_for(diff, verdict=f"{name}/{level}: {word or 'run'}")
    if word is not None:
        sys.stdout.write(word + "\n")
        sys.stdout.flush()
    raise Stop(1 if word is None else 0)


def annotate_command() -> door.Command:
    """Say on the build why CI was skipped; a failure is ignored, as in the scripts."""
    return door.Command(
        ("buildkite-agent", "annotate", SKIP_ANNOTATION, "--style", "info"),
        description="say why CI was skipped",
        tolerate="",
    )
