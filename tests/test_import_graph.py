"""`ci/`'s import graph, read from the source, has no cycle and follows the README's layers.

Every `import ci…` / `from ci… import …` counts, also one inside a function:
an import moved into a function to dodge a cycle still makes the two modules
depend on each other, it only hides it. A cycle is reported as the modules in
it, so the fix (move the shared piece down into a neutral module) is easy to
find. And those imports sit at module top, outside `ci/tasks/` and LOCAL_IMPORTS.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ci.pipeline.depgraph import strongly_connected
from tests.conftest import ROOT

PACKAGE = ROOT / "ci"

# Imports of ci modules sit at module top, where the graph is plain to read; these
# (importer, imported) stay inside functions, each for its reason. ci/tasks/ is
# exempt as a whole: task modules load the library lazily, for a fast `--list`.
LOCAL_IMPORTS: dict[tuple[str, str], str] = {
    ("ci.amd.bootstrap", "ci.webclient"): "urllib.request is heavy; most builds give labels",
    ("ci.cli", "ci.door"): "every command loads cli; only the nox tier sessions need the door",
    ("ci.cli", "ci.tasks"): "the definitions load after the stdio guard is in place",
    ("ci.door", "ci.proctree"): "proctree imports psutil; every task loads the door",
    ("ci.grammar", "ci.images.variants"): "every command loads grammar; images pulls in much of ci",
    ("ci.grammar", "ci.pipeline.scope"): "every command loads grammar; scope pulls in the renderer",
    ("ci.grammar", "ci.plan.inputs"): "every command loads grammar; plan pulls in the bootstraps",
    ("ci.grammar", "ci.release.publish"): "every command loads grammar; publish pulls in images",
    ("ci.inv", "ci.cli"): "`inv --version` prints what `vllm-omni-ci --version` does",
    ("ci.inv", "ci.tasks"): "the definitions load when the collection is built",
    ("ci.pipeline.scope", "ci.topology"): "only --scope auto reads the tier table",
    ("ci.pipeline.upload", "ci.diff"): "an unfiltered upload (--all, --e2e) reads no diff",
    ("ci.pipeline.upload", "ci.skipci"): "only a bootstrap-upload-steps.yml is gated by skip-ci",
    ("ci.pipeline.upload", "ci.pipeline.bootstrap_mode"): "only bootstrap-upload-steps.yml",
    ("ci.runner.leaks", "ci.proctree"): "proctree imports psutil, which leaks keeps lazy",
    (
        "ci.taskdef",
        "ci.door",
    ): "every definition loads taskdef; the door is needed once a task runs",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def ci_targets(name: str, path: Path, known: dict[str, Path], tree: ast.AST) -> set[str]:
    """The ci modules the imports under `tree` name: `from ci.a import b` is ci.a.b when that
    is a module."""

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            if target == "ci" or target.startswith("ci."):
                hit = owner(target)
                if hit is not None and hit != name:
                    found.add(hit)
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    return ci_targets(name, path, known, ast.parse(path.read_text(encoding="utf-8")))


def function_imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The ci modules `name` imports inside a function (`if TYPE_CHECKING:` blocks aside)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found |= ci_targets(name, path, known, node)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (the pipeline's finder)."""
    return strongly_connected({node: sorted(targets) for node, targets in graph.items()})


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_ci_has_no_import_cycle() -> None:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert len(graph) > 50, "the walk found ci's modules"
    assert graph["ci.cli"], "the walk found imports"
    assert cycles(graph) == []


def test_ci_imports_ci_modules_at_module_top() -> None:
    known = modules()
    library = {n: p for n, p in known.items() if n != "ci.tasks" and not n.startswith("ci.tasks.")}
    local = {(n, t) for n, p in library.items() for t in function_imports(n, p, known)}
    assert ("ci.door", "ci.proctree") in local, "the walk found the function-level imports"
    assert sorted(local - LOCAL_IMPORTS.keys()) == [], "hoist these to module top"
    assert sorted(LOCAL_IMPORTS.keys() - local) == [], "stale LOCAL_IMPORTS entries"


# --------------------------------------------------------------------------- the layers


def layer_table() -> list[tuple[str, list[str]]]:
    """The README's layer table, top first: (layer, the `ci/` paths its modules column
    names). A path ending in `/` is a package with everything in it; paths outside
    `ci/` (tasks.py, noxfile.py) are left out."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Architecture: the layers of `ci/`", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
            continue
        paths = [p for p in re.findall(r"`([^`]+)`", cells[1]) if p not in OUTSIDE_CI]
        rows.append((cells[0], paths))
    return rows


OUTSIDE_CI = {"tasks.py", "noxfile.py"}


def layers(table: list[tuple[str, list[str]]]) -> dict[str, int | None]:
    """Each module of `ci/` -> the index of the row whose most specific path holds it
    (None: no row)."""
    found: dict[str, int | None] = {}
    for module, file in modules().items():
        rel = file.relative_to(PACKAGE).as_posix()
        best: tuple[int, int] | None = None  # (path length, row)
        for index, (_, paths) in enumerate(table):
            for path in paths:
                holds = rel == path or (path.endswith("/") and rel.startswith(path))
                if holds and (best is None or len(path) > best[0]):
                    best = (len(path), index)
        found[module] = None if best is None else best[1]
    return found


def test_every_module_of_ci_has_a_row_in_the_layer_table() -> None:
    table = layer_table()
    layer = layers(table)
    assert [name for name, _ in table][:2] == ["vocabulary", "outside world"]
    unplaced = [m for m, row in layer.items() if m != "ci" and row is None]
    # A folder's row holds its modules, unless a more specific row names one.
    assert layer["ci.amd.combine"] == layer["ci.amd"]
    assert layer["ci.amd.suites"] != layer["ci.amd"]
    assert unplaced == [], "add these to README's layer table"


def test_a_module_imports_only_its_own_layer_and_the_layers_above() -> None:
    """The README's order, enforced: a lower layer may use a higher one, never the
    reverse (every import counts, also one inside a function)."""
    table, known = layer_table(), modules()
    layer = layers(table)
    upward = []
    for name, path in known.items():
        mine = layer[name]
        for target in sorted(imports(name, path, known)):
            theirs = layer[target]
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{name} ({table[mine][0]}) imports {target} ({table[theirs][0]})")
    assert upward == []


# ci/tasks/__init__.py is the task namespace: it loads every task module to list them.
NAMESPACE_PACKAGES = {"ci.tasks"}


def test_a_package_init_loads_nothing_of_its_own_package() -> None:
    """`import ci.images.variants` runs ci/images/__init__.py first: were it to import its
    siblings, every user of one small module would pay for the whole package."""
    known = modules()
    packages = [n for n, p in known.items() if p.name == "__init__.py"]
    assert "ci.images" in packages and "ci.plan" in packages
    heavy = {
        name: sorted(t for t in imports(name, known[name], known) if t.startswith(f"{name}."))
        for name in packages
        if name not in NAMESPACE_PACKAGES
    }
    assert {name: found for name, found in heavy.items() if found} == {}
