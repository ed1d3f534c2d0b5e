"""`plan`: what CI will run for a change, on every platform, with no side effects.

One diff (`ci.diff`), one skip-ci decision (`ci.skipci`), then each platform's
own bootstrap and upload code says what it would upload (`ci.plan.platforms`).
The range goes to the diff resolver as a PR build (`--worktree` adds uncommitted
work); pipelines are read at the head of that range (`ci.plan.snapshot`). A
platform whose render fails keeps its error and the others are still planned;
bad input stops everything first (exit 2). It never uploads, calls
`buildkite-agent` or uses the network (PR labels come from `--labels`). The JSON
form is documented in `ci/data/plan.schema.json`.

The computation is `make.py` (`run`, `make_plan`); this file imports nothing, so
that a module needing one piece (the inputs, the model) loads only that piece.
"""
