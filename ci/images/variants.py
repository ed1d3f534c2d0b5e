"""The NPU image variants, as data: one row per Ascend device family.

The old pipeline set the image-tag suffix (`VLLM_IMAGE_TAG`) and the device
suffix (the script's third argument) apart, so they could drift; they were always
equal, so a row has one `suffix` for both, and the bootstrap generates its NPU
image steps from the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from ci.errors import UserError

DOCKERFILE = "Dockerfile.npu.ci"
DEVICE_SUFFIX_ARG = "VLLM_ASCEND_DEVICE_SUFFIX"
DEFAULT_VARIANT = "a2"

# Every variant builds on the same queue, against the shared remote buildkitd.
BUILD_AGENTS: tuple[tuple[str, str], ...] = (
    ("queue", "ascend-a2b3"),
    ("resource_class", "npu-1"),
)
# The script's defaults, which every NPU build step also set as env in the old YAML.
IMAGE_NAME = "vllm-omni-ci-npu"
IMAGE_REGISTRY = "swr.cn-southwest-2.myhuaweicloud.com/modelfoundry"
BUILDKITD_ADDR = "tcp://buildkitd-service.buildkitd:1234"
STEP_ENV: tuple[tuple[str, str], ...] = (
    ("IMAGE_NAME", IMAGE_NAME),
    ("IMAGE_REGISTRY", IMAGE_REGISTRY),
    ("BUILDKITD_ADDR", BUILDKITD_ADDR),
)


@dataclass(frozen=True)
class NpuVariant:
    """One NPU CI image: what it is built from and what it is called."""

    name: str  # the --variant value
    label: str  # how step labels name it
    suffix: str  # appended to the commit in the image tag; the VLLM_ASCEND_DEVICE_SUFFIX build arg
    presets: tuple[str, ...]  # hardware presets whose image is this variant's
    dockerfile: str = DOCKERFILE

    @property
    def step_key(self) -> str:
        return f"image-build-{self.name}"

    @property
    def step_label(self) -> str:
        return f":buildkit: Build and Push NPU Test Image - {self.label}"

    def image_tag(self, commit: str) -> str:
        return f"{commit}{self.suffix}"

    def build_args(self) -> tuple[tuple[str, str], ...]:
        return ((DEVICE_SUFFIX_ARG, self.suffix),) if self.suffix else ()  # a2: not passed

    def build_command(self) -> str:
        """The job command of this variant's image step."""
        return f"vllm-omni-ci build-image --platform npu --variant {self.name}"


VARIANTS: tuple[NpuVariant, ...] = (
    NpuVariant("a2", "A2", "", ("a2b3_npu_1", "a2b3_npu_4", "a2b3_npu_8")),
    NpuVariant("a3", "A3", "-a3", ("a3_npu_2", "a3_npu_4", "a3_npu_8", "a3_npu_16")),
    NpuVariant("a5", "A5", "-a5", ("a5_npu_2", "a5_npu_4", "a5_npu_8", "a5_npu_16")),
    NpuVariant("310p", "310P", "-310p", ("310p_npu_1", "310p_npu_2", "310p_npu_4")),
)

ALLOWED = ", ".join(v.name for v in VARIANTS)


def variant(name: str) -> NpuVariant:
    """The row for `--variant NAME` (empty means the default, a2)."""
    key = (name or DEFAULT_VARIANT).strip().lower()
    row = next((row for row in VARIANTS if row.name == key), None)
    if row is None:
        raise UserError(f"--variant: unknown NPU variant {name!r}: allowed values are {ALLOWED}")
    return row
