"""`vllm-omni-ci migrate`: apply the switch to a vLLM-Omni checkout, and prove it.

`rewrites` is the table of old job commands and their replacements, `spans`
edits YAML text in place (only the spans that change), `edits` builds every
file change, `apply` shows them as a diff or writes them; `check` runs the old
CI and the migrated one side by side.
"""
