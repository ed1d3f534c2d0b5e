"""Image builds: keyed.py (ROCm and CUDA), npu.py, xpu.py.

`dispatch.build()` only dispatches; each module turns `BuildOptions` into a plan
(pure) and runs it through the door, under `--timeout`'s one deadline
(`deadline.py`). ROCm and CUDA ask their registry first (`registry.py`).
This file imports nothing: a module that needs one piece (the NPU variants, the
image refs) loads only that piece.
"""
