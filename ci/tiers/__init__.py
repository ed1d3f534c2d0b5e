"""Tier sessions (`nox -s ready|merge|nightly|weekly`): run one CI tier here, as Buildkite would.

The steps come only from the target repo's own tier YAMLs (the XPU runner's
command table for xpu), so the local run cannot drift from CI:

- `ci.tiers.model`: tier x platform → the tier's steps (`load_tier`), with the
  hardware each needs, its grade and whether it can run on a CPU;
- `ci.tiers.step`: the `Tier` and `TierStep` types (shared with `ci.tiers.xpu`);
- `ci.tiers.rules`: the CPU-runnable rule and soft-fail semantics;
- `ci.tiers.plan`: steps → jobs (one per parallelism shard), each a container
  or native command that runs the native runner's rendered program (pure);
- `ci.tiers.execute`: runs the jobs, one log file each;
- `ci.tiers.logsink`: each job's log writer (redacted; a full disk never fails a job);
- `ci.tiers.report`: the summary table, the JUnit XML and the annotation;
- `ci.tiers.terminal`: text for a terminal (whole words, no `:emoji:`, tables that fit),
  shared with the plan's table;
- `ci.tiers.session`: the nox sessions' argument parsing, the run's results folder,
  and the one entry point.
"""
