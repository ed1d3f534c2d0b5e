"""`check-marks`: every test file carries a CI level and a hardware marker.

Replaces vLLM-Omni's `check-mark` hook (`tools/pre_commit/check_test_marks.py`),
with its rules and category names: a level (`Level`) and a platform marker or
`hardware_test(`/`hardware_marks(` call (`Hardware`) per test file; no direct
`pytest.mark.<SKU>` outside `tests/helpers/mark.py` (`Direct SKU`: the helpers
also attach `cards_<n>`); literal helper arguments name registered platforms,
SKUs and card counts, and `hardware_marks` is no decorator and mixes no counts
(`Invalid hardware helper`); no test inherits both `cpu` and a GPU mark. The
scan is static (`ast`): importing the tests would import torch.
Exit 0 clean, 1 on any problem, 2 on bad input (no tests/, no registry).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ci.errors import BAD_INPUT, FAILURE, Stop, UserError
from ci.gates.changed import changed_files, check_choice, named_files
from ci.pipeline.files import Unreadable, read_text, realpath, walk
from ci.pipeline.markers import MarkerRegistry, load_markers
from ci.target import resolve_repo

HELPERS = ("hardware_test", "hardware_marks")
HELPER_MODULE = "tests/helpers/mark.py"
SKIP_HINT = "To skip: SKIP=check-mark git commit ..."

LEVEL = "Level"
HARDWARE = "Hardware"
DIRECT_SKU = "Direct SKU"
INVALID_HELPER = "Invalid hardware helper"
CONFLICT = "Conflicting CPU/GPU marks"
SYNTAX = "Syntax"
UNREADABLE = "Unreadable"


@dataclass(frozen=True)
class Problem:
    kind: str
    detail: str


@dataclass(frozen=True)
class MarksReport:
    path: str  # relative to the repo, with forward slashes
    problems: tuple[Problem, ...]


def is_test_file(rel: str) -> bool:
    """pytest's `python_files = test_*.py, *_test.py`, under tests/."""
    name = rel.rsplit("/", 1)[-1]
    return rel.startswith("tests/") and (
        (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py")
    )


@dataclass
class _Names:
    """How this file spells `pytest`, `pytest.mark` and the helpers."""

    pytest: set[str] = field(default_factory=lambda: {"pytest"})
    mark: set[str] = field(default_factory=set)
    helpers: dict[str, str] = field(default_factory=dict)  # local name -> helper

    @classmethod
    def of(cls, tree: ast.Module) -> _Names:
        names = cls()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "pytest":
                        names.pytest.add(alias.asname or "pytest")
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if node.module == "pytest" and alias.name == "mark":
                        names.mark.add(alias.asname or "mark")
                    elif alias.name in HELPERS:
                        names.helpers[alias.asname or alias.name] = alias.name
        return names

    def mark_name(self, node: ast.AST) -> str | None:
        """`X` for `pytest.mark.X` (or `mark.X`), else None."""
        if not isinstance(node, ast.Attribute):
            return None
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in self.mark:
            return node.attr
        if (
            isinstance(owner, ast.Attribute)
            and owner.attr == "mark"
            and isinstance(owner.value, ast.Name)
            and owner.value.id in self.pytest
        ):
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


def _literal_keys(node: ast.AST | None) -> Iterator[tuple[ast.expr, str, ast.expr]]:
    """(key node, key, value) of each string-literal key of a `{...}` literal."""
    if isinstance(node, ast.Dict):
        for key_node, value in zip(node.keys, node.values, strict=True):
            if key_node is not None and (key := _literal_str(key_node)) is not None:
                yield key_node, key, value


def _literal_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _literal_int(node: ast.AST) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


class _Scanner:
    def __init__(self, tree: ast.Module, rel: str, registry: MarkerRegistry) -> None:
        self.tree = tree
        self.rel = rel
        self.registry = registry
        self.names = _Names.of(tree)
        self.assigned = self._module_assignments()
        self.problems: list[Problem] = []

    def _module_assignments(self) -> dict[str, list[ast.expr]]:
        """Module-level `NAME = ...` / `NAME += ...`, so `pytestmark = MARKS` resolves."""
        found: defaultdict[str, list[ast.expr]] = defaultdict(list)
        for name, value in _assignments(self.tree.body):
            found[name].append(value)
        return found

    def add(self, kind: str, detail: str, node: ast.AST | None = None) -> None:
        where = f"line {getattr(node, 'lineno', '?')}: " if node is not None else ""
        self.problems.append(Problem(kind, where + detail))

    def marks_of(self, node: ast.AST | None, depth: int = 0) -> set[str]:
        """The markers an expression applies (best effort on literals and module names)."""
        if node is None or depth > 8:
            return set()
        if (name := self.names.mark_name(node)) is not None:
            return {name}
        if isinstance(node, ast.Call):
            if (called := self.names.mark_name(node.func)) is not None:
                return {called}
            return self._helper_marks(node) if self.names.helper(node) else set()
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return set().union(*(self.marks_of(e, depth + 1) for e in node.elts))
        if isinstance(node, ast.Starred):
            return self.marks_of(node.value, depth + 1)
        if isinstance(node, ast.BinOp):
            return self.marks_of(node.left, depth + 1) | self.marks_of(node.right, depth + 1)
        if isinstance(node, ast.Name):
            values = self.assigned.get(node.id, [])
            return set().union(*(self.marks_of(v, depth + 1) for v in values))
        return set()

    def _helper_marks(self, call: ast.Call) -> set[str]:
        res = _argument(call, "res", 0)
        if not isinstance(res, ast.Dict):
            return set()
        platforms = {k for k in (_literal_str(key) for key in res.keys if key) if k}
        gpu = {"gpu"} if platforms & self.registry.gpu_platforms else set()
        return platforms | gpu

    def scan(self) -> list[Problem]:
        every_mark = self._direct_marks()
        helper_calls = [
            n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and self.names.helper(n)
        ]
        for call in helper_calls:
            self._check_helper(call)
        self._check_decorators()
        if is_test_file(self.rel):
            if not every_mark & self.registry.levels:
                levels = ", ".join(sorted(self.registry.levels))
                self.add(LEVEL, f"no CI level marker; mark the tests with one of: {levels}")
            if not every_mark & self.registry.platforms and not helper_calls:
                platforms = ", ".join(sorted(self.registry.platforms))
                self.add(
                    HARDWARE,
                    f"no hardware platform marker ({platforms}) and no "
                    "hardware_test(...) / hardware_marks(...) call",
                )
            self._check_conflicts(self.tree.body, set())
        return self.problems

    def _direct_marks(self) -> set[str]:
        found: set[str] = set()
        for node in ast.walk(self.tree):
            if (name := self.names.mark_name(node)) is None:
                continue
            found.add(name)
            platform = self.registry.sku_platforms.get(name)
            if platform and self.rel != HELPER_MODULE:
                self.add(
                    DIRECT_SKU,
                    f"pytest.mark.{name}; apply SKUs through "
                    f'hardware_test(res={{"{platform}": "{name}"}}) or hardware_marks(...), '
                    "which also attach cards_<n>",
                    node,
                )
        return found

    def _check_decorators(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for decorator in node.decorator_list:
                    if self.names.helper(decorator) == "hardware_marks":
                        self.add(
                            INVALID_HELPER,
                            "hardware_marks(...) is not a decorator; use @hardware_test(...), "
                            "or pass hardware_marks(...) to pytest.param(..., marks=...)",
                            decorator,
                        )

    def _check_helper(self, call: ast.Call) -> None:
        helper = self.names.helper(call)
        registry = self.registry
        res = _argument(call, "res", 0)
        keys: list[str] = []
        if res is None and not call.keywords and not call.args:
            self.add(INVALID_HELPER, f"{helper}(...) needs res={{platform: SKU}}", call)
        for key_node, key, value in _literal_keys(res):
            keys.append(key)
            if key in registry.res_keys:
                self._check_skus(str(helper), key, value)
            else:
                allowed = ", ".join(sorted(registry.res_keys))
                self.add(
                    INVALID_HELPER,
                    f"{helper} res key {key!r} is not a hardware platform with SKUs "
                    f"(allowed: {allowed})",
                    key_node,
                )
        cards = _argument(call, "num_cards", 1)
        if cards is None:
            return
        counts: dict[str, int] = {}
        for key_node, key, value in _literal_keys(cards):
            if (count := _literal_int(value)) is not None:
                counts[key] = count
                if keys and key not in keys:
                    message = f"{helper} num_cards key {key!r} is not in res"
                    self.add(INVALID_HELPER, message, key_node)
        if (count := _literal_int(cards)) is not None:
            counts[""] = count
        registered = ", ".join(str(n) for n in sorted(registry.card_counts))
        for count in sorted(set(counts.values())):
            if count not in registry.card_counts:
                self.add(
                    INVALID_HELPER,
                    f"{helper} num_cards={count} has no registered cards_{count} marker "
                    f"(registered: {registered})",
                    cards,
                )
        if helper == "hardware_marks" and len(set(counts.values())) > 1:
            mixed = ", ".join(f"{k}: {v}" for k, v in counts.items())
            self.add(
                INVALID_HELPER,
                f"hardware_marks cannot mix card counts ({mixed}); use @hardware_test, "
                "which splits one variant per platform",
                cards,
            )

    def _check_skus(self, helper: str, platform: str, value: ast.expr) -> None:
        registered = self.registry.skus_for(platform)
        if isinstance(value, (ast.List, ast.Tuple)):
            if platform != "cuda":
                self.add(
                    INVALID_HELPER,
                    f"{helper} res[{platform!r}]: only cuda accepts a list of SKUs; "
                    "give one SKU string",
                    value,
                )
                return
            items = list(value.elts)
        else:
            items = [value]
        for item in items:
            sku = _literal_str(item)
            if sku is not None and sku not in registered:
                self.add(
                    INVALID_HELPER,
                    f"{helper} res[{platform!r}]: {sku!r} is not a registered {platform} SKU "
                    f"(allowed: {', '.join(registered)})",
                    item,
                )

    def _pytestmark(self, body: Sequence[ast.stmt]) -> set[str]:
        return set().union(*(self.marks_of(v) for n, v in _assignments(body) if n == "pytestmark"))

    def _check_conflicts(self, body: Sequence[ast.stmt], inherited: set[str]) -> None:
        """Each test function with the marks of its module and classes (`pytestmark` too)."""
        inherited = inherited | self._pytestmark(body)
        for node in body:
            if isinstance(node, ast.ClassDef):
                marks = set().union(inherited, *map(self.marks_of, node.decorator_list))
                self._check_conflicts(node.body, marks)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
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
                variants += self._param_marks(decorator)
        if self._conflict(marks):
            self.add(CONFLICT, f"{node.name} has {self._describe(marks)}", node)
            return
        for where, extra in variants:
            if self._conflict(marks | extra):
                self.add(CONFLICT, f"{node.name} has {self._describe(marks | extra)}", where)

    def _param_marks(self, parametrize: ast.Call) -> list[tuple[ast.AST, set[str]]]:
        """Each `pytest.param(..., marks=X)` of a parametrize adds X to its variant."""
        return [
            (node, self.marks_of(keyword.value))
            for node in ast.walk(parametrize)
            if isinstance(node, ast.Call)
            and self.names.mark_name(node.func) is None
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "param"
            for keyword in node.keywords
            if keyword.arg == "marks"
        ]

    def _conflict(self, marks: set[str]) -> bool:
        return "cpu" in marks and bool(marks & self.registry.gpu_marks())

    def _describe(self, marks: set[str]) -> str:
        gpu = ", ".join(sorted(marks & self.registry.gpu_marks()))
        return f"both cpu and GPU marks ({gpu})"


def scan_source(source: str, rel: str, registry: MarkerRegistry) -> list[Problem]:
    """The problems of one file; pure, so tests feed it strings."""
    try:
        tree = ast.parse(source, filename=rel)
    except SyntaxError as exc:
        return [Problem(SYNTAX, f"line {exc.lineno}: cannot parse: {exc.msg}")]
    return _Scanner(tree, rel, registry).scan()


def select_files(repo: Path, given: Sequence[str]) -> list[Path]:
    """`given` (pre-commit passes changed files), else every .py under tests/."""
    if given:

        def test_module(name: str, path: Path) -> bool | str:
            if not path.is_relative_to(repo):
                return f"{name}: not inside --repo {repo}"
            rel = path.relative_to(repo).as_posix()
            return rel.startswith("tests/") and rel.endswith(".py")

        return named_files(repo, given, test_module)
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
    except UserError as exc:  # the uploader's code is 1; for this gate it is bad input
        raise UserError(*exc.problems, code=BAD_INPUT) from None
    tags = {"[ci-level]": found.levels, "[hardware-platform]": found.platforms}
    tags["[hardware-resource]"] = frozenset(found.sku_platforms)
    missing = [tag for tag, present in tags.items() if not present]
    if missing:
        raise UserError(
            f"no pytest markers tagged {', '.join(missing)} in {realpath(repo / 'pyproject.toml')} "
            "([tool.pytest.ini_options].markers); check-marks reads the registry from these tags"
        )
    return found


def scan_files(repo: Path, files: Iterable[Path], registry: MarkerRegistry) -> list[MarksReport]:
    """One report per file; a file the gate cannot read is a problem (`Unreadable`), never OK."""

    def report(rel: str, path: Path) -> MarksReport:
        try:
            return MarksReport(rel, tuple(scan_source(read_text(path, rel), rel, registry)))
        except Unreadable as exc:
            return MarksReport(rel, (Problem(UNREADABLE, exc.why),))

    return [report(path.relative_to(repo).as_posix(), path) for path in files]


def render(reports: Sequence[MarksReport]) -> str:
    """The problems, grouped per file, in the hook's category names."""
    lines: list[str] = []
    for report in reports:
        if report.problems:
            lines.append(f"{report.path}:")
            lines += [f"  {p.kind}: {p.detail}" for p in report.problems]
    return "\n".join(lines) + ("\n" if lines else "")


def check_marks(
    repo_arg: str, files: Sequence[str] = (), *, from_ref: str = "", to_ref: str = ""
) -> None:
    """Scan the target's tests (`files`, a range's, or all); problems on stdout, exit 1 on any."""
    repo = resolve_repo(repo_arg)
    check_choice(files, from_ref, to_ref, "files")
    if from_ref:
        chosen = changed_files(
            repo, from_ref, to_ref, lambda p: p.startswith("tests/") and p.endswith(".py")
        )
        if not chosen:
            sys.stderr.write(f"check-marks: no changed .py file under tests/ since {from_ref}\n")
            return
    else:
        chosen = select_files(repo, files)
    registry = load_registry(repo)
    reports = scan_files(repo, chosen, registry)
    tests = sum(1 for r in reports if is_test_file(r.path))
    bad = [r for r in reports if r.problems]
    if not bad:
        sys.stderr.write(f"check-marks: {tests} test files, {len(reports)} files scanned: OK\n")
        return
    sys.stdout.write(render(bad))
    sys.stdout.flush()
    count = sum(len(r.problems) for r in bad)
    raise Stop(
        FAILURE,
        f"check-marks: {count} problem(s) in {len(bad)} of {len(reports)} files "
        f"({tests} test files)",
        SKIP_HINT,
    )
