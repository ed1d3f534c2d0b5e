"""`upload-pipeline`: render one pipeline file and print or upload it.

The uploader's task layer: repo, file and diff in, the pure renderer
(`ci.pipeline.render`) in between, the schema check before any output. A
`bootstrap-upload-steps.yml` gets the gates of `ci.pipeline.bootstrap_mode` instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci import door, yamlio
from ci.errors import Failure, TaskError, UserError
from ci.pipeline import files, model
from ci.pipeline import scope as scopes
from ci.pipeline.mirror import parse_mirror_hw
from ci.pipeline.registries import Registries, read_yaml
from ci.pipeline.render import Rendered, Scope, render_test_pipeline
from ci.schema import require_valid
from ci.target import check_build_env, resolve_branch, resolve_build, resolve_repo

LOG_PREFIX = "upload_pipeline: "
BOOTSTRAP_FILE = "bootstrap-upload-steps.yml"
DEFAULT_PIPELINE = ".buildkite/cuda/bootstrap-upload-steps.yml"


@dataclass(frozen=True)
class UploadOptions:
    """The task's options, parsed (`scope`: one of `ci.pipeline.scope.CHOICES`)."""

    pipeline: str = DEFAULT_PIPELINE
    scope: str = "diff"
    upload: bool = False
    dry_run: bool = False
    repo: str = ""
    platform: str = ""  # bootstrap mode only: cuda or npu (default: from the path)


def log(message: str) -> None:
    door.note(LOG_PREFIX + message)


def _invalid(path: Path, *whys: str) -> Failure:
    """The spec's `invalid pipeline YAML: <path>`, once per reason given (in parentheses)."""
    head = f"invalid pipeline YAML: {path}"
    return Failure(*([f"{head} ({why})" for why in whys] or [head]))


def pipeline_file(repo: Path, given: str, *, named: bool = False) -> Path:
    """Relative paths are resolved against the repo root, not the cwd. `~` expands as in a
    shell: an unknown `~user` stays as written (pathlib's expansion raises instead).

    `named`: the path is the caller's input (`upload-pipeline FILE`), so a missing one is
    an input error (exit 2) naming the repo it was looked for in; one that a repo's own
    pipeline names is the repo's problem (exit 1)."""
    path = Path(os.path.abspath(repo / os.path.expanduser(given)))
    if not files.exists(path) or path.is_dir():
        if named:
            raise UserError(
                f"upload_pipeline: missing pipeline file: {path} (a relative path is read from"
                f" the repo root, {repo}; --repo names another checkout)"
            )
        raise Failure(f"upload_pipeline: missing pipeline file: {path}")
    try:  # there, but a loop or a FIFO: say so now (a FIFO would block every reader)
        files.check_readable(path, str(path))
    except files.Unreadable as exc:
        raise _invalid(path, f"cannot read: {exc.why}") from None
    return path


def is_amd_suite(rel: str) -> bool:
    """`.buildkite/amd/test-*.yml` (an earlier layout's flat `.buildkite/test-amd*.yml`):
    data of the AMD bootstrap's template, not an upload YAML."""
    parts = rel.split("/")
    if len(parts) < 2:
        return False
    folder, name = parts[-2:]
    return (folder == "amd" and name.startswith("test-")) or (
        folder == ".buildkite" and name.startswith("test-amd")
    )


def repo_relative(repo: Path, path: Path) -> str | None:
    try:
        return files.realpath(path).relative_to(files.realpath(repo)).as_posix()
    except ValueError:
        return None


def changed_paths(
    repo: Path, env: Mapping[str, str], *, fetch: bool = True
) -> tuple[str, ...] | None:
    from ci.diff import resolve_diff  # here: an unfiltered render loads no diff code

    diff = resolve_diff(repo, env=env, fetch=fetch)
    if diff.paths is None:
        log(f"changed files unknown ({diff.reason}); no source filtering")
    else:
        log(f"filter by {len(diff.paths)} changed file(s) ({diff.reason})")
    return diff.paths


def load_test_yaml(path: Path) -> model.Document:
    """The uploader's reading of a test YAML: one mapping document, else one error per
    problem; the gates ask this too (`ci.pipeline.judge`), to refuse what the upload refuses."""
    document = read_yaml(path, f"invalid pipeline YAML: {path}", codec_words=True)
    if document is None:  # a fully commented-out file, say, kept from an older layout
        raise _invalid(path, "empty: no YAML document, or only comments")
    if not isinstance(document, dict):
        raise _invalid(path)
    return document


def render_file(
    repo: Path,
    path: Path,
    *,
    scope: Scope,
    changed: tuple[str, ...] | None,
    mirror_hw: str | None,
    registries: Registries | None = None,
) -> Rendered:
    """Load (`load_test_yaml`) and render one test YAML (problems stay in `Rendered.problems`)."""
    return render_test_pipeline(
        load_test_yaml(path),
        scope=scope,
        changed=changed,
        registries=registries or Registries.for_repo(repo),
        mirror_hw=mirror_hw,
        pipeline_path=repo_relative(repo, path),
        source=str(path),
    )


@dataclass(frozen=True)
class UploadInputs:
    """What one test-pipeline upload depends on: `branch` and `schedule` decide
    `--scope auto`; `changed` gives the diff (None: unknown, no filter)."""

    branch: str
    schedule: Mapping[str, str]
    changed: Callable[[], tuple[str, ...] | None]
    mirror_hw: str = ""


def render_upload(
    repo: Path,
    path: Path,
    requested: str,
    inputs: UploadInputs,
    registries: Registries | None = None,
) -> tuple[Scope, Rendered]:
    """A test YAML's scope and render for upload (`upload-pipeline`, `plan`); the diff is
    asked for only under `diff`."""
    relative = repo_relative(repo, path) or str(path)
    scope = scopes.resolve(requested, relative, inputs.branch, inputs.schedule)
    changed = inputs.changed() if scope == "diff" else None
    rendered = render_file(
        repo, path, scope=scope, changed=changed, mirror_hw=inputs.mirror_hw, registries=registries
    )
    return scope, rendered


def annotate_command(pipeline: str, problems: tuple[str, ...]) -> door.Command:
    body = "\n".join(
        [f"**upload-pipeline failed for `{pipeline}`** (nothing was uploaded):", ""]
        + [f"- {p}" for p in problems]
    )
    argv: tuple[str, ...] = ("buildkite-agent", "annotate", "--style", "error", "--context")
    argv += (f"upload-pipeline-{pipeline}", body)
    return door.Command(argv, "annotate the build with the upload errors")


def upload_pipeline(options: UploadOptions, env: Mapping[str, str] | None = None) -> None:
    """The task; in a Buildkite upload job, errors are also annotated on the build."""
    source = os.environ if env is None else env
    try:
        _upload_pipeline(options, source)
    except TaskError as exc:
        if options.upload and not options.dry_run and source.get("BUILDKITE") == "true":
            # The PR author sees why the tier did not run; a failing annotation is ignored.
            door.run(annotate_command(options.pipeline, exc.problems), quiet=True)
        raise


def _upload_pipeline(options: UploadOptions, source: Mapping[str, str]) -> None:
    check_build_env(source)  # every task's rule for the build's variables, before any work
    repo = resolve_repo(options.repo or None)
    path = pipeline_file(repo, options.pipeline, named=True)
    relative = repo_relative(repo, path) or str(path)
    if path.name == BOOTSTRAP_FILE:
        # Bootstrap mode is chosen by file name; `--all`/`--e2e` are ignored.
        upload_bootstrap_file(repo, path, relative, options, source)
        return
    if options.platform:  # the original loader's guard: a platform means a bootstrap file
        raise Failure(f"expected {BOOTSTRAP_FILE}, got {path.name}")
    if is_amd_suite(path.as_posix()):
        raise Failure(
            f"{relative}: AMD suite YAMLs are rendered by `vllm-omni-ci bootstrap --platform rocm`"
            " (suites: `vllm-omni-ci select-suites`), not by upload-pipeline",
        )
    mirror_hw = source.get("MIRROR_HW", "")
    parse_mirror_hw(mirror_hw)  # fails even a pipeline without GPU steps, before any git work
    inputs = UploadInputs(
        branch=resolve_branch(repo, env=source) if options.scope == "auto" else "",
        schedule=source,
        changed=lambda: changed_paths(repo, source, fetch=not options.dry_run),
        mirror_hw=mirror_hw,
    )
    scope, rendered = render_upload(repo, path, options.scope, inputs)
    for line in rendered.log:
        log(line)
    Failure.collect(dict.fromkeys(rendered.problems))
    log(f"{len(rendered.kept)} step(s) kept, {len(rendered.dropped)} dropped ({scope} scope)")
    emit(rendered.pipeline, relative, upload=options.upload, dry_run=options.dry_run)


def upload_bootstrap_file(
    repo: Path, path: Path, relative: str, options: UploadOptions, env: Mapping[str, str]
) -> None:
    """`upload-pipeline <…>/bootstrap-upload-steps.yml`: gates only, commands untouched.
    Its modules (skip-ci, the `if` grammar) load here: a test YAML's upload needs none."""
    from ci import skipci
    from ci.pipeline.bootstrap_mode import load_document, parse_bootstrap_platform, render_bootstrap

    resolve_build(repo, env)  # inside Buildkite, no BUILDKITE_COMMIT: exit 2 before any work
    chosen = parse_bootstrap_platform(options.platform, relative)
    if options.scope != "diff":
        log(f"--scope {options.scope} is ignored for {path.name} (bootstrap mode)")
    text = files.read_text(path, f"invalid bootstrap steps YAML for {path}")
    document = load_document(text, str(path))
    decided = skipci.decision(repo, env=env, fetch=not options.dry_run)
    rendered = render_bootstrap(document, decided, chosen)
    for line in rendered.log:
        log(line)
    emit(rendered.pipeline, relative, upload=options.upload, dry_run=options.dry_run)


def emit(
    pipeline: Mapping[str, Any],
    source: str,
    *,
    upload: bool,
    dry_run: bool,
    log: Callable[[str], None] = log,
) -> None:
    """Validate against Buildkite's schema, then upload, or print (stdout: the YAML alone):
    the one way out for every pipeline we produce."""
    require_valid(pipeline, source)
    text = yamlio.dumps(dict(pipeline))
    argv = ("buildkite-agent", "pipeline", "upload")
    plan = door.Plan((door.Command(argv, "upload the rendered pipeline", stdin=text),))
    if upload and not dry_run:
        door.execute(plan, check=True)
        return
    sys.stdout.write(text)
    sys.stdout.flush()
    if dry_run:
        door.execute(plan, dry_run=True, log_dry_run=True, log=log)
