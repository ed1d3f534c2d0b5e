"""A deterministic toy model: enough arithmetic for tests to assert on."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass


def detect_accelerator() -> str | None:
    """The accelerator platform visible here (rocm, cuda, npu, xpu), or None on CPU."""
    forced = os.environ.get("OMNI_SAMPLE_ACCELERATOR", "").strip()
    if forced:
        return None if forced == "cpu" else forced
    if os.path.exists("/dev/kfd") and shutil.which("rocminfo"):
        return "rocm"
    if os.path.exists("/dev/nvidia0"):
        return "cuda"
    if os.path.exists("/dev/davinci0"):
        return "npu"
    if os.path.isdir("/dev/dri") and shutil.which("xpu-smi"):
        return "xpu"
    return None


@dataclass(frozen=True)
class OmniModel:
    """Maps text to a fixed-size embedding and back to a one-word caption."""

    dim: int = 8

    def embed(self, text: str) -> list[float]:
        buckets = [0.0] * self.dim
        for index, char in enumerate(text.encode()):
            buckets[index % self.dim] += char / 255.0
        norm = sum(v * v for v in buckets) ** 0.5 or 1.0
        return [v / norm for v in buckets]

    def caption(self, text: str) -> str:
        vector = self.embed(text)
        return "loud" if max(vector) > 0.6 else "calm"
