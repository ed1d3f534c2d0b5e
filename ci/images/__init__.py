"""Image builds, one module per platform: rocm.py, cuda.py, npu.py, xpu.py.

`build()` only dispatches; each platform module turns `BuildOptions` into a
plan (pure) and runs it through the door, under `--timeout`'s one deadline
(`deadline.py`). ROCm and CUDA ask their registry first (`registry.py`).
"""

from __future__ import annotations

import importlib

from ci.images import deadline
from ci.images.options import BuildOptions


def build(options: BuildOptions) -> None:
    deadline.start(options.timeout)  # a bad --timeout stops here, before anything runs
    module = importlib.import_module(f"ci.images.{options.platform.value}")
    module.build(options)
