"""Tier sessions (`nox -s ready|merge|nightly|weekly`): run one CI tier here, as Buildkite would.

The steps come only from the target repo's tier YAMLs (xpu: the XPU runner's
command table), so a local run cannot drift from CI; `session` is the entry point.
"""
