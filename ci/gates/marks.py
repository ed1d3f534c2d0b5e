"""`check-marks`: every test file carries a CI level and a hardware marker.

Replaces vLLM-Omni's `check-mark` hook (`tools/pre_commit/check_test_marks.py`), with
its rules and category names. The scan is static (`ast`): importing the tests would
import torch. Exit 0 clean, 1 on any problem, 2 on bad input (no tests/, no registry).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from ci.errors import FAILURE, Failure, Stop, UserError
from ci.gates.changed import chosen_files
from ci.pipeline.files import Unreadable, read_text, realpath, walk
from ci.pipeline.markers import MarkerRegistry, load_markers
from ci.target import resolve_repo

HELPERS = ("hardware_test", "hardware_marks")
HELPER_MODULE = "tests/helpers/mark.py"  # where the helpers apply SKU marks themselves
INVALID_HELPER = "Invalid hardware helper"
CONFLICT = "Conflicting CPU/GPU marks"
T = TypeVar("T", str, int)


@dataclass(frozen=True)
class Problem:
    kind: str  # the hook's category: Level, Hardware, Direct SKU, Invalid hardware helper, ...
    detail: str


def is_test_file(rel: str) -> bool:
    """pytest's `python_files = test_*.py, *_test.py`, under tests/."""
    name = rel.rsplit("/", 1)[-1]
    return rel.startswith("tests/") and (
        (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py")
    )


def _dotted(node: ast.expr) -> str | None:
    """`a` or `a.b` for a name or an attribute of one, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else None


class _Names:
    """How this file spells `pytest.mark` and the helpers."""

    def __init__(self, tree: ast.Module) -> None:
        self.mark = {"pytest.mark"}  # and `pt.mark` after `import pytest as pt`, or `mark`
        self.helpers: dict[str, str] = {}  # local name -> helper
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                self.mark |= {
                    f"{a.asname or a.name}.mark" for a in node.names if a.name == "pytest"
                }
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if node.module == "pytest" and alias.name == "mark":
                        self.mark.add(alias.asname or "mark")
                    elif alias.name in HELPERS:
                        self.helpers[alias.asname or alias.name] = alias.name

    def mark_name(self, node: ast.AST) -> str | None:
        """`X` for `pytest.mark.X` (or `mark.X`), else None."""
        if isinstance(node, ast.Attribute) and _dotted(node.value) in self.mark:
            return node.attr
        return None

    def helper(self, node: ast.AST) -> str | None:
        """`hardware_test` / `hardware_marks` when `node` calls one, else None."""
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        if isinstance(func, ast.Name):
            return self.helpers.get(func.id, func.id if func.id in HELPERS else None)
        if isinstance(func, ast.Attribute) and func.attr in HELPERS:
            return func.attr
        return None


def _argument(call: ast.Call, name: str, position: int) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args):
        return call.args[position]
    return None


def _assignments(body: Sequence[ast.stmt]) -> Iterator[tuple[str, ast.expr]]:
    """(NAME, value) of each `NAME = v`, `NAME += v` and `NAME: T = v` of one body."""
    for node in body:
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value:
            value = node.value
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield from ((t.id, value) for t in targets if isinstance(t, ast.Name))


def _literal(node: ast.AST | None, kind: type[T]) -> T | None:
    """The value of a `str` or `int` literal (never a bool), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is kind:
        value: T = node.value
        return value
    return None


def _literal_keys(node: ast.AST | None) -> Iterator[tuple[ast.expr, str, ast.expr]]:
    """(key node, key, value) of each string-literal key of a `{...}` literal."""
    if isinstance(node, ast.Dict):
        for key_node, value in zip(node.keys, node.values, strict=True):
            if key_node is not None and (key := _literal(key_node, str)) is not None:
                yield key_node, key, value


class _Scanner:
    def __init__(self, tree: ast.Module, rel: str, registry: MarkerRegistry) -> None:
        self.tree = tree
        self.rel = rel
        self.registry = registry
        self.names = _Names(tree)
        self.problems: list[Problem] = []
        # Module-level `NAME = ...` / `NAME += ...`, so `pytestmark = MARKS` resolves.
        self.assigned: dict[str, list[ast.expr]] = {}
        for name, value in _assignments(tree.body):
            self.assigned.setdefault(name, []).append(value)

    def add(self, kind: str, detail: str, node: ast.AST | None = None) -> None:
        where = f"line {getattr(node, 'lineno', '?')}: " if node is not None else ""
        self.problems.append(Problem(kind, where + detail))

    def marks_of(self, node: ast.AST | None, depth: int = 0) -> set[str]:
        """The markers an expression applies (best effort on literals and module names)."""
        if node is None or depth > 8:
            return set()
        if name := self.names.mark_name(node.func if isinstance(node, ast.Call) else node):
            return {name}
        if isinstance(node, ast.Call):  # a helper applies its platforms, and gpu for a GPU one
            if not self.names.helper(node):
                return set()
            platforms = {key for _, key, _ in _literal_keys(_argument(node, "res", 0))}
            return platforms | ({"gpu"} if platforms & self.registry.gpu_platforms else set())
        parts: Sequence[ast.AST] = ()
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            parts = node.elts
        elif isinstance(node, ast.Starred):
            parts = [node.value]
        elif isinstance(node, ast.BinOp):
            parts = [node.left, node.right]
        elif isinstance(node, ast.Name):
            parts = self.assigned.get(node.id, [])
        return set().union(*(self.marks_of(part, depth + 1) for part in parts))

    def scan(self) -> list[Problem]:
        registry, walked = self.registry, list(ast.walk(self.tree))
        every_mark: set[str] = set()
        for node in walked:
            if (name := self.names.mark_name(node)) is None:
                continue
            every_mark.add(name)
            if (platform := registry.sku_platforms.get(name)) and self.rel != HELPER_MODULE:
                via = f'hardware_test(res={{"{platform}": "{name}"}}) or hardware_marks(...)'
                why = f"apply SKUs through {via}, which also attach cards_<n>"
                self.add("Direct SKU", f"pytest.mark.{name}; {why}", node)
        calls = [n for n in walked if isinstance(n, ast.Call) and self.names.helper(n)]
        for call in calls:
            self._check_helper(call)
        for decorator in (d for n in walked for d in getattr(n, "decorator_list", ())):
            if self.names.helper(decorator) == "hardware_marks":
                self.add(
                    INVALID_HELPER,
                    "hardware_marks(...) is not a decorator; use @hardware_test(...), "
                    "or pass hardware_marks(...) to pytest.param(..., marks=...)",
                    decorator,
                )
        if not is_test_file(self.rel):
            return self.problems
        if not every_mark & registry.levels:
            levels = ", ".join(sorted(registry.levels))
            self.add("Level", f"no CI level marker; mark the tests with one of: {levels}")
        if not every_mark & registry.platforms and not calls:
            platforms = ", ".join(sorted(registry.platforms))
            helpers = "hardware_test(...) / hardware_marks(...) call"
            self.add("Hardware", f"no hardware platform marker ({platforms}) and no {helpers}")
        self._check_conflicts(self.tree.body, set())
        return self.problems

    def _check_helper(self, call: ast.Call) -> None:
        helper, registry = self.names.helper(call), self.registry
        bad = partial(self.add, INVALID_HELPER)
        res = _argument(call, "res", 0)
        if res is None and not call.keywords and not call.args:
            bad(f"{helper}(...) needs res={{platform: SKU}}", call)
        keys: list[str] = []
        for key_node, key, value in _literal_keys(res):
            keys.append(key)
            if key not in registry.res_keys:
                allowed = ", ".join(sorted(registry.res_keys))
                why = f"is not a hardware platform with SKUs (allowed: {allowed})"
                bad(f"{helper} res key {key!r} {why}", key_node)
            elif isinstance(value, ast.List | ast.Tuple) and key != "cuda":
                why = "only cuda accepts a list of SKUs; give one SKU string"
                bad(f"{helper} res[{key!r}]: {why}", value)
            else:
                registered = registry.skus_for(key)
                for item in value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]:
                    if (sku := _literal(item, str)) is not None and sku not in registered:
                        allowed = ", ".join(registered)
                        why = f"{sku!r} is not a registered {key} SKU (allowed: {allowed})"
                        bad(f"{helper} res[{key!r}]: {why}", item)
        cards = _argument(call, "num_cards", 1)
        counts: dict[str, int] = {}
        for key_node, key, value in _literal_keys(cards):
            if (count := _literal(value, int)) is not None:
                counts[key] = count
                if keys and key not in keys:
                    bad(f"{helper} num_cards key {key!r} is not in res", key_node)
        if (count := _literal(cards, int)) is not None:
            counts[""] = count
        known = ", ".join(str(n) for n in sorted(registry.card_counts))
        for count in sorted(set(counts.values()) - set(registry.card_counts)):
            why = f"has no registered cards_{count} marker (registered: {known})"
            bad(f"{helper} num_cards={count} {why}", cards)
        if helper == "hardware_marks" and len(set(counts.values())) > 1:
            mixed = ", ".join(f"{k}: {v}" for k, v in counts.items())
            why = "use @hardware_test, which splits one variant per platform"
            bad(f"hardware_marks cannot mix card counts ({mixed}); {why}", cards)

    def _check_conflicts(self, body: Sequence[ast.stmt], inherited: set[str]) -> None:
        """Each test function with the marks of its module and classes (`pytestmark` too)."""
        marked = (self.marks_of(v) for n, v in _assignments(body) if n == "pytestmark")
        inherited = inherited.union(*marked)
        for node in body:
            if isinstance(node, ast.ClassDef):
                marks = set().union(inherited, *map(self.marks_of, node.decorator_list))
                self._check_conflicts(node.body, marks)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.startswith("test"):
                    self._check_test(node, inherited)

    def _check_test(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, inherited: set[str]
    ) -> None:
        marks = set(inherited)
        variants: list[tuple[ast.AST, set[str]]] = []
        for decorator in node.decorator_list:
            marks |= self.marks_of(decorator) - {"parametrize"}
            if isinstance(decorator, ast.Call) and self.names.mark_name(decorator.func):
                # Each `pytest.param(..., marks=X)` of a parametrize adds X to its variant.
                variants += [
                    (param, self.marks_of(keyword.value))
                    for param in ast.walk(decorator)
                    if isinstance(param, ast.Call)
                    and isinstance(param.func, ast.Attribute)
                    and param.func.attr == "param"
                    and self.names.mark_name(param.func) is None
                    for keyword in param.keywords
                    if keyword.arg == "marks"
                ]
        # A test that conflicts as a whole is told once, else each variant that does.
        for where, extra in [(node, set())] if self._conflict(marks) else variants:
            if conflict := self._conflict(marks | extra):
                self.add(CONFLICT, f"{node.name} has {conflict}", where)

    def _conflict(self, marks: set[str]) -> str | None:
        """What is wrong when `marks` mix cpu with GPU marks, else None."""
        gpu = marks & self.registry.gpu_marks()
        return (
            f"both cpu and GPU marks ({', '.join(sorted(gpu))})" if "cpu" in marks and gpu else None
        )


def scan_source(source: str, rel: str, registry: MarkerRegistry) -> list[Problem]:
    """The problems of one file; pure, so tests feed it strings."""
    try:
        tree = ast.parse(source, filename=rel)
    except SyntaxError as exc:
        return [Problem("Syntax", f"line {exc.lineno}: cannot parse: {exc.msg}")]
    return _Scanner(tree, rel, registry).scan()


def _under_tests(rel: str) -> bool:
    return rel.startswith("tests/") and rel.endswith(".py")


def select_files(repo: Path, given: Sequence[str], from_ref: str, to_ref: str) -> list[Path]:
    """`given` (pre-commit passes changed files), else those the range changed, else every .py
    under tests/."""

    def test_module(name: str, path: Path) -> bool | str:
        if not path.is_relative_to(repo):
            return f"{name}: not inside --repo {repo}"
        return _under_tests(path.relative_to(repo).as_posix())

    chosen = chosen_files(
        repo, given, from_ref, to_ref, what="files", keep=test_module, changed=_under_tests
    )
    if chosen is not None:
        return chosen
    tests = repo / "tests"
    if not tests.is_dir():
        raise UserError(f"--repo: {repo} has no tests/ directory")
    return walk(
        tests,
        lambda name: name.endswith(".py"),
        enter=lambda name: not name.startswith(".") and name != "__pycache__",
    )


def load_registry(repo: Path) -> MarkerRegistry:
    """The registry of `<repo>/pyproject.toml`; missing, or lacking a tag the gate reads: exit 2."""
    try:
        found = load_markers(repo)
    except Failure as exc:  # the uploader's code is 1; for this gate it is bad input
        raise UserError(*exc.problems) from None
    tags = {"[ci-level]": found.levels, "[hardware-platform]": found.platforms}
    tags["[hardware-resource]"] = frozenset(found.sku_platforms)
    missing = [tag for tag, present in tags.items() if not present]
    if missing:
        raise UserError(
            f"no pytest markers tagged {', '.join(missing)} in {realpath(repo / 'pyproject.toml')} "
            "([tool.pytest.ini_options].markers); check-marks reads the registry from these tags"
        )
    return found


def _scan_file(repo: Path, path: Path, registry: MarkerRegistry) -> tuple[str, list[Problem]]:
    """A file the gate cannot read is a problem (`Unreadable`), never OK."""
    rel = path.relative_to(repo).as_posix()
    try:
        return rel, scan_source(read_text(path, rel), rel, registry)
    except Unreadable as exc:
        return rel, [Problem("Unreadable", exc.why)]


def check_marks(
    repo_arg: str, files: Sequence[str] = (), *, from_ref: str = "", to_ref: str = ""
) -> None:
    """Scan the target's tests (`files`, a range's, or all); problems on stdout, grouped per
    file in the hook's category names; exit 1 on any."""
    repo = resolve_repo(repo_arg)
    chosen = select_files(repo, files, from_ref, to_ref)
    if from_ref and not chosen:
        sys.stderr.write(f"check-marks: no changed .py file under tests/ since {from_ref}\n")
        return
    registry = load_registry(repo)
    reports = [_scan_file(repo, path, registry) for path in chosen]
    tests = sum(is_test_file(rel) for rel, _ in reports)
    bad = [(rel, found) for rel, found in reports if found]
    if not bad:
        sys.stderr.write(f"check-marks: {tests} test files, {len(reports)} files scanned: OK\n")
        return
    for rel, found in bad:
        sys.stdout.write(f"{rel}:\n" + "".join(f"  {p.kind}: {p.detail}\n" for p in found))
    sys.stdout.flush()
    count = sum(len(found) for _, found in bad)
    raise Stop(
        FAILURE,
        f"check-marks: {count} problem(s) in {len(bad)} of {len(reports)} files "
        f"({tests} test files)",
        "To skip: SKIP=check-mark git commit ...",
    )
