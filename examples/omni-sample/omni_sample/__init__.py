"""omni_sample: a toy "omni" model whose tests exercise every CI tier and platform."""

from omni_sample.model import OmniModel, detect_accelerator

__all__ = ["OmniModel", "detect_accelerator"]
__version__ = "0.0.1"
