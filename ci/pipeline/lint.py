"""`lint-pipelines`: check every test YAML of a repo, whatever the diff.

The uploader validates lazily: a step that the diff filters out never has its
key or preset looked up, so a typo surfaces only on the build that finally
needs the step (the corpus's `diffusion_joy_image_accuracy` shows up only
when a nightly upload crashes). The linter visits every step of every test
YAML and reports, all at once:

* every `source_file_dependencies` key exists (and the value is well formed);
* every `mirror_hardwares` preset exists;
* every step expands, with MIRROR_HW unset and with `b200`;
* every expanded pipeline validates against Buildkite's schema.

`if` strings outside the `if` module's subset are listed as notes. Every
other `.buildkite/` YAML is validated against the schema as it is (AMD test
YAMLs without their template-only keys), as `check_buildkite.py` did, after
the check of the task that consumes it (`ci.pipeline.judge`: the AMD
bootstrap's suite loader, step `command` types). A file that cannot be read
(a symlink loop, a FIFO) is a problem of its own, never skipped.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci import door, yamlio
from ci.errors import FAILURE, UserError
from ci.pipeline import ifexpr, mirror, model, sourcefilter
from ci.pipeline.files import walk
from ci.pipeline.judge import file_problems, is_amd_suite, is_uploader_test_yaml
from ci.pipeline.registries import Registries
from ci.pipeline.upload import render_file, repo_relative
from ci.schema import schema_problems
from ci.target import resolve_repo

# Test YAMLs the uploader renders (`judge.is_uploader_test_yaml`); AMD's go through
# the AMD template instead.
TEST_GLOB = ".buildkite/*/test-*.yml"
SELECTORS: tuple[str, ...] = ("", "b200")
# Every other Buildkite YAML is checked as check_buildkite.py did: as-is, except
# AMD test YAMLs (template-only keys stripped) and the files it skipped.
SKIP_FILES = (
    ".buildkite/common/ci_mirror_hardwares.yml",
    ".buildkite/common/ci_source_file_dependencies.yml",
    ".buildkite/npu/pipeline-npu-a3.yml",
)
TEMPLATE_KEYS = ("mirror_hardwares", "agent_pool", "grade", "source_file_dependencies")


def _buildkite_yamls(repo: Path) -> list[Path]:
    """Every `*.yml`/`*.yaml` entry under `.buildkite/`, unreadable ones included (safe walk)."""
    root = repo / ".buildkite"
    if not root.is_dir():
        return []
    return walk(root, lambda name: name.endswith((".yml", ".yaml")))


def _is_test_yaml(repo: Path, path: Path) -> bool:
    """`.buildkite/<dir>/test-*.yml` (TEST_GLOB), outside the AMD directory."""
    return is_uploader_test_yaml(path.relative_to(repo).as_posix())


def pipeline_files(repo: Path) -> list[Path]:
    return [p for p in _buildkite_yamls(repo) if _is_test_yaml(repo, p)]


def other_files(repo: Path) -> list[Path]:
    """The remaining `.buildkite/**/*.y(a)ml` files, validated against the schema as they are."""
    return [
        p
        for p in _buildkite_yamls(repo)
        if not _is_test_yaml(repo, p) and p.relative_to(repo).as_posix() not in SKIP_FILES
    ]


def _strip(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_strip(v, keys) for v in value]
    return value


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
        label = sourcefilter.step_label(step)
        try:
            sourcefilter.prefixes_of(step, registries.sources)
        except UserError as exc:
            report.problems.extend(exc.problems)
        if isinstance(entry, model.Step) and mirror.FIELD in step:
            try:
                name = mirror.preset_name(step[mirror.FIELD], label)
                known = registries.presets()
                if name not in known.presets:
                    report.problems.append(
                        f"unknown {mirror.FIELD} {name!r} in step {label!r}; "
                        f"known: {', '.join(known.names)}"
                    )
            except UserError as exc:
                report.problems.extend(exc.problems)
        condition = step.get("if")
        if isinstance(condition, str) and not ifexpr.is_evaluable(ifexpr.parse(condition)):
            report.notes.append(f"step {label!r}: `if` not evaluable: {condition}")


def lint_file(repo: Path, path: Path, registries: Registries) -> FileReport:
    relative = repo_relative(repo, path) or str(path)
    report = FileReport(relative)
    try:
        document = yamlio.load(path)
        if not isinstance(document, dict):
            raise UserError(f"invalid pipeline YAML: {path}", code=FAILURE)
        _strict(document, registries, report)
        for selector in SELECTORS:
            rendered = render_file(
                repo, path, scope="all", changed=None, mirror_hw=selector, registries=registries
            )
            report.problems.extend(rendered.problems)
            report.presets.update(k.preset for k in rendered.kept if k.preset)
            if not rendered.problems:
                shown = f"MIRROR_HW={selector}" if selector else "MIRROR_HW unset"
                report.problems.extend(
                    f"rendered pipeline ({shown}) fails the Buildkite schema at {p}"
                    for p in schema_problems(rendered.pipeline)
                )
    except UserError as exc:
        report.problems.extend(exc.problems)
    report.problems = list(dict.fromkeys(report.problems))
    return report


def lint_static(repo: Path, path: Path) -> FileReport:
    """A pipeline the uploader does not render: its consumer must accept it
    (`ci.pipeline.judge`: the AMD bootstrap's suite check for AMD test YAMLs),
    and every YAML document must pass the schema."""
    relative = path.relative_to(repo).as_posix()
    report = FileReport(relative, rendered=False)
    template = is_amd_suite(relative)

    def own(problems: tuple[str, ...] | list[str]) -> list[str]:
        # lint_repo puts the file in front of each line (the AMD loader's lines, which name
        # the absolute path, are shown as the bootstrap shows them).
        return [p.removeprefix(f"{relative}: ") for p in problems]

    try:
        documents = yamlio.load_all(path, relative)
    except UserError as exc:
        report.problems += own(exc.problems)
        return report
    report.problems += own(file_problems(relative, path, [d for d in documents if d is not None]))
    if report.problems:
        return report
    for index, document in enumerate(d for d in documents if d is not None):
        if template:
            document = _strip(document, TEMPLATE_KEYS)
        report.steps += (
            sum(1 for _ in model.every(model.parse(document).steps or ()))
            if isinstance(document, dict)
            else 0
        )
        where = f"document {index + 1}: " if len(documents) > 1 else ""
        report.problems.extend(
            f"{where}fails the Buildkite schema at {p}" for p in schema_problems(document)
        )
    return report


def lint(repo: Path, *, others: bool = True) -> list[FileReport]:
    """One report per pipeline file; the registries are read once for all of them."""
    registries = Registries.for_repo(repo)
    reports = [lint_file(repo, path, registries) for path in pipeline_files(repo)]
    if others:
        reports += [lint_static(repo, path) for path in other_files(repo)]
    return reports


def lint_repo(repo_arg: str = "") -> None:
    """The task: a summary on stdout, one `error:` line per problem, exit 1 on any."""
    repo = resolve_repo(repo_arg or None)
    reports = lint(repo)
    if not reports:
        raise UserError(f"--repo: {repo} has no test pipelines ({TEST_GLOB})")
    root = str(repo.resolve())
    errors: dict[str, None] = {}
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
        for problem in report.problems:
            # Registry problems name their file already and repeat for every YAML.
            named = root in problem or problem.startswith(f"{report.path}: ")
            errors.setdefault(problem if named else f"{report.path}: {problem}", None)
    sys.stdout.flush()
    UserError.collect(errors, code=FAILURE)
