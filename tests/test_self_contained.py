"""`ci/` reads on its own: no pointer into a spec a maintainer lacks, one meaning per class name.

A comment that says "spec §3.2" tells a maintainer of this repo nothing: the
behaviour specs of the replaced scripts are not part of it. The rule it points
at is stated in words instead. And a class name defined in two modules makes
every reader (and every `grep`) ask which one is meant.
"""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.conftest import ROOT

PACKAGE = ROOT / "ci"


def sources() -> dict[str, str]:
    return {
        p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_reference_into_the_spec() -> None:
    found = [
        f"{rel}:{number}: {line.strip()}"
        for rel, text in sources().items()
        for number, line in enumerate(text.splitlines(), 1)
        if "§" in line
    ]
    assert not found, "state the rule instead of pointing at the spec:\n" + "\n".join(found)


def test_every_class_name_is_defined_once() -> None:
    where: defaultdict[str, list[str]] = defaultdict(list)
    for rel, text in sources().items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{rel}:{node.lineno}")
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert not twice, f"one name, several classes: {twice}"
