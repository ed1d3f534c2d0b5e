"""Run one build's bootstrap as Buildkite would, and record every pipeline it uploads.

The first pipeline is the entry: the file Buildkite's hook uploads (CUDA, NPU) or
the one step of the pipeline's settings (AMD, Intel). Every step of an uploaded
pipeline whose `if` holds for the build and whose command uploads a pipeline is
then run too, so the test pipelines that the bootstrap's upload steps make are
recorded as well. Commands run as Buildkite runs them: `bash -e -c` of the
`commands` joined by newlines, after upload-time interpolation, in a clean
environment of the build's variables with the stand-ins first on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ci import door, yamlio
from ci.migrate import standins
from ci.migrate.matrix import BuildCase
from ci.pipeline import ifexpr, model
from ci.pipeline.commands import command_text
from ci.pipeline.stepsource import env_of, upload_interpolate

# A command that hands a pipeline to Buildkite: the agent itself, the old uploader
# and bootstraps, or ours.
UPLOADS: Final = re.compile(
    r"pipeline\s+upload|upload_pipeline\.py|bootstrap-\w+-omni\.sh|resolve_skip_ci\.sh"
    r"|vllm-omni-ci\s+(?:upload-pipeline|bootstrap)\b"
)
TIMEOUT: Final = 120.0
# How long a job's command has to end after TERM when the check is stopped, before KILL:
# the whole check must stop well inside Buildkite's 10 s between TERM and KILL.
GRACE: Final = 2.0
MAX_DEPTH: Final = 4


@dataclass(frozen=True)
class Upload:
    by: str  # the step whose command uploaded it
    text: str


@dataclass(frozen=True)
class Outcome:
    uploads: tuple[Upload, ...]
    annotations: tuple[str, ...]
    failures: tuple[str, ...]  # "<step>: exit N: <error line>", one per failed command


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Buildkite's upload-time interpolation: `$$` is a literal `$`; `$X`, `${X}` and
    `${X:-default}` take the build's value (an unset variable is empty); other `${X...}`
    forms are left to the job's shell."""

    def value(name: str, token: str) -> str:
        rest = token[len(name) + 2 : -1] if token.startswith("${") else ""
        default = re.fullmatch(r":?-(.*)", rest)
        if rest and default is None:
            return token
        return env.get(name, "") or (default.group(1) if default else "")

    return upload_interpolate(text, value)


def run_build(
    checkout: Path,
    commit: str,
    entry: str | Path,
    situation: BuildCase,
    tools: Path,
    record: Path,
    cancel: list[int] | None = None,
) -> Outcome:
    """Everything the build of `commit` (the checkout's HEAD) uploads, with the stand-ins
    of `tools` first on PATH, starting from `entry`: a pipeline file of the checkout (a
    Path), or the command of the settings' one step (a str). A signal number appended to
    `cancel` (this runs off the main thread, which receives the signals) ends the command
    that runs and the build, as `door.Interrupted`."""
    cancel = [] if cancel is None else cancel
    _stop_if(cancel)
    if record.exists():
        shutil.rmtree(record)
    record.mkdir(parents=True)
    env = _job_env(checkout, commit, situation, tools, record)
    if isinstance(entry, Path):
        first = (checkout / entry).read_text()
        first = yamlio.dumps(yamlio.loads_all(first, source=str(entry))[0])
    else:
        first = yamlio.dumps({"steps": [{"label": "bootstrap", "command": entry}]})
    uploads: list[Upload] = []
    failures: list[str] = []
    pending = [(first, 0)]
    while pending:
        text, depth = pending.pop(0)
        document = yamlio.loads(text, source="upload")
        for name, commands, job_env in _runnable(document, situation, env):
            pairs = [f"{k}={v}" for k, v in job_env.items()]
            argv = ["env", "-i", *pairs, "bash", "-e", "-c", interpolate(commands, job_env)]
            result = _capture(argv, checkout, cancel, timeout=TIMEOUT)
            if not result.ok:
                said = error_line(result.stderr) or error_line(result.stdout)
                # The clone's path differs from cell to cell; the cause does not.
                said = said.replace(f"{checkout}{os.sep}", "").replace(str(checkout), ".")
                failures.append(f"{name}: exit {result.code}: {said}")
            # The stand-in numbers uploads from 0 in the record, which holds only this build's.
            while (made := record / f"upload-{len(uploads)}.yml").exists():
                uploads.append(Upload(name, made.read_text()))
                if depth < MAX_DEPTH:
                    pending.append((uploads[-1].text, depth + 1))
    _clean(checkout, cancel)
    notes = record / "annotations.txt"
    annotations = tuple(notes.read_text().splitlines()) if notes.exists() else ()
    return Outcome(tuple(uploads), annotations, tuple(failures))


# A line that names an error: a Python exception (`ValueError: …`, a dotted one such as
# `yaml.composer.ComposerError: …` or `jinja2.exceptions.TemplateNotFound: …`), an
# `error:`/`fatal:` line (ours, git's, a script's), or a shell's or tool's complaint about
# a file or a command.
_ERROR_LINE: Final = re.compile(
    r"^(?:(?:[A-Za-z_]\w*\.)+[A-Z]\w*|[A-Z]\w*(?:Error|Exception|NotFound|Exit|Interrupt))"
    r"(?::\s|$)"
    r"|\b(?:error|fatal|ERROR|FATAL|Error)\s*:"
    r"|No such file or directory|command not found|Permission denied|cannot stat"
)


def error_line(output: str) -> str:
    """The line of a failed command's output that names the error: the last line that
    looks like one (`_ERROR_LINE`), else the last line with a letter in it (a traceback's
    last lines are often a YAML mark's `^`), else ''. Pure: the report quotes it."""
    lines = [line.strip() for line in output.splitlines()]
    for line in reversed(lines):
        if _ERROR_LINE.search(line):
            return line
    return next((line for line in reversed(lines) if re.search(r"[A-Za-z]", line)), "")


def _runnable(
    document: Any, situation: BuildCase, env: Mapping[str, str]
) -> list[tuple[str, str, dict[str, str]]]:
    """The steps Buildkite would run whose commands upload a pipeline: name, the commands
    one per line, and the job's env (`env`, the pipeline's, the step's)."""
    tree = model.parse(document)
    pipeline_env = {**env, **env_of(tree.fields.get("env"))}
    found = []
    for step, groups in model.leaves(tree.steps or ()):
        if not all(holds(g.get("if"), situation) for g in (*groups, step)):
            continue
        if UPLOADS.search(commands := command_text(step.fields)):
            job_env = {**pipeline_env, **env_of(step.get("env"))}
            found.append((model.name_of(step.fields), commands, job_env))
    return found


def holds(condition: Any, situation: BuildCase) -> bool:
    """An `if` Buildkite would run the step under (absent: always; not evaluable: never)."""
    if condition is None:
        return True
    if isinstance(condition, bool):
        return condition
    return ifexpr.check(str(condition), situation.context()) is True


def _job_env(
    checkout: Path, commit: str, situation: BuildCase, tools: Path, record: Path
) -> dict[str, str]:
    return {
        "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "TMPDIR": str(record),
        "BASH_ENV": str(tools / standins.BASH_ENV),
        # Byte code outside the checkout: kept from build to build, never in `git status`.
        "PYTHONPYCACHEPREFIX": str(tools.parent / "pycache"),
        standins.RECORD_ENV: str(record),
        standins.LABELS_ENV: ",".join(situation.labels),
        "BUILDKITE_COMMIT": commit,
        "BUILDKITE_BUILD_CHECKOUT_PATH": str(checkout),
        **situation.env(),
    }


def _clean(checkout: Path, cancel: list[int]) -> None:
    """What a script left in the checkout (the AMD render's files) goes before the next one."""
    if _capture(["git", "status", "--porcelain"], checkout, cancel).stdout.strip():
        _capture(["git", "checkout", "-q", "--", "."], checkout, cancel)
        _capture(["git", "clean", "-fdq"], checkout, cancel)


def _capture(
    argv: list[str], cwd: Path, cancel: list[int], timeout: float | None = None
) -> door.Result:
    """`door.capture`, ended by a signal number in `cancel` within `GRACE` seconds."""
    _stop_if(cancel)
    command = door.Command(tuple(argv), cwd=str(cwd), timeout=timeout, grace=GRACE)
    return door.run(command, "capture", quiet=True, leaves_nothing=True, cancel=cancel)


def _stop_if(cancel: list[int]) -> None:
    """Start nothing more once the check is stopped."""
    if cancel:
        raise door.Interrupted(128 + cancel[-1], f"interrupted by signal {cancel[-1]}")
