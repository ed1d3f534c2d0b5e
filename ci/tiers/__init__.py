"""Tier sessions (`nox -s ready|merge|nightly|weekly`): run one CI tier here, as Buildkite would.

The steps come only from the target repo's tier YAMLs (xpu: the XPU runner's
command table), so a local run cannot drift from CI. `model` reads the steps
(types in `step`, rules in `rules`), `plan` turns them into jobs (pure),
`execute` runs them, `report` writes the table, JUnit and annotation,
`terminal` fits text to a terminal, and `session` is the one entry point.
"""
