"""The command steps of a target's Buildkite YAMLs, as the shell text they run.

For the shellcheck gate and the local tiers: one `ShellStep` per command step
(groups flattened, `wait`/`block`/`trigger` skipped), with the pipeline's `env`
under the step's own, as Buildkite and the AMD template apply them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ci.pipeline.files
from ci import yamlio
from ci.errors import Failure, TaskError, UserError
from ci.pipeline import model
from ci.pipeline.commands import step_commands
from ci.pipeline.judge import file_problems

# Pipelines whose steps the AMD template renders into TEST_COMMANDS for the
# native runner; every other step runs under Buildkite's job shell.
AMD_TIER = re.compile(r"^(?:amd/)?test-amd[^/]*\.ya?ml$")  # flat: an earlier layout
# Files under .buildkite/ that are registries or templates, not pipelines.
NOT_PIPELINES = ("common/ci_mirror_hardwares.yml", "common/ci_source_file_dependencies.yml")

AMD_RUNNER = "amd-runner"  # run-amd-test.sh: one bash, pipefail, no errexit, run-all
JOB_SHELL = "job-shell"  # Buildkite's default `bash -e -c`: errexit, no pipefail


@dataclass(frozen=True)
class Dependency:
    """One `depends_on` entry: a step or group key; `allow_failure` as Buildkite reads it."""

    key: str
    allow_failure: bool = False


def _depends(entry: Mapping[str, Any]) -> tuple[Dependency, ...]:
    """`depends_on` as strings or `{step: KEY, allow_failure}`; the entry's
    `allow_dependency_failure: true` allows them all."""
    value, allow_all = entry.get("depends_on"), entry.get("allow_dependency_failure") is True
    found: list[Dependency] = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str) and item.strip():
            found.append(Dependency(item.strip(), allow_all))
        elif isinstance(item, Mapping) and isinstance(item.get("step"), str):
            allowed = allow_all or item.get("allow_failure") is True
            found.append(Dependency(str(item["step"]).strip(), allowed))
    return tuple(found)


def _condition(entry: Mapping[str, Any]) -> tuple[str, ...]:
    if (value := entry.get("if")) is None:
        return ()
    return (str(value).lower() if isinstance(value, bool) else " ".join(str(value).split()),)


@dataclass(frozen=True)
class ShellStep:
    """One command step: where it is, what it runs, with which env and shell."""

    file: str  # relative to the repo, e.g. ".buildkite/amd/test-amd-ready.yml"
    label: str
    commands: tuple[str, ...]  # as written in the YAML (Buildkite escapes intact)
    env: Mapping[str, str] = field(default_factory=dict)
    group: str = ""
    key: str = ""
    shell: str = JOB_SHELL
    # The `if`s that decide whether Buildkite creates it: enclosing groups', then its own.
    conditions: tuple[str, ...] = ()
    # `depends_on` of the step and its groups; keys of the groups it sits in.
    depends_on: tuple[Dependency, ...] = ()
    group_keys: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def shell_commands(self) -> tuple[str, ...]:
        """The commands as the shell receives them after upload (`$$` -> `$`)."""
        return tuple(unescape(c) for c in self.commands)


# What `buildkite-agent pipeline upload` interpolates: `$$` (a literal `$`),
# `${NAME...}` and `$NAME`. `$(`, `$?`, `$1`... are left to the job shell.
_UPLOAD = re.compile(
    r"\$\$|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)[^}\n]*\}|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)


def upload_interpolate(text: str, resolve: Callable[[str, str], str]) -> str:
    """Buildkite's upload-time pass: `$$` -> `$`; each reference -> `resolve(name, token)`."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return resolve(match.group("braced") or match.group("bare"), match.group(0))

    return _UPLOAD.sub(replace, text)


def upload_refs_at(line: str) -> list[tuple[str, int]]:
    """(name, 1-based column in the unescaped line) of each upload-time reference."""
    found: list[tuple[str, int]] = []
    shift = 0  # each `$$` before a match is one character shorter in the job
    for match in _UPLOAD.finditer(line):
        if match.group(0) == "$$":
            shift += 1
        else:
            found.append((match.group("braced") or match.group("bare"), match.start() - shift + 1))
    return found


def unescape(text: str) -> str:
    """`$$` -> `$`, references kept for the (local) shell to expand at run time."""
    return upload_interpolate(text, lambda _name, token: token)


def shell_of(rel_file: str) -> str:
    """The dialect a file's steps run under, from its path below .buildkite/."""
    below = rel_file.split(".buildkite/", 1)[-1]
    return AMD_RUNNER if AMD_TIER.match(below) else JOB_SHELL


def env_of(value: Any) -> dict[str, str]:
    """A YAML `env` mapping as strings (null is empty); anything else is no env."""
    items = value.items() if isinstance(value, Mapping) else ()
    return {str(k): "" if v is None else str(v) for k, v in items}


def steps_of(document: Any, rel_file: str) -> Iterator[ShellStep]:
    """The command steps of one parsed pipeline document (a mapping or a bare list)."""
    tree = model.parse(document)
    steps = tree.steps or ()
    env = env_of(tree.fields.get("env"))
    shell = shell_of(rel_file)
    for step, outer in model.leaves(steps):
        commands = tuple(c.strip() for c in step_commands(step.fields, rel_file) if c.strip())
        if not commands:
            continue
        chain: tuple[model.Group | model.Step, ...] = (*outer, step)
        siblings = outer[-1].steps if outer else steps
        yield ShellStep(
            file=rel_file,
            label=model.name_of(step.fields, f"step {siblings.index(step) + 1}"),
            commands=commands,
            env={**env, **{k: v for entry in chain for k, v in env_of(entry.get("env")).items()}},
            group=model.name_of(outer[-1].fields, "") if outer else "",
            key=str(step.get("key") or ""),
            shell=shell,
            conditions=tuple(c for entry in chain for c in _condition(entry.fields)),
            depends_on=tuple(d for entry in chain for d in _depends(entry.fields)),
            group_keys=tuple(str(g.get("key")) for g in outer if g.get("key")),
            raw=step.fields,
        )


def is_pipeline(rel: str) -> bool:
    """A repo-relative path of a pipeline YAML (under .buildkite/, not a registry)."""
    below = rel.removeprefix(".buildkite/")
    return below != rel and below.endswith((".yml", ".yaml")) and below not in NOT_PIPELINES


def pipeline_files(repo: Path) -> list[Path]:
    """Every pipeline YAML under `<repo>/.buildkite/` (registries excluded), sorted; unreadable
    entries too (a symlink loop, a FIFO), so that reading them reports the problem."""
    root = repo / ".buildkite"
    if not root.is_dir():
        raise UserError(f"--repo: {repo} has no .buildkite/ directory")
    found = ci.pipeline.files.walk(root, lambda name: name.endswith((".yml", ".yaml")))
    return [p for p in found if is_pipeline(p.relative_to(repo).as_posix())]


def load_documents(path: Path, source: str) -> list[Any]:
    """All YAML documents of a file (old pipeline.yml files hold two)."""
    return [d for d in yamlio.load_all(path, source) if d is not None]


def read_steps(repo: Path, files: Iterable[Path] | None = None) -> list[ShellStep]:
    """The command steps of `files` (default: every pipeline), each file judged as its
    consumer would (`ci.pipeline.judge`); all problems at once (exit 1)."""
    steps, refused = read_each(repo, files)
    Failure.collect(refused)
    return steps


def read_each(repo: Path, files: Iterable[Path] | None = None) -> tuple[list[ShellStep], list[str]]:
    """The command steps of the files their consumer accepts, and one line per problem of
    those it refuses (which give no steps): a caller can check the rest and report both."""
    steps: list[ShellStep] = []
    problems: list[str] = []
    for path in pipeline_files(repo) if files is None else files:
        rel = path.relative_to(repo).as_posix() if path.is_relative_to(repo) else str(path)
        try:
            documents = load_documents(path, rel)
        except TaskError as exc:
            problems += exc.problems
            continue
        found = file_problems(rel, path, documents)
        problems += found
        steps += [] if found else [s for document in documents for s in steps_of(document, rel)]
    return steps, problems
