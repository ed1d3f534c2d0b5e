"""`lint-pipelines`: check every test YAML of a repo, whatever the diff.

The uploader validates lazily (a step the diff filters out is never looked up), so
the linter checks every step of every test YAML at once: keys, presets, expansion
(MIRROR_HW unset and `b200`) and the schema. Every other `.buildkite/` YAML must
satisfy its consumer (`ci.pipeline.judge`) and the schema, as `check_buildkite.py`
did; a file that cannot be read is a problem, never skipped.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci import door, yamlio
from ci.errors import Failure, TaskError, UserError
from ci.pipeline import ifexpr, mirror, model, refusals, sourcefilter
from ci.pipeline.judge import file_problems, is_uploader_test_yaml
from ci.pipeline.registries import Registries
from ci.pipeline.render import render_test_pipeline
from ci.pipeline.stepsource import pipeline_files
from ci.pipeline.upload import is_amd_suite, load_test_yaml, repo_relative
from ci.schema import schema_problems
from ci.target import resolve_repo

TEST_GLOB = ".buildkite/**/test-*.yml, outside amd/"  # what the uploader renders (judge.py)
SELECTORS: tuple[str, ...] = ("", "b200")
# check_buildkite.py skipped it, besides the registries (which are no pipelines).
SKIPPED = ".buildkite/npu/pipeline-npu-a3.yml"
TEMPLATE_KEYS = ("mirror_hardwares", "agent_pool", "grade", "source_file_dependencies")


def _untemplated(document: Any) -> Any:
    """An AMD suite as its uploaded steps: the template's own keys gone from every step."""
    tree, drop = model.parse(document), dict.fromkeys(TEMPLATE_KEYS, model.Step.DELETE)
    if tree.steps is None:
        return document
    steps = model.prune(
        tree.steps,
        lambda step, _: step.replace(**drop),
        on_group=lambda group, _: group.replace(**drop),
        keep_empty=True,
    )
    emitted = model.emit(tree.with_steps(steps))
    return emitted["steps"] if isinstance(document, list) else emitted


@dataclass
class FileReport:
    path: str
    steps: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    presets: set[str] = field(default_factory=set)
    rendered: bool = True


def _strict(document: model.Document, registries: Registries, report: FileReport) -> None:
    """Keys and explicit presets of every step, reachable by the diff or not."""
    for entry in model.every(model.parse(document).steps or ()):
        report.steps += 1
        step = entry.fields
        label = model.name_of(step)
        try:
            sourcefilter.prefixes_of(step, registries.sources)
        except TaskError as exc:
            report.problems.extend(exc.problems)
        if isinstance(entry, model.Step) and mirror.FIELD in step:
            try:
                mirror.known_preset(
                    mirror.preset_name(step[mirror.FIELD], label), label, registries.presets()
                )
            except TaskError as exc:
                report.problems.extend(exc.problems)
        condition = step.get("if")
        if isinstance(condition, str) and not ifexpr.is_evaluable(ifexpr.parse(condition)):
            report.notes.append(f"step {label!r}: `if` not evaluable: {condition}")


def lint_file(repo: Path, path: Path, registries: Registries) -> FileReport:
    relative = repo_relative(repo, path) or str(path)
    report = FileReport(relative)
    try:
        document = yamlio.load(path)  # an unreadable file, invalid YAML: the gates' words
        if not isinstance(document, dict):  # refused in the uploader's words (empty: why)
            document = load_test_yaml(path)
        report.problems += refusals.problems([document])
        _strict(document, registries, report)
        for selector in SELECTORS:  # render is pure: the document read above serves both
            rendered = render_test_pipeline(
                document, scope="all", registries=registries, mirror_hw=selector, source=str(path)
            )
            report.problems.extend(rendered.problems)
            report.presets.update(k.preset for k in rendered.kept if k.preset)
            if not rendered.problems:
                shown = f"MIRROR_HW={selector}" if selector else "MIRROR_HW unset"
                report.problems.extend(
                    f"rendered pipeline ({shown}) fails the Buildkite schema at {p}"
                    for p in schema_problems(rendered.pipeline)
                )
    except TaskError as exc:
        report.problems.extend(exc.problems)
    report.problems = list(dict.fromkeys(report.problems))
    return report


def lint_static(relative: str, path: Path) -> FileReport:
    """A pipeline the uploader does not render: its consumer must accept it
    (`ci.pipeline.judge`), and every YAML document must pass the schema."""
    report = FileReport(relative, rendered=False)
    try:
        documents = yamlio.load_all(path, relative)
        UserError.collect(file_problems(relative, path, [d for d in documents if d is not None]))
    except TaskError as exc:
        # lint_repo puts the file in front of each line (the AMD loader's lines, which name
        # the absolute path, are shown as the bootstrap shows them).
        report.problems += [p.removeprefix(f"{relative}: ") for p in exc.problems]
        return report
    report.problems += refusals.problems([d for d in documents if d is not None])
    for index, document in enumerate(d for d in documents if d is not None):
        if is_amd_suite(relative):
            document = _untemplated(document)
        if isinstance(document, dict):
            report.steps += sum(1 for _ in model.every(model.parse(document).steps or ()))
        where = f"document {index + 1}: " if len(documents) > 1 else ""
        report.problems.extend(
            f"{where}fails the Buildkite schema at {p}" for p in schema_problems(document)
        )
    return report


def lint(repo: Path) -> list[FileReport]:
    """One report per pipeline file; the registries are read once for all of them."""
    registries = Registries.for_repo(repo)
    kite = pipeline_files(repo) if (repo / ".buildkite").is_dir() else []
    found = [(p.relative_to(repo).as_posix(), p) for p in kite]
    reports = [lint_file(repo, p, registries) for rel, p in found if is_uploader_test_yaml(rel)]
    others = [(rel, p) for rel, p in found if not is_uploader_test_yaml(rel) and rel != SKIPPED]
    return reports + [lint_static(rel, p) for rel, p in others]


def problem_lines(repo: Path, reports: list[FileReport]) -> list[str]:
    """One line per problem, naming its file; a registry problem names its file already
    and repeats for every YAML, so it is one line. (`migrate` shows them too.)"""
    root = str(repo.resolve())
    errors: dict[str, None] = {}
    for report in reports:
        for problem in report.problems:
            named = root in problem or problem.startswith(f"{report.path}: ")
            errors.setdefault(problem if named else f"{report.path}: {problem}", None)
    return list(errors)


def lint_repo(repo_arg: str = "") -> None:
    """The task: a summary on stdout, one `error:` line per problem, exit 1 on any."""
    repo = resolve_repo(repo_arg or None)
    reports = lint(repo)
    if not reports:
        raise UserError(f"--repo: {repo} has no test pipelines ({TEST_GLOB})")
    for report in reports:
        state = "ok  " if not report.problems else "FAIL"
        presets = ", ".join(sorted(report.presets)) or "none"
        what = f"presets: {presets}" if report.rendered else "schema only"
        sys.stdout.write(
            f"{state} {report.path}: {report.steps} step(s), {len(report.problems)} problem(s); "
            f"{what}\n"
        )
        for note in report.notes:
            door.note(f"note: {report.path}: {note}")
    sys.stdout.flush()
    Failure.collect(problem_lines(repo, reports))
