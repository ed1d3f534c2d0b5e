"""The task namespace shared by `inv` (tasks.py) and `vllm-omni-ci`: every task of
the modules here (`--list` sorts them), and a module's own `collection` as a sub-namespace.

Each area has one module here; a task only parses its arguments and makes one
call into the library. Heavy imports (docker, rich, yaml, jsonschema) stay
inside those library calls, because this namespace loads in every CI job.
"""

import importlib
import pkgutil

from invoke.collection import Collection
from invoke.tasks import Task

ns = Collection()
for found in pkgutil.iter_modules(__path__):
    module = vars(importlib.import_module(f"{__name__}.{found.name}"))
    if isinstance(module.get("collection"), Collection):
        ns.add_collection(module["collection"])
        continue
    for value in module.values():
        # Only the tasks a module defines: one it imports from another is added there.
        if isinstance(value, Task) and value.body.__module__ == module["__name__"]:
            ns.add_task(value)
