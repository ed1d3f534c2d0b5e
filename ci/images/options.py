"""Everything `build-image` accepts, for every platform (each uses its own subset).

Empty strings mean "not given": each platform module applies the script's env
var and default (flag, then env, then default). An option given for a platform
that does not use it is an input error (`misplaced`), never ignored; every input
problem of a run is reported at once (`gather`), before any command runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TypeVar

from ci.errors import UserError
from ci.platforms import Platform

T = TypeVar("T")

ROCM, CUDA, NPU, XPU = Platform.ROCM, Platform.CUDA, Platform.NPU, Platform.XPU

# Option -> the platforms whose build uses it (options not listed apply to all).
APPLIES: dict[str, tuple[Platform, ...]] = {
    "docker": (ROCM, CUDA, XPU),
    "registry": (ROCM, CUDA, NPU),
    "arch": (ROCM,),
    "builder": (ROCM, CUDA),
    "buildx_builder": (ROCM, CUDA),
    "variant": (NPU,),
    "tag": (NPU,),
    "dockerfile": (NPU,),
    "tls_dir": (NPU,),
    "docker_config": (NPU,),
    "install_buildctl": (NPU,),
    "upstream_repo": (XPU,),
    "vllm_version": (XPU,),
}


@dataclass(frozen=True)
class BuildOptions:
    platform: Platform
    repo: str = ""
    commit: str = ""
    dry_run: bool = False
    push: bool = True
    docker: str = ""
    timeout: str = ""  # --timeout for the whole build ("" = none)
    # rocm / cuda
    registry: str = ""
    arch: str = ""
    builder: str = "auto"
    buildx_builder: str = ""
    # npu
    variant: str = ""
    tag: str = ""
    dockerfile: str = ""
    tls_dir: str = ""
    docker_config: str = ""
    install_buildctl: bool = False
    # xpu
    upstream_repo: str = ""
    vllm_version: str = ""

    def misplaced(self) -> list[str]:
        """One problem per option that was given but does not apply to this platform."""
        return [
            f"--{f.name.replace('_', '-')}: applies to --platform"
            f" {' or '.join(p.value for p in APPLIES[f.name])} only"
            for f in fields(self)
            if self.platform not in APPLIES.get(f.name, (self.platform,))
            and getattr(self, f.name) != f.default
        ]


def gather(problems: list[str], fn: Callable[[], T]) -> T | None:
    """Run one resolver; on a UserError keep its problems and return None."""
    try:
        return fn()
    except UserError as exc:
        problems.extend(exc.problems)
        return None
