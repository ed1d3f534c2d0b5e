"""Invoke entry point: `inv --list`. The tasks live in `ci.tasks`, shared with `vllm-omni-ci`."""

from ci.tasks import ns

__all__ = ["ns"]
