"""Every task, by the name users type: the definitions of the modules here, which both
front ends (`vllm-omni-ci`, `inv`) are built from. A module's `NAMESPACE` prefixes its
tasks' names (`release.publish-images`).

Each area has one module here; a task only parses its arguments and makes one call
into the library. Heavy imports (docker, rich, yaml, jsonschema) stay inside those
calls, because these definitions load in every CI job.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import replace
from functools import cache

from ci.taskdef import TaskDef


@cache
def definitions() -> dict[str, TaskDef]:
    """name -> definition, sorted by name (the order `--list` shows)."""
    found: dict[str, TaskDef] = {}
    for module in pkgutil.iter_modules(__path__):
        loaded = vars(importlib.import_module(f"{__name__}.{module.name}"))
        prefix = loaded.get("NAMESPACE", "")
        for value in loaded.values():
            # Only the tasks a module defines: one it imports from another is added there.
            if isinstance(value, TaskDef) and value.function.__module__ == loaded["__name__"]:
                name = f"{prefix}.{value.name}" if prefix else value.name
                found[name] = replace(value, name=name)
    return dict(sorted(found.items()))
