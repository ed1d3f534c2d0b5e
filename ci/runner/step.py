"""`step [OPTIONS] -- COMMAND...`: one tested wrapper for what test YAMLs do in inline bash.

It replaces `timeout --kill-after`, the shard idioms, artifact copies, `tee … | tail`
summaries and the `ps`/awk leak check. The argv never goes through a shell (the door
writes `--summary-tail`'s log); its exit code passes through, a leak after a pass
gives 1. Written files are masked; one not written is a warning, never the exit code.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ci.door import Command, note
from ci.durations import parse_duration
from ci.errors import Stop, UserError
from ci.redact import Redactor
from ci.runner import leaks, run_reporting
from ci.runner.artifacts import inside, mask_texts
from ci.runner.guard import run_then_end_leftovers
from ci.runner.leaks import SCOPES
from ci.target import working_directory

if TYPE_CHECKING:
    from ci.runner.leaks import Proc

SUMMARY_FILE = "pytest-summary.txt"
LOG_FILE = "pytest.log"
LEAK_FILE = "process-cleanup.txt"
# The summary's lines are held in memory: a bound, not a line count anyone needs.
MAX_SUMMARY_TAIL = 1_000_000


@dataclass(frozen=True)
class StepOptions:
    timeout: str = ""
    kill_after: str = "2m"
    shard: str = ""
    shard_list: str = ""
    artifact_dir: str = ""
    junit: str = ""
    summary_tail: int = 0
    leak_check: bool = False
    leak_scope: str = "tree"
    leak_settle: str = "5s"


@dataclass(frozen=True)
class StepPlan:
    """What `step` will do, decided before anything runs."""

    command: Command
    options: StepOptions
    dirs: tuple[tuple[str, str], ...] = ()  # (option, directory), created before the run
    artifact_dir: str | None = None
    copy_to: str | None = None  # artifact_dir is copied here afterwards
    log: str | None = None
    summary: str | None = None
    leak_settle: float = 5.0
    workdir: str = ""  # where the artifact dir must stay (the working directory)

    def artifacts_inside(self) -> bool:
        """The artifact dir still resolves inside the working directory (the command may
        have replaced it with a link elsewhere): nothing of ours is written, masked or
        copied outside it."""
        return self.artifact_dir is not None and inside(self.artifact_dir, self.workdir)

    def render(self) -> str:
        timeout, grace, options = self.command.timeout, self.command.grace, self.options
        lines = [
            "# plan: step",
            f"$ {shlex.join(self.command.argv)}",
            timeout is not None and f"# timeout: {timeout:g}s, then KILL after {grace:g}s",
            self.artifact_dir and f"# artifact dir: {self.artifact_dir}",
            self.copy_to and f"# copy artifacts to: {self.copy_to}",
            self.summary
            and f"# log: {self.log}; last {options.summary_tail} lines to {self.summary}",
            options.leak_check
            and f"# leak check: scope {options.leak_scope}, settle {self.leak_settle:g}s",
        ]
        return "".join(f"{line}\n" for line in lines if line)


def _int(text: str, what: str, problems: list[str]) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        problems.append(f"{what}: {text!r} is not an integer")
        return None


def _env_int(environ: Mapping[str, str], name: str, problems: list[str], fix: str) -> int | None:
    """The variable as an integer; unset is a problem saying `fix`, unless `fix` is empty."""
    if raw := environ.get(name, ""):
        return _int(raw, name, problems)
    if fix:
        problems.append(f"{name} is not set: {fix}")
    return None


SHARD_FLAGS = ("--num-shards", "--shard-id")


def shard_args(
    shard: str,
    shard_list: str,
    environ: Mapping[str, str],
    problems: list[str],
    argv: Sequence[str] = (),
) -> list[str]:
    """The words to append for this shard (empty when not sharding).

    In a parallel step a pytest command is sharded by default (the YAMLs' idiom),
    unless it names its shard; other commands only with `--shard`; `none` opts out.
    """
    if shard == "none":
        if shard_list:
            problems.append("--shard none contradicts --shard-list")
        return []
    if not shard and not shard_list:
        # Only pytest (`pytest`, `py.test`, `python[3[.N]] -m pytest`) takes the flags:
        # `bash -c '…'` would get them as $0/$1, a tool as unknown arguments.
        program = os.path.basename(argv[0]) if argv else ""
        python = re.fullmatch(r"python(\d+(\.\d+)?)?", program) and [*argv[1:3]] == ["-m", "pytest"]
        pytest = program in ("pytest", "py.test") or python
        named = any(w.startswith(SHARD_FLAGS) for w in argv)
        if not environ.get("BUILDKITE_PARALLEL_JOB_COUNT") or not pytest or named:
            return []
        shard = "auto"
    explicit = shard not in ("", "auto")
    if explicit:
        left, sep, right = shard.partition("/")
        if not sep:
            problems.append(f"--shard: {shard!r} is not i/n (0-based i), auto or none")
            return []
        index, count = _int(left, "--shard index", problems), _int(right, "--shard count", problems)
    else:
        fix = "give --shard i/n, or run in a parallel step"
        index = _env_int(environ, "BUILDKITE_PARALLEL_JOB", problems, fix)
        fix = "" if shard_list else "give --shard i/n"
        count = _env_int(environ, "BUILDKITE_PARALLEL_JOB_COUNT", problems, fix)
    if index is None:
        return []
    if shard_list:
        entries = [e.strip() for e in shard_list.split(",")]
        if not all(entries):
            problems.append(f"--shard-list: empty entry in {shard_list!r}")
            return []
        if count is not None and count != len(entries):
            problems.append(
                f"--shard-list has {len(entries)} entries but the step has {count} shards"
            )
        if not 0 <= index < len(entries):
            last = len(entries) - 1
            problems.append(f"shard index {index} is out of range for --shard-list (0..{last})")
            return []
        return [entries[index]]
    if count is None:
        return []
    if count < 1:
        source = "--shard" if explicit else "BUILDKITE_PARALLEL_JOB_COUNT"
        problems.append(f"{source}: {count} shards: the count must be 1 or more")
        return []
    if not 0 <= index < count:
        problems.append(f"shard index {index} is out of range for {count} shards (0..{count - 1})")
        return []
    return [f"--num-shards={count}", f"--shard-id={index}"]


def plan_step(
    options: StepOptions, argv: Sequence[str], environ: Mapping[str, str], cwd: str
) -> StepPlan:
    """Validate everything and decide the plan; raises UserError listing every problem."""
    problems: list[str] = []
    if not argv:
        problems.append("no command: put it after `--` (vllm-omni-ci step [OPTIONS] -- COMMAND...)")

    def duration(value: str, name: str, positive: bool = False) -> float | None:
        try:
            return parse_duration(value, name=name, positive=positive) if value else None
        except UserError as exc:
            problems.extend(exc.problems)
            return None

    timeout = duration(options.timeout, "--timeout", positive=True)
    kill_after = duration(options.kill_after, "--kill-after")
    settle = duration(options.leak_settle or "0", "--leak-settle")
    if not 0 <= options.summary_tail <= MAX_SUMMARY_TAIL:
        problems.append(
            f"--summary-tail: {options.summary_tail} is out of range: "
            f"allowed 0 to {MAX_SUMMARY_TAIL} lines"
        )
    if options.summary_tail and not options.artifact_dir:
        problems.append("--summary-tail needs --artifact-dir (the log and summary go there)")
    if options.leak_scope not in SCOPES:
        problems.append(f"--leak-scope: {options.leak_scope!r}: allowed values are tree, all")
    extra = shard_args(options.shard, options.shard_list, environ, problems, argv)
    dirs = []
    for name, value, directory in (
        ("--artifact-dir", options.artifact_dir, options.artifact_dir),
        ("--junit", options.junit, os.path.dirname(options.junit)),
    ):
        if not value:
            continue
        dirs.append((name, os.path.join(cwd, directory)))
        if blocked := _not_a_directory(dirs[-1][1]):
            problems.append(f"{name}: {value!r}: {blocked} is a file, not a directory")
    checkout = environ.get("BUILDKITE_BUILD_CHECKOUT_PATH", "")
    copied = checkout and not os.path.isabs(options.artifact_dir)
    if options.artifact_dir and not inside(os.path.join(cwd, options.artifact_dir), cwd):
        # Its files are masked, rewritten and copied: never outside the working directory.
        problems.append(
            f"--artifact-dir: {options.artifact_dir!r} resolves outside the working directory "
            f"{os.path.realpath(cwd)}; give a directory inside it"
        )
    elif copied and not inside(os.path.join(checkout, options.artifact_dir), checkout):
        problems.append(
            f"--artifact-dir: {options.artifact_dir!r}: its copy resolves outside "
            f"BUILDKITE_BUILD_CHECKOUT_PATH ({os.path.realpath(checkout)})"
        )
    UserError.collect(problems)

    words = [*argv, *extra]
    if options.junit:
        words.append(f"--junitxml={options.junit}")
    artifact_dir = copy_to = log = summary = None
    if options.artifact_dir:
        artifact_dir = os.path.join(cwd, options.artifact_dir)
        if copied and os.path.realpath(cwd) != os.path.realpath(checkout):
            copy_to = os.path.join(checkout, options.artifact_dir)
        if options.summary_tail:
            log = os.path.join(artifact_dir, LOG_FILE)
            summary = os.path.join(artifact_dir, SUMMARY_FILE)
    command = Command(
        tuple(words),
        description="step",
        timeout=timeout,
        grace=kill_after if kill_after is not None else 120.0,
    )
    return StepPlan(
        command, options, tuple(dirs), artifact_dir, copy_to, log, summary, settle or 0.0, cwd
    )


def _not_a_directory(path: str) -> str | None:
    """The first existing part of `path` that is not a directory (makedirs would fail there)."""
    probe = os.path.normpath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent
    return None if os.path.isdir(probe) else probe


def _tail(path: str, count: int) -> list[str]:
    """The last `count` lines of the log; nothing when it is not a regular file (/dev/full)."""
    import stat

    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return []
            return list(deque(fh, maxlen=count))
    except OSError:
        return []


def write_artifact(path: str, text: str) -> None:
    """Write one file of ours, secrets masked; a failure is a warning, never the exit code."""
    try:
        Path(path).write_text(Redactor.for_env()(text), encoding="utf-8")
    except OSError as exc:
        note(f"step: could not write {path}: {exc.strerror or exc}")


def _finish(plan: StepPlan) -> None:
    """The summary (the log's last lines), the text files masked (`mask_texts`) and the
    artifacts' copy, whatever happened. A file that could not be masked is not copied."""
    import shutil

    if plan.artifact_dir is None or not os.path.isdir(plan.artifact_dir):
        return
    if not plan.artifacts_inside():
        note(f"step: {plan.artifact_dir} now resolves outside {plan.workdir}: left as it is")
        return
    if plan.summary and plan.log:
        write_artifact(plan.summary, "".join(_tail(plan.log, plan.options.summary_tail)))
    failed = mask_texts(plan.artifact_dir, Redactor.for_env())
    for path, why in failed:
        note(f"step: could not mask {path}: {why}" + "; not copied" * bool(plan.copy_to))
    if plan.copy_to:
        unmasked = {os.path.realpath(path) for path, _ in failed}

        def skipped(parent: str, names: list[str]) -> set[str]:
            return {n for n in names if os.path.realpath(os.path.join(parent, n)) in unmasked}

        try:  # links stay links: a target's content was not ours to mask
            shutil.copytree(
                plan.artifact_dir, plan.copy_to, symlinks=True, ignore=skipped, dirs_exist_ok=True
            )
            note(f"step: copied {plan.artifact_dir} to {plan.copy_to}")
        except OSError as exc:  # shutil.Error (one per file) is an OSError too
            note(f"step: could not copy artifacts to {plan.copy_to}: {exc}")


def _leak_check(plan: StepPlan, before: list[Proc], code: int, stop: Callable[[], bool]) -> int:
    """Settle, report (stderr and process-cleanup.txt) and return the step's code."""
    found = leaks.settle(before, plan.options.leak_scope, plan.leak_settle, stop=stop)
    if stop():
        return code  # cut short by a signal: no verdict, the leftovers are ended anyway
    lines = leaks.report(found)
    for line in lines:
        note(leaks.PREFIX + line)
    if plan.artifact_dir and plan.artifacts_inside():
        write_artifact(os.path.join(plan.artifact_dir, LEAK_FILE), "\n".join(lines) + "\n")
    if found and code == 0:
        note("step: exit 1: the command passed, but it left processes behind")
        return 1
    if code:
        note(f"step: exit {code}: the command's own status")
    return code


def execute(plan: StepPlan) -> int:
    """Run the plan; the command's exit code, or 1 for a leak after a passing command."""
    for name, directory in plan.dirs:  # made before the command starts: an input error
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise UserError(f"{name}: cannot create {directory}: {exc.strerror}") from None
        if not os.access(directory, os.W_OK | os.X_OK):
            raise UserError(f"{name}: {directory} is not writable")

    def run(received: list[int]) -> int:
        before = leaks.snapshot(plan.options.leak_scope) if plan.options.leak_check else []
        code = run_reporting(plan.command, cancel=received, log=plan.log).code
        if plan.options.leak_check:
            code = _leak_check(plan, before, code, stop=lambda: bool(received))
        return code

    return run_then_end_leftovers(run, "step", "command", after=lambda: _finish(plan))


def run_step(options: StepOptions, argv: Sequence[str], *, dry_run: bool = False) -> None:
    plan = plan_step(options, argv, os.environ, working_directory())
    if dry_run:
        sys.stdout.write(Redactor.for_env()(plan.render()))
        sys.stdout.flush()
    elif code := execute(plan):
        raise Stop(code)
