"""`step`: one wrapped test command (timeout, shard, artifacts, leak check; ci.runner.step)."""

from __future__ import annotations

from collections.abc import Sequence

from ci.taskdef import task


@task(
    replaces=(
        "inline step idioms in the test YAMLs",
        "run-amd-test-with-diagnostics.sh",
        "rocm_ci_evidence.py",
    ),
    help={
        "timeout": "end the command after this long (e.g. 80m): TERM, then KILL; exit 124/137",
        "kill_after": "grace between TERM and KILL (default 2m)",
        "shard": "i/n (0-based i) appends --num-shards=n --shard-id=i; 'auto' reads "
        "BUILDKITE_PARALLEL_JOB / BUILDKITE_PARALLEL_JOB_COUNT, the default for a pytest "
        "command in a parallel step unless it already has --num-shards/--shard-id; "
        "'none' never shards",
        "shard_list": "a,b,c: append the shard's entry instead (index from --shard or "
        "BUILDKITE_PARALLEL_JOB)",
        "artifact_dir": "directory the command writes, inside the working directory; its text "
        "files are masked, then copied under $BUILDKITE_BUILD_CHECKOUT_PATH when the working "
        "directory differs, even on failure",
        "junit": "append --junitxml=FILE to the command",
        "summary_tail": "keep the output in ARTIFACT_DIR/pytest.log and its last N lines in "
        "ARTIFACT_DIR/pytest-summary.txt",
        "leak_check": "fail (exit 1) if the command leaves processes behind, and list them "
        "('leak check: …' lines on stderr; the original's lines in "
        "ARTIFACT_DIR/process-cleanup.txt)",
        "leak_scope": "tree (our descendants, default) or all (every visible process)",
        "leak_settle": "how long leftovers may take to exit before they count (default 5s)",
    },
)
def step(
    timeout: str = "",
    kill_after: str = "2m",
    shard: str = "",
    shard_list: str = "",
    artifact_dir: str = "",
    junit: str = "",
    summary_tail: int = 0,
    leak_check: bool = False,
    leak_scope: str = "tree",
    leak_settle: str = "5s",
    dry_run: bool = False,
    words: Sequence[str] = (),
) -> None:
    """Run `-- COMMAND...` with timeout, shard, artifacts and leak check; pass its exit code.

    Replaces the test YAMLs' inline idioms: `timeout … bash -c`, the shard
    arguments, artifact copies, `tee` + `tail` summaries and the ps/awk leak check.
    Exit: the command's status; 1 for a leak after a pass; 124 (137 if KILL was
    needed) on timeout; 2 for bad options, before anything runs. What the command
    leaves running is ended afterwards and listed on stderr.
    """
    options = {name: value for name, value in locals().items() if name not in ("dry_run", "words")}
    from ci.runner.step import StepOptions, run_step

    run_step(StepOptions(**options), words, dry_run=dry_run)
