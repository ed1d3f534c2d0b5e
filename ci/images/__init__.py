"""Image builds: keyed.py (ROCm and CUDA), npu.py, xpu.py.

`build()` only dispatches; each module turns `BuildOptions` into a plan (pure)
and runs it through the door, under `--timeout`'s one deadline (`deadline.py`).
ROCm and CUDA ask their registry first (`registry.py`).
"""

from __future__ import annotations

from ci.images import deadline, keyed, npu, xpu
from ci.images.options import BuildOptions
from ci.platforms import Platform

BUILDS = {Platform.ROCM: keyed.build, Platform.CUDA: keyed.build, Platform.NPU: npu.build}


def build(options: BuildOptions) -> None:
    deadline.start(options.timeout)  # a bad --timeout stops here, before anything runs
    BUILDS.get(options.platform, xpu.build)(options)
