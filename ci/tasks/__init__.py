"""Every task, by the name users type: one module per task, named after it.

`skip_ci.py` defines `skip-ci`; a sub-package is a namespace
(`release/publish_images.py` defines `release.publish-images`). Both front ends
(`vllm-omni-ci`, `inv`) are built from these definitions. A job loads only its own
task's module (`TASKS["step"]`), found by its file name; `--list` and `--help` load
them all. A task module only parses its arguments and makes one call into the library,
which it imports when it runs: heavy imports (docker, rich, yaml, jsonschema) stay
inside those calls.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Iterator, Mapping
from dataclasses import replace
from functools import cache

from ci.taskdef import TaskDef


@cache
def _modules() -> dict[str, str]:
    """Task name -> module name, from the files here: nothing is imported."""
    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.ispkg:
            found[info.name.replace("_", "-")] = f"{__name__}.{info.name}"
            continue
        for inner in pkgutil.iter_modules([os.path.join(__path__[0], info.name)]):
            name = f"{info.name}.{inner.name.replace('_', '-')}"
            found[name] = f"{__name__}.{info.name}.{inner.name}"
    return dict(sorted(found.items()))


@cache
def _load(name: str) -> TaskDef:
    """The one task its module defines, named by the module's place."""
    module = vars(importlib.import_module(_modules()[name]))
    (definition,) = (
        value
        for value in module.values()
        if isinstance(value, TaskDef) and value.function.__module__ == module["__name__"]
    )
    return replace(definition, name=name)


class Tasks(Mapping[str, TaskDef]):
    """Every task by name, each module imported when its task is first looked up."""

    def __getitem__(self, name: str) -> TaskDef:
        if name not in _modules():
            raise KeyError(name)
        return _load(name)

    def __contains__(self, name: object) -> bool:
        return name in _modules()

    def __iter__(self) -> Iterator[str]:
        return iter(_modules())

    def __len__(self) -> int:
        return len(_modules())


TASKS: Mapping[str, TaskDef] = Tasks()


def definitions() -> dict[str, TaskDef]:
    """Every task, loaded, sorted by name (the order `--list` shows)."""
    return {name: TASKS[name] for name in TASKS}
