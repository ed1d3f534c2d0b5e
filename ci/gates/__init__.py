"""Gates over a target checkout (`--repo`): checks that read vLLM-Omni's files.

They scan files statically and never import the target's code: collecting
vLLM-Omni's tests would import torch, which CPU agents and laptops lack.
"""
