"""`run-tests`: which runner a platform's jobs use.

rocm and npu run natively (the rendered bash program, as a CI pod does);
xpu runs its command table inside the CI image (`docker run`). CUDA jobs are
plain Buildkite commands and have no runner.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ci.errors import UserError
from ci.platforms import Platform, platform_option
from ci.runner.native import run_tests as run_native
from ci.runner.xpu import run_tests as run_xpu


def run_tests(
    platform: str,
    positional: Sequence[str],
    *,
    timeout: str = "",
    prune: bool = False,
    dry_run: bool = False,
) -> None:
    if not platform:
        raise UserError("--platform is required: rocm (alias amd), npu or xpu (alias intel)")
    chosen = platform_option(platform)
    if (timeout or prune) and chosen is not Platform.XPU:
        raise UserError(f"--timeout and --prune are for --platform xpu, not {chosen}")
    if chosen in (Platform.ROCM, Platform.NPU):
        run_native(chosen, positional, dry_run=dry_run)
    elif chosen is Platform.XPU:
        run_xpu(
            os.environ, timeout=timeout, prune=prune, positional=tuple(positional), dry_run=dry_run
        )
    else:
        allowed = "rocm (alias amd), npu, xpu (alias intel)"
        raise UserError(
            f"--platform: run-tests does not support {chosen}: allowed values are {allowed}"
        )
