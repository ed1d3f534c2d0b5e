"""`migrate`: the migration guide's done rows applied to a vLLM-Omni checkout.

`rewrites` is the table of old job commands and their replacements, `spans`
edits YAML text in place (only the spans that change), `edits` builds every
file change, `apply` shows them as a diff or writes them.
"""
