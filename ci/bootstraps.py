"""`bootstrap --platform cuda|npu|xpu`: the first job of every pipeline (rocm: `ci.amd.bootstrap`).

CUDA and NPU: the platform's `bootstrap-upload-steps.yml` gets the bootstrap-mode
gates (`ci.pipeline.bootstrap_mode`) and tool commands instead of inline shell
(`upload-pipeline <test YAML> --upload --scope auto`, `build-image`; NPU image
steps one per row of `ci.images.variants`). XPU: gated by skip-ci (`intel l2`,
on main too), `intel/pipeline-intel.yml` runs `build-image` and `run-tests`
instead of `run-xpu-test.sh`. Every pipeline passes Buildkite's schema first.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ci import door, skipci, topology, yamlio
from ci.errors import Failure
from ci.images import variants
from ci.pipeline import bootstrap_mode, files, model
from ci.pipeline.bootstrap_mode import BootstrapPlatform
from ci.pipeline.commands import command_text
from ci.pipeline.upload import emit
from ci.platforms import Platform
from ci.target import resolve_build

if TYPE_CHECKING:
    from ci.skipci import Decision

CLI: Final = "vllm-omni-ci"
BOOTSTRAP_FILES: Final[Mapping[str, str]] = {
    "cuda": ".buildkite/cuda/bootstrap-upload-steps.yml",
    "npu": ".buildkite/npu/bootstrap-upload-steps.yml",
}
INTEL_PIPELINE: Final = topology.TABLE[-1].file  # the XPU row
INTEL_SCRIPT: Final = "run-xpu-test.sh"
XPU_COMMAND: Final = f"{CLI} build-image --platform xpu && {CLI} run-tests --platform xpu"
CUDA_IMAGE_COMMAND: Final = f"{CLI} build-image --platform cuda"
# The uploader as the old steps called it, or as a migrated step already does.
_UPLOADER = re.compile(r"(?:upload_pipeline\.py|vllm-omni-ci\s+upload-pipeline)\b(?P<args>[^\n]*)")
# Env the NPU image step no longer needs: build-image derives the tag from the variant.
_DROPPED_NPU_ENV: Final = ("VLLM_IMAGE_TAG",)


def _with_commands(step: model.Step, commands: list[str]) -> model.Step:
    """The step with `command`/`commands` replaced by `commands`, at the first one's place."""
    out: model.Document = {}
    for key, value in step.fields.items():
        if key in ("command", "commands"):
            out.setdefault("commands", commands)
        else:
            out[key] = value
    out.setdefault("commands", commands)
    return model.Step(out)


def uploaded_pipeline(step: model.Step) -> str:
    """The test YAML an upload step uploads, read from its command (shell or migrated)."""
    label = step.get("key") or step.get("label") or "<step>"
    found: list[str] = []
    for match in _UPLOADER.finditer(command_text(step.fields)):
        try:
            words = shlex.split(match.group("args"), comments=True)
        except ValueError:
            words = match.group("args").split()
        found += [w for w in words if not w.startswith(("-", "$")) and w != "auto"]
    paths = [w for w in found if w.endswith((".yml", ".yaml"))]
    if len(paths) != 1:
        raise Failure(
            f"bootstrap step {label!r}: cannot tell which test pipeline it uploads "
            f"(expected one .yml argument of upload_pipeline.py, found {paths or 'none'})",
        )
    return paths[0]


def upload_command(pipeline: str) -> str:
    return f"{CLI} upload-pipeline {shlex.quote(pipeline)} --upload --scope auto"


def _npu_image_steps(templates: Mapping[str, model.Step]) -> list[model.Step]:
    """One build step per row of the variant table; other keys from the YAML's image step."""
    first = next(iter(templates.values()), model.Step({}))
    made: list[model.Step] = []
    for row in variants.VARIANTS:
        template = templates.get(row.step_key, first)
        env = {
            k: v
            for k, v in dict(template.get("env") or {}).items()
            if k not in _DROPPED_NPU_ENV and k not in dict(variants.STEP_ENV)
        }
        step: model.Document = {"label": row.step_label, "key": row.step_key}
        step["agents"] = dict(variants.BUILD_AGENTS)
        for key, value in template.fields.items():
            if key not in ("label", "key", "agents", "env", "command", "commands", "if"):
                step[key] = copy.deepcopy(value)  # no YAML anchors in the output
        step |= {"env": {**dict(variants.STEP_ENV), **env}, "commands": [row.build_command()]}
        made.append(model.Step(step))
    return made


def _image_depends(value: Any, templates: Mapping[str, model.Step], generated: list[str]) -> Any:
    """`depends_on` with each replaced NPU image key expanded to the generated keys."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not any(isinstance(n, str) and n in templates for n in names):
        return value
    out: list[Any] = []
    for name in names:
        for new in generated if isinstance(name, str) and name in templates else [name]:
            if new not in out:
                out.append(new)
    return out


def _shown(step: model.Step) -> str:
    """A step's old commands in a few words: the uploader's call (else the first line),
    cut at 72 characters, and how many lines there were."""
    lines = [line.strip() for line in command_text(step.fields).splitlines() if line.strip()]
    found = next((m for m in map(_UPLOADER.search, lines) if m), None)
    line = found.string[found.start() :] if found else lines[0] if lines else "(none)"
    cut = line if len(line) <= 72 else line[:71] + "…"
    return cut + (f" ({len(lines)} lines)" if len(lines) > 1 else "")


def _replaced(notes: list[str] | None, step: model.Step, new: str) -> None:
    """One `note:` line for a step whose commands the rewrite replaced (none when a file
    migrated by hand already has them): a dry run shows what it changed, not just the result."""
    if notes is not None and command_text(step.fields) != new:
        name = step.key or model.name_of(step.fields)
        notes.append(f"note: step {name!r}: {_shown(step)} → {new}")


def rewrite_steps(
    document: model.Pipeline | Mapping[str, Any],
    platform: BootstrapPlatform,
    notes: list[str] | None = None,
) -> tuple[model.Pipeline, frozenset[str]]:
    """The bootstrap file with tool commands instead of shell; also the image step keys.
    `notes` gets a `note:` line per step whose commands were replaced."""
    tree = model.parse(document)
    templates = {
        s.key: s for s, _ in model.leaves(tree.steps or ()) if s.key in bootstrap_mode.IMAGE_KEYS
    }
    generated = _npu_image_steps(templates) if platform == "npu" and templates else []
    keys = [s.key for s in generated]
    if generated and notes is not None:  # one build step per image variant, by key
        made = {step.key: step for step in generated}
        for key, template in templates.items():
            if key in made:
                _replaced(notes, template, command_text(made[key].fields))
            else:
                gone = "none (not an image variant)"
                notes.append(f"note: step {key!r}: {_shown(template)} → {gone}")
        notes.extend(
            f"note: step {key!r}: added (image variant) → {command_text(made[key].fields)}"
            for key in keys
            if key not in templates
        )
    placed = False

    def rewrite(step: model.Step, _outer: object) -> model.Step | list[model.Step] | None:
        nonlocal placed
        if step.key in templates:
            if not generated:
                _replaced(notes, step, CUDA_IMAGE_COMMAND)
                return _with_commands(step, [CUDA_IMAGE_COMMAND])
            first, placed = not placed, True
            return generated if first else None  # the variants stand where the first image was
        if generated and "depends_on" in step:
            step = step.replace(depends_on=_image_depends(step["depends_on"], templates, keys))
        if step.key in bootstrap_mode.UPLOAD_KEYS:
            command = upload_command(uploaded_pipeline(step))
            _replaced(notes, step, command)
            step = _with_commands(step, [command])
        return step

    rewritten = tree.with_steps(model.prune(tree.steps or (), rewrite, keep_empty=True))
    return rewritten, frozenset(keys) if generated else frozenset(templates)


@dataclass(frozen=True)
class UploadStep:
    """One upload step of a bootstrap file: the test YAML it uploads, and its gate."""

    key: str
    label: str
    file: str
    gate: str | bool  # the `if` Buildkite evaluates; True: always, False: omitted


@dataclass(frozen=True)
class BootstrapPlan:
    """What a CUDA or NPU bootstrap uploads (`rendered`), and each of its upload steps,
    omitted ones included (`plan` reports them from this one value)."""

    file: str
    rendered: bootstrap_mode.BootstrapRendered
    uploads: tuple[UploadStep, ...]
    rewrites: tuple[str, ...] = ()  # a `note:` line per step whose commands were replaced


def bootstrap_plan(platform: BootstrapPlatform, repo: Path, decision: Decision) -> BootstrapPlan:
    """The platform's bootstrap file rewritten (no inline shell), then gated by `decision`."""
    relative = BOOTSTRAP_FILES[platform]
    path = repo / relative
    if not files.exists(path):  # a looping or dangling link is there, and unreadable below
        raise Failure(f"missing bootstrap steps file: {path}")
    text = files.read_text(path, f"invalid bootstrap steps YAML for {path}")
    document = bootstrap_mode.load_document(text, str(path))
    rewrites: list[str] = []
    rewritten, image_keys = rewrite_steps(document, platform, rewrites)
    rendered = bootstrap_mode.render_bootstrap(
        rewritten, decision, platform, image_keys=bootstrap_mode.IMAGE_KEYS | image_keys
    )
    omitted = set(rendered.omitted)
    uploads = tuple(
        UploadStep(
            key=step.key,
            label=model.name_of(step.fields),
            file=uploaded_pipeline(step),
            gate=False if step.key in omitted else rendered.gates.get(step.key, True),
        )
        for step, _ in model.leaves(rewritten.steps or ())
        if step.key in bootstrap_mode.UPLOAD_KEYS
    )
    return BootstrapPlan(relative, rendered, uploads, tuple(rewrites))


def plan_pipeline(
    platform: BootstrapPlatform, repo: Path, env: Mapping[str, str], *, fetch: bool = True
) -> model.Document:
    """The gated, rewritten bootstrap pipeline for CUDA or NPU (git via the diff resolver;
    `fetch=False`: a missing PR base is not fetched)."""
    decided = skipci.decision(repo, env=env, fetch=fetch)
    planned = bootstrap_plan(platform, repo, decided)
    rendered = planned.rendered
    for line in planned.rewrites:
        door.note(line)
    for line in rendered.log:
        door.note(line)
    for key, gate in rendered.gates.items():
        shown = "always" if gate is True else "omitted" if gate is False else f"if {gate}"
        door.note(f"{key}: {shown}")
    return rendered.pipeline


def rewrite_intel(
    document: model.Pipeline | Mapping[str, Any], source: str, notes: list[str] | None = None
) -> model.Pipeline:
    """`pipeline-intel.yml` with the test step running vllm-omni-ci instead of the script
    (`notes`: a `note:` line for it, unless it already did)."""
    tree = model.parse(document)
    if tree.steps is None:
        raise Failure(f"invalid pipeline YAML: {source}")
    found = 0

    def rewrite(step: model.Step, _outer: object) -> model.Step:
        nonlocal found
        text = command_text(step.fields)
        if INTEL_SCRIPT not in text and XPU_COMMAND not in text:
            return step
        found += 1
        _replaced(notes, step, XPU_COMMAND)
        return _with_commands(step, [XPU_COMMAND])

    rewritten = tree.with_steps(model.prune(tree.steps, rewrite, keep_empty=True))
    if not found:
        raise Failure(f"{source}: no step runs {INTEL_SCRIPT}; nothing to rewrite")
    return rewritten


def intel_pipeline(
    repo: Path, decision: Decision, notes: list[str] | None = None
) -> tuple[model.Pipeline | None, str | None]:
    """The rewritten Intel pipeline, or (None, skip word) when skip-ci stops `intel l2`."""
    word = decision.gate("intel", "l2")
    if word is not None:
        return None, word
    path = repo / INTEL_PIPELINE
    if not files.exists(path):
        raise Failure(f"missing pipeline file: {path}")
    document = yamlio.load(path)
    if not isinstance(document, dict):
        raise Failure(f"invalid pipeline YAML: {path}")
    return rewrite_intel(document, str(path), notes), None


def run(platform: Platform, repo: Path, *, dry_run: bool) -> None:
    """Decide, render, validate, then upload (or print with `--dry-run`). Not rocm: its
    bootstrap (`ci.amd.bootstrap`) shares none of this module, so a rocm job loads none of it."""
    source = dict(os.environ)
    # The build first: inside Buildkite a missing BUILDKITE_COMMIT stops here (exit 2),
    # outside it the `local build: …` line says what the rule chose.
    resolve_build(repo, source)
    if platform is Platform.XPU:
        door.note("--- 🛠 Preparing Intel pipeline")
        notes: list[str] = []
        decided = skipci.decision(repo, env=source, fetch=not dry_run)
        tree, word = intel_pipeline(repo, decided, notes)
        for line in notes:
            door.note(line)
        if tree is None:
            door.note(f"intel/l2: {word}")
            if word == "skip-all":
                door.execute(
                    door.Plan((skipci.annotate_command(),)), dry_run=dry_run, log_dry_run=True
                )
            door.note("Intel pipeline not uploaded (skip-ci)")
            return
        pipeline, source_name = model.emit(tree), INTEL_PIPELINE
    else:
        chosen: BootstrapPlatform = "cuda" if platform is Platform.CUDA else "npu"
        pipeline = plan_pipeline(chosen, repo, source, fetch=not dry_run)
        source_name = BOOTSTRAP_FILES[chosen]
    emit(pipeline, source_name, upload=True, dry_run=dry_run, log=door.note)
