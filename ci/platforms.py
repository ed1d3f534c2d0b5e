"""The one platform type every task accepts.

One enum with the old scripts' aliases (`amd`, `intel`), so no task keeps its
own spelling list; an unknown name is an `error:` line listing the allowed
values, never a silent default (skip_ci.py once read a typo as "skip").
"""

from __future__ import annotations

import enum

from ci.errors import UserError


class Platform(str, enum.Enum):
    ROCM = "rocm"
    CUDA = "cuda"
    NPU = "npu"
    XPU = "xpu"

    def __str__(self) -> str:
        return self.value


ALIASES: dict[str, Platform] = {"amd": Platform.ROCM, "intel": Platform.XPU}
ALLOWED = "rocm (alias amd), cuda, npu, xpu (alias intel)"


def parse_platform(value: str | Platform) -> Platform:
    if isinstance(value, Platform):
        return value
    key = value.strip().lower()
    try:
        return ALIASES.get(key) or Platform(key)
    except ValueError:
        raise UserError(f"unknown platform {value!r}: allowed values are {ALLOWED}") from None


def platform_option(value: str, option: str = "--platform") -> Platform:
    """`parse_platform` for a task option: the error line starts with the option's name."""
    try:
        return parse_platform(value)
    except UserError as exc:
        raise UserError(*(f"{option}: {p}" for p in exc.problems)) from None
