"""Invoke entry point: `inv --list`. The tasks live in `ci.tasks`, shared with `vllm-omni-ci`."""

from ci.cli import adopt_inv
from ci.tasks import ns

__all__ = ["ns"]

adopt_inv()  # `inv` runs as `vllm-omni-ci` does: same usage errors and exit codes
