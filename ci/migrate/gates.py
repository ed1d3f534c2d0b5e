"""`migrate`: what the `lint-pipelines` gate would refuse in the migrated checkout.

A pipeline the gate refuses fails in CI (a step naming a key the source registry
lacks fails the nightly upload), so `migrate` lints the result before anyone
pushes it, with the gate's own library (`ci.pipeline.lint`), in this process.
The gate reads `.buildkite/`'s YAML files and `pyproject.toml` (the marker
registry); a temporary folder gets a copy of them with the edits applied, so
the checkout itself is only read, with `--apply` or without.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from ci.migrate import edits
from ci.migrate.edits import FileChange
from ci.pipeline import files
from ci.pipeline.lint import lint, problem_lines
from ci.pipeline.markers import PYPROJECT

GATE: Final = "lint-pipelines"
_YAML: Final = (".yml", ".yaml")


def _linted(rel: str) -> bool:
    """A file the gate reads (what the copy holds)."""
    return rel == PYPROJECT or (rel.startswith(".buildkite/") and rel.endswith(_YAML))


def _copy(repo: Path, into: Path) -> None:
    """The files the gate reads, as it reads them: a file that cannot be copied (a
    FIFO, a loop, no permission) is a link to the original, whose reading says why."""
    kite = repo / ".buildkite"
    found = files.walk(kite, lambda n: n.endswith(_YAML)) if kite.is_dir() else []
    found += [repo / PYPROJECT] if files.exists(repo / PYPROJECT) else []
    for path in found:
        target = into / path.relative_to(repo)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(path, target)
        except OSError:
            target.unlink(missing_ok=True)
            os.symlink(path, target)


def would_fail(repo: Path, changes: Sequence[FileChange]) -> list[str]:
    """One line per problem the gate finds in `repo` with `changes` applied."""
    with tempfile.TemporaryDirectory(prefix="vllm-omni-ci-migrate-") as folder:
        copy = Path(folder)
        _copy(repo, copy)
        for change in changes:
            target = copy / change.path
            if _linted(change.path) and files.exists(target):
                target.unlink()  # never written through: a link points into the checkout
                if change.new is not None:
                    edits.write(copy, change)
        lines = problem_lines(copy, lint(copy))
    # The registries' problems name their file: the checkout's, not the copy's.
    named = {str(copy.resolve()): str(repo.resolve()), str(copy): str(repo.resolve())}
    for temporary, real in named.items():
        lines = [line.replace(temporary, real) for line in lines]
    return lines
