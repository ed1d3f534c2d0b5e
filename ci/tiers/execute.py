"""Run a tier's jobs one after another and record what happened to each.

Each job's output goes through the tee (`ci.runner.teelog`) to its log (and stderr
when streaming); its exit status alone decides its outcome, a log not written in
full is a warning. Its container is removed whatever happened (the timeout ends
only the client). Without `--keep-going` a failing blocking job stops the run.
"""

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ci import door
from ci.tiers.plan import Job, Options


class JobOutcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    SOFT = "soft failure"
    SKIPPED = "skipped"  # not runnable here (needs hardware, dropped by the upload)
    NOT_RUN = "not run"  # stopped after a blocking failure
    RUNNING = "running"
    PENDING = "pending"


@dataclass(frozen=True)
class JobResult:
    job: Job
    outcome: JobOutcome
    code: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    note: str = ""
    log_problem: str = ""  # why the job's log is not complete ("" = it is)


def outcome_of(job: Job, code: int) -> JobOutcome:
    if code == 0:
        return JobOutcome.PASSED
    return JobOutcome.SOFT if job.step.soft_fail.covers(code) else JobOutcome.FAILED


def run_job(job: Job, options: Options) -> JobResult:
    """Run the job, again as its `retry.automatic` rules allow; its container is removed."""
    assert job.command is not None and job.log is not None
    stream = options.stream
    with contextlib.suppress(OSError):  # the log writer says what it could not write
        job.log.parent.mkdir(parents=True, exist_ok=True)
    if stream:
        where = f"container {job.image}" if job.container else "natively"
        with door.buildkite_group(f"{job.title} — {where}"):
            door.note(f"log: {job.log}")
    started = time.monotonic()
    used = [0] * len(job.step.retries)  # attempts taken per retry rule
    while True:
        if job.status is not None:
            with contextlib.suppress(OSError):
                job.status.unlink(missing_ok=True)  # an earlier attempt's word is not this one's
        try:
            result = door.run(job.command, output="stderr" if stream else "null", quiet=True)
        finally:
            if job.container:  # the timeout ends only the client
                remove = door.Command((options.docker, "rm", "-f", job.container))
                door.run(remove, output="null", quiet=True)
        rules = enumerate(job.step.retries)
        rule = next((i for i, r in rules if r.matches(result.code) and used[i] < r.limit), None)
        if rule is None:
            break
        used[rule] += 1
        door.note(f"{job.title}: exit {result.code}; retry.automatic, attempt {sum(used) + 1}")
    seconds = time.monotonic() - started
    note = f"retried {sum(used)}x" if any(used) else ""
    problem = log_problem(job, result.timed_out)
    if problem and stream:
        door.note(f"warning: {job.title}: {problem}")
    return JobResult(
        job, outcome_of(job, result.code), result.code, seconds, result.timed_out, note, problem
    )


def log_problem(job: Job, timed_out: bool = False) -> str:
    """What the job's log writer reported ("" when the log was written in full).

    The step's exit status decides pass or fail; this is only ever a warning.
    A writer ended by a timeout may leave no word, and that is not a problem.
    """
    if job.status is None:
        return ""
    try:
        said = job.status.read_text(encoding="utf-8").strip()
    except OSError:
        said = ""
    if said.startswith("error: "):
        return "log not written in full: " + said.removeprefix("error: ")
    if said == "ok" or timed_out:
        return ""
    return f"log may be incomplete: its writer left no status in {job.status}"


def run_jobs(
    jobs: Sequence[Job],
    options: Options,
    progress: Callable[[Sequence[JobResult]], None] | None = None,
) -> list[JobResult]:
    """Run every runnable job in order; the results keep the jobs' order."""
    results = initial_results(jobs)
    stopped = ""
    for i, job in enumerate(jobs):
        if not job.runs:
            continue
        why_not = stopped or unmet_dependency(job, results)
        if why_not:
            results[i] = JobResult(job, JobOutcome.NOT_RUN, note=why_not)
            continue
        results[i] = JobResult(job, JobOutcome.RUNNING)
        if progress:
            progress(results)
        results[i] = run_job(job, options)
        if results[i].outcome is JobOutcome.FAILED and not options.keep_going:
            stopped = f"not run: {job.name} failed (use --keep-going to run the rest)"
        if progress:
            progress(results)
    return results


def initial_results(jobs: Sequence[Job]) -> list[JobResult]:
    """Before the run: a job that runs here is pending, any other skipped with its reason."""
    return [
        JobResult(j, JobOutcome.PENDING if j.runs else JobOutcome.SKIPPED, note=j.reason)
        for j in jobs
    ]


def unmet_dependency(job: Job, results: Sequence[JobResult]) -> str:
    """Why `job` must wait for good ("" when every `depends_on` inside the tier is met).

    As on Buildkite: met when every job of that step (or group) passed or
    soft-failed, or failed with `allow_failure`. Keys the tier does not define
    (`amd-build`, `upload-*-pipeline`) are build steps the local image stands
    for. A dependency that did not run here, or comes later in the file, is unmet.
    """
    for dependency in job.step.depends_on:
        keys = ((r, (r.job.step.key, *r.job.step.group_keys)) for r in results)
        for member in (r for r, of in keys if dependency.key in of):
            outcome = member.outcome
            met = outcome in (JobOutcome.PASSED, JobOutcome.SOFT)
            if met or (outcome is JobOutcome.FAILED and dependency.allow_failure):
                continue
            why = {
                JobOutcome.FAILED: "failed",
                JobOutcome.SKIPPED: f"did not run here: {member.note}",
                JobOutcome.NOT_RUN: "did not run",
            }.get(outcome, "has not run yet (it comes later in the file)")
            return f"not run: depends on {dependency.key} ({member.job.name} {why})"
    return ""
