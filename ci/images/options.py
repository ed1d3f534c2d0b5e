"""Everything `build-image` accepts, for every platform (each uses its own subset).

Empty strings mean "not given": each platform module applies the script's env
var and default for it, so the precedence (flag, then env, then default) lives
next to the contract it implements.
"""

from __future__ import annotations

from dataclasses import dataclass

from ci.platforms import Platform


@dataclass(frozen=True)
class BuildOptions:
    platform: Platform
    repo: str = ""
    commit: str = ""
    dry_run: bool = False
    push: bool = True
    docker: str = ""
    # rocm / cuda
    registry: str = ""
    arch: str = ""
    builder: str = "auto"
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
