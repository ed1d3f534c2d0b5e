"""Run a tier's jobs, up to `--jobs` at a time, and record what happened to each.

Each job's output goes, masked, to its log (and stderr when streaming) through the
door (`door.run(log=…)`); its exit status alone decides its outcome, a log not
written in full is a warning. A job ends when its command does: what the command
left running (`sleep 300 &`, a server) is ended then, and listed in its log, as
the `step` runner does, never waited for. Its container is removed whatever
happened (the timeout ends only the client).

The order: a job starts, in file order as slots allow, once every job of the steps
it `depends_on` inside the tier has ended; a GPU job (one planned on devices) also
waits until as many free devices of its platform fit it (`ci.tiers.plan.placement`; a
forced job too, on the devices it was planned on), is planned again on them, and gives
them back when it ends. Without `--keep-going` a failing
blocking job stops new jobs from starting; jobs already running finish, so that every
result shown is a real one. A signal (it reaches only the main thread) is passed on to
the running jobs: each one's process tree is ended and its container removed, then the
run ends with 128+N.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import signal
import threading
import time
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass

from ci import door
from ci.platforms import Platform
from ci.redact import Redactor
from ci.runner import leaks
from ci.tiers.plan import JUNIT_COUNTER, Job, Options, plan_job


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
    started: float = 0.0  # time.monotonic() when it started (for a running job's elapsed time)


def outcome_of(job: Job, code: int) -> JobOutcome:
    if code == 0:
        return JobOutcome.PASSED
    return JobOutcome.SOFT if job.step.soft_fail.covers(code) else JobOutcome.FAILED


def run_job(job: Job, options: Options, cancel: list[int] | None = None) -> JobResult:
    """Run the job, again as its `retry.automatic` rules allow; its container is removed.
    A signal number appended to `cancel` ends it (`door.Interrupted`), as a signal would."""
    assert job.command is not None and job.log is not None
    stream = options.stream
    with contextlib.suppress(OSError):  # the door says what it could not write
        job.log.parent.mkdir(parents=True, exist_ok=True)
        if job.junit is not None:
            job.junit.mkdir(exist_ok=True)
            (job.junit / "count.sh").write_text(JUNIT_COUNTER, encoding="utf-8")
    started = time.monotonic()
    used = [0] * len(job.step.retries)  # attempts taken per retry rule
    leftover = 0  # processes its attempts left running
    while True:
        ended = False  # the client exited by itself, and its container with it
        left: list[leaks.Proc] = []  # what the command left running, ended as it exited
        try:
            output: door.Output = "stderr" if stream else "null"
            result = door.run(
                job.command, output, quiet=True, cancel=cancel, log=str(job.log),
                leftovers=leaks.recording(left),
            )  # fmt: skip
            ended = not result.timed_out
        finally:
            if job.container:
                remove_container(options.docker, job.container, ended)
        list_leftovers(job, left, stream)
        leftover += len(left)
        rules = enumerate(job.step.retries)
        rule = next((i for i, r in rules if r.matches(result.code) and used[i] < r.limit), None)
        if rule is None:
            break
        used[rule] += 1
        if stream:
            door.note(f"{job.title}: exit {result.code}; retry.automatic, attempt {sum(used) + 1}")
    seconds = time.monotonic() - started
    notes = [f"retried {sum(used)}x" * any(used), f"ended {leftover} left running" * bool(leftover)]
    note = "; ".join(filter(None, notes))
    problem = result.log_problem and f"log not written in full: {result.log_problem}"
    if problem and stream:
        door.note(f"warning: {job.title}: {problem}")
    return JobResult(
        job, outcome_of(job, result.code), result.code, seconds, result.timed_out, note, problem
    )


def remove_container(docker: str, name: str, ended: bool) -> None:
    """`docker rm -f NAME` (a timeout or a signal ends only the client). A client ended
    while the engine was creating the container can leave it to appear after a first
    removal: then it is removed again until the engine lists it no more (a few seconds)."""
    remove = door.Command((docker, "rm", "-f", name), timeout=60)
    listed = door.Command((docker, "ps", "-aq", "--filter", f"name=^{name}$"), timeout=60)
    for _ in range(1 if ended else 10):
        door.run(remove, output="null", quiet=True)
        if ended:
            return
        time.sleep(0.5)
        if not door.run(listed, output="capture", quiet=True).stdout.strip():
            return


def list_leftovers(job: Job, ended: Sequence[leaks.Proc], stream: bool) -> None:
    """`<job>: ended N process(es) the job left running:` and a line each, masked, at the
    end of its log (after its output: the door has copied all of it, its writers gone),
    and on stderr when streaming."""
    lines = leaks.listing(ended, job.title, "job")
    if not lines:
        return
    redact = Redactor.for_env(job.env)
    text = redact("".join(f"{line}\n" for line in lines))
    if stream:
        door.note(text.rstrip("\n"), redact=redact)
    assert job.log is not None
    with contextlib.suppress(OSError), open(job.log, "a", encoding="utf-8") as fh:
        fh.write(text)  # a log that cannot be written says so already (`log_problem`)


def on_free_devices(job: Job, options: Options, busy: Set[tuple[Platform, int]]) -> Job | None:
    """The GPU job planned again against only the devices no running job holds (None: too
    few of them fit it, so it waits): natively their visibility variable, in a container
    their docker arguments. It gets as many as it was planned on, never fewer: a forced
    job on every device of its platform waits until all of them are free. A job without
    devices is as planned."""
    if not job.devices:
        return job
    free = tuple(d for d in options.inventory.devices if (d.platform, d.index) not in busy)
    inventory = dataclasses.replace(options.inventory, devices=free)
    placed = plan_job(
        job.step, job.position, job.shard, dataclasses.replace(options, inventory=inventory)
    )
    return placed if len(placed.devices) == len(job.devices) else None


def run_jobs(
    jobs: Sequence[Job],
    options: Options,
    progress: Callable[[Sequence[JobResult], int], None] | None = None,
) -> list[JobResult]:
    """Run every runnable job (the order and limits above), planned with `options`; the
    results keep the jobs' order. `progress(results, i)` follows each change of job i's
    state, one call at a time."""
    results = initial_results(jobs)
    changed = threading.Condition()
    busy: set[tuple[Platform, int]] = set()  # (platform, index) of the devices jobs hold
    waiting = [i for i, job in enumerate(jobs) if job.runs]
    running: dict[int, tuple[threading.Thread, list[int]]] = {}
    stopped = ""

    def tell(i: int, result: JobResult) -> None:
        results[i] = result
        if progress:
            progress(list(results), i)

    def work(i: int, job: Job, cancel: list[int]) -> None:
        nonlocal stopped
        try:
            result = run_job(job, options, cancel)
        except Exception as exc:  # door.Interrupted: a signal passed on; its tree is ended
            result = JobResult(job, JobOutcome.FAILED, getattr(exc, "code", 1), note=str(exc))
        with changed:
            busy.difference_update((job.step.platform, index) for index in job.devices)
            del running[i]
            if result.outcome is JobOutcome.FAILED and not options.keep_going and not stopped:
                stopped = f"not run: {job.name} failed (use --keep-going to run the rest)"
            tell(i, dataclasses.replace(result, started=results[i].started))
            changed.notify()

    def start(i: int, job: Job) -> None:
        busy.update((job.step.platform, index) for index in job.devices)
        tell(i, JobResult(job, JobOutcome.RUNNING, started=time.monotonic()))
        cancel: list[int] = []
        running[i] = (threading.Thread(target=work, args=(i, job, cancel)), cancel)
        running[i][0].start()

    try:
        with changed:
            while waiting or running:
                # Nothing runs and every waiting job waits for another: a depends_on cycle.
                stuck = not running and all(waits_for(jobs[i], results) for i in waiting)
                for i in list(waiting):
                    job = jobs[i]
                    if not (stopped or stuck) and waits_for(job, results):
                        continue
                    why_not = stopped or unmet_dependency(job, results)
                    if not why_not and len(running) >= max(options.jobs, 1):
                        break
                    placed = None if why_not else on_free_devices(job, options, busy)
                    if placed is not None or why_not:
                        waiting.remove(i)
                    if why_not:
                        tell(i, JobResult(job, JobOutcome.NOT_RUN, note=why_not))
                    elif placed is not None:
                        start(i, placed)
                if running:
                    changed.wait()
    except BaseException as exc:
        # A signal reaches only this thread: the running jobs end as on it, then the run.
        number = exc.code - 128 if isinstance(exc, door.Interrupted) else signal.SIGINT
        with changed:
            ended = list(running.values())
            for _thread, cancel in ended:
                cancel.append(number)
        for thread, _cancel in ended:
            thread.join()
        raise
    return results


def members(key: str, results: Sequence[JobResult]) -> list[JobResult]:
    """The results of the jobs of the step or group `key`."""
    return [r for r in results if key in (r.job.step.key, *r.job.step.group_keys)]


def waits_for(job: Job, results: Sequence[JobResult]) -> bool:
    """Whether a job of a step `job` depends on (inside the tier) has yet to end."""
    return any(
        member.outcome in (JobOutcome.PENDING, JobOutcome.RUNNING)
        for dependency in job.step.depends_on
        for member in members(dependency.key, results)
    )


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
    for. A dependency that did not run here is unmet.
    """
    for dependency in job.step.depends_on:
        for member in members(dependency.key, results):
            outcome = member.outcome
            met = outcome in (JobOutcome.PASSED, JobOutcome.SOFT)
            if met or (outcome is JobOutcome.FAILED and dependency.allow_failure):
                continue
            why = {
                JobOutcome.FAILED: "failed",
                JobOutcome.SKIPPED: f"did not run here: {member.note}",
                JobOutcome.NOT_RUN: "did not run",
            }.get(outcome, "waits for it, and it for this: a depends_on cycle")
            return f"not run: depends on {dependency.key} ({member.job.name} {why})"
    return ""
