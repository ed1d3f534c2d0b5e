"""`build-image`'s one entry: start `--timeout`'s deadline, then the platform's build."""

from __future__ import annotations

from ci.images import deadline, keyed, npu, xpu
from ci.images.options import BuildOptions
from ci.platforms import Platform

BUILDS = {Platform.ROCM: keyed.build, Platform.CUDA: keyed.build, Platform.NPU: npu.build}


def build(options: BuildOptions) -> None:
    deadline.start(options.timeout)  # a bad --timeout stops here, before anything runs
    BUILDS.get(options.platform, xpu.build)(options)
