"""`vllm-omni-ci migrate`: apply the switch to a vLLM-Omni checkout, and prove it."""
