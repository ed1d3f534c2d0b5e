"""`bootstrap --platform cuda|npu|xpu`: the first job of the CUDA, NPU and Intel pipelines.

CUDA and NPU (spec §4.1, §4.2): the platform's `bootstrap-upload-steps.yml`
gets the bootstrap-mode gates (`ci.pipeline.bootstrap_mode`), and its steps are
rewritten so that no inline shell is left: each upload step runs
`vllm-omni-ci upload-pipeline <test YAML> --upload --scope auto` (the task
makes the choice the `EXTRA="--all"` shell made), the CUDA image step runs
`vllm-omni-ci build-image --platform cuda`, and the NPU image steps are
generated from the variant table (`ci.images.variants`), one per variant.

XPU (spec §4.3): gate with skip-ci (`intel l2`), then upload
`intel/pipeline-intel.yml` with its test step running `build-image` and
`run-tests` for xpu instead of `run-xpu-test.sh`.

Every pipeline is checked against Buildkite's schema before it leaves;
`--dry-run` prints it (the YAML alone on stdout) and uploads nothing.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ci import door
from ci.errors import FAILURE, UserError
from ci.pipeline import bootstrap_mode, files
from ci.pipeline.bootstrap_mode import BootstrapPlatform
from ci.pipeline.mirror import command_text
from ci.platforms import Platform

if TYPE_CHECKING:
    from ci.skipci import Decision

CLI: Final = "vllm-omni-ci"
BOOTSTRAP_FILES: Final[Mapping[str, str]] = {
    "cuda": ".buildkite/cuda/bootstrap-upload-steps.yml",
    "npu": ".buildkite/npu/bootstrap-upload-steps.yml",
}
INTEL_PIPELINE: Final = ".buildkite/intel/pipeline-intel.yml"
INTEL_SCRIPT: Final = "run-xpu-test.sh"
XPU_COMMAND: Final = f"{CLI} build-image --platform xpu && {CLI} run-tests --platform xpu"
CUDA_IMAGE_COMMAND: Final = f"{CLI} build-image --platform cuda"
SKIP_ANNOTATION: Final = ":memo: CI skipped — docs or pytest skip-mark changes only"
# The uploader as the old steps called it, or as a migrated step already does.
_UPLOADER = re.compile(r"(?:upload_pipeline\.py|vllm-omni-ci\s+upload-pipeline)\b(?P<args>[^\n]*)")
# Env the NPU image step no longer needs: build-image derives the tag from the variant.
_DROPPED_NPU_ENV: Final = ("VLLM_IMAGE_TAG",)


def log(message: str) -> None:
    door.note(message)


# --------------------------------------------------------------------------- step rewriting


def _with_commands(step: Mapping[str, Any], commands: list[str]) -> dict[str, Any]:
    """The step with `command`/`commands` replaced by `commands`, at the same position."""
    out: dict[str, Any] = {}
    placed = False
    for key, value in step.items():
        if key in ("command", "commands"):
            if not placed:
                out["commands"] = commands
                placed = True
            continue
        out[key] = value
    if not placed:
        out["commands"] = commands
    return out


def uploaded_pipeline(step: Mapping[str, Any]) -> str:
    """The test YAML an upload step uploads, read from its command (shell or migrated)."""
    label = step.get("key") or step.get("label") or "<step>"
    found: list[str] = []
    for match in _UPLOADER.finditer(command_text(step)):
        try:
            words = shlex.split(match.group("args"), comments=True)
        except ValueError:
            words = match.group("args").split()
        found += [w for w in words if not w.startswith(("-", "$")) and w not in ("auto",)]
    paths = [w for w in found if w.endswith((".yml", ".yaml"))]
    if len(paths) != 1:
        raise UserError(
            f"bootstrap step {label!r}: cannot tell which test pipeline it uploads "
            f"(expected one .yml argument of upload_pipeline.py, found {paths or 'none'})",
            code=FAILURE,
        )
    return paths[0]


def upload_command(pipeline: str) -> str:
    return f"{CLI} upload-pipeline {shlex.quote(pipeline)} --upload --scope auto"


def _npu_image_steps(templates: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One build step per row of the variant table; other keys from the YAML's image step."""
    from ci.images import variants

    first = next(iter(templates.values()), {})
    made: list[dict[str, Any]] = []
    for row in variants.VARIANTS:
        template = templates.get(row.step_key, first)
        env = {
            k: v
            for k, v in dict(template.get("env") or {}).items()
            if k not in _DROPPED_NPU_ENV and k not in dict(variants.STEP_ENV)
        }
        step: dict[str, Any] = {"label": row.step_label, "key": row.step_key}
        step["agents"] = dict(variants.BUILD_AGENTS)
        for key, value in template.items():
            if key not in ("label", "key", "agents", "env", "command", "commands", "if"):
                step[key] = copy.deepcopy(value)  # no YAML anchors in the output
        step["env"] = {**dict(variants.STEP_ENV), **env}
        step["commands"] = [row.build_command()]
        made.append(step)
    return made


def rewrite_steps(
    document: Mapping[str, Any], platform: BootstrapPlatform
) -> tuple[dict[str, Any], frozenset[str]]:
    """The bootstrap file with tool commands instead of shell; also the image step keys."""
    steps = document["steps"]
    templates: dict[str, Mapping[str, Any]] = {}

    def collect(entries: Sequence[Any]) -> None:
        for step in entries:
            if isinstance(step, dict) and isinstance(step.get("steps"), list):
                collect(step["steps"])
            elif isinstance(step, dict) and step.get("key") in bootstrap_mode.IMAGE_KEYS:
                templates[str(step["key"])] = step

    collect(steps)
    generated = _npu_image_steps(templates) if platform == "npu" and templates else []
    image_keys = (
        frozenset(s["key"] for s in generated) if generated else frozenset(templates) or frozenset()
    )
    placed = False

    def depends(value: Any) -> Any:
        if not generated:
            return value
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list):
            return value
        image = [isinstance(n, str) and n in templates for n in names]
        if not any(image):
            return value
        out: list[Any] = []
        for name, is_image in zip(names, image, strict=True):
            for new in [s["key"] for s in generated] if is_image else [name]:
                if new not in out:
                    out.append(new)
        return out

    def walk(entries: Sequence[Any]) -> list[Any]:
        nonlocal placed
        out: list[Any] = []
        for step in entries:
            if not isinstance(step, dict):
                out.append(step)
                continue
            if isinstance(step.get("steps"), list):
                out.append({**step, "steps": walk(step["steps"])})
                continue
            key = step.get("key")
            if key in templates:
                if generated:
                    if not placed:
                        out.extend(generated)
                        placed = True
                    continue
                out.append(_with_commands(step, [CUDA_IMAGE_COMMAND]))
                continue
            new = dict(step)
            if "depends_on" in new:
                new["depends_on"] = depends(new["depends_on"])
            if key in bootstrap_mode.UPLOAD_KEYS:
                new = _with_commands(new, [upload_command(uploaded_pipeline(step))])
            out.append(new)
        return out

    return {**document, "steps": walk(steps)}, image_keys


# --------------------------------------------------------------------------- CUDA / NPU


def render_bootstrap_file(
    platform: BootstrapPlatform, repo: Path, decision: Decision
) -> tuple[dict[str, Any], bootstrap_mode.BootstrapRendered]:
    """The platform's bootstrap file rewritten (no inline shell), then gated by `decision`.

    Returns the rewritten steps (every upload step still there) and the gated
    render; `plan` reads both, `plan_pipeline` uploads the render.
    """
    path = repo / BOOTSTRAP_FILES[platform]
    if not files.exists(path):  # a looping or dangling link is there, and unreadable below
        raise UserError(f"missing bootstrap steps file: {path}", code=FAILURE)
    text = files.read_text(path, f"invalid bootstrap steps YAML for {path}")
    document = bootstrap_mode.load_document(text, str(path))
    rewritten, image_keys = rewrite_steps(document, platform)
    rendered = bootstrap_mode.render_bootstrap(
        rewritten, decision, platform, image_keys=bootstrap_mode.IMAGE_KEYS | image_keys
    )
    return rewritten, rendered


def plan_pipeline(
    platform: BootstrapPlatform, repo: Path, env: Mapping[str, str]
) -> dict[str, Any]:
    """The gated, rewritten bootstrap pipeline for CUDA or NPU (git via the diff resolver)."""
    from ci import skipci

    _, rendered = render_bootstrap_file(platform, repo, skipci.decision(repo, env=env))
    for line in rendered.log:
        log(line)
    for key, gate in rendered.gates.items():
        shown = "always" if gate is True else "omitted" if gate is False else f"if {gate}"
        log(f"{key}: {shown}")
    return rendered.pipeline


# --------------------------------------------------------------------------- XPU


def rewrite_intel(document: Mapping[str, Any], source: str) -> dict[str, Any]:
    """`pipeline-intel.yml` with the test step running vllm-omni-ci instead of the script."""
    found = 0

    def walk(entries: Sequence[Any]) -> list[Any]:
        nonlocal found
        out: list[Any] = []
        for step in entries:
            if isinstance(step, dict) and isinstance(step.get("steps"), list):
                out.append({**step, "steps": walk(step["steps"])})
                continue
            if isinstance(step, dict):
                text = command_text(step)
                if INTEL_SCRIPT in text or XPU_COMMAND in text:
                    found += 1
                    out.append(_with_commands(step, [XPU_COMMAND]))
                    continue
            out.append(step)
        return out

    steps = document.get("steps")
    if not isinstance(steps, list):
        raise UserError(f"invalid pipeline YAML: {source}", code=FAILURE)
    rewritten = {**document, "steps": walk(steps)}
    if not found:
        raise UserError(f"{source}: no step runs {INTEL_SCRIPT}; nothing to rewrite", code=FAILURE)
    return rewritten


def plan_intel(repo: Path, env: Mapping[str, str]) -> tuple[dict[str, Any] | None, str | None]:
    """(pipeline, None) to upload, or (None, word) when skip-ci stops the build."""
    from ci import skipci

    pipeline, word = intel_pipeline(repo, skipci.decision(repo, env=env))
    if word is not None:
        log(f"intel/l2: {word}")
    return pipeline, word


def intel_pipeline(repo: Path, decision: Decision) -> tuple[dict[str, Any] | None, str | None]:
    """The rewritten Intel pipeline, or (None, skip word) when skip-ci stops `intel l2`."""
    from ci import yamlio

    word = decision.gate("intel", "l2")
    if word is not None:
        return None, word
    path = repo / INTEL_PIPELINE
    if not files.exists(path):
        raise UserError(f"missing pipeline file: {path}", code=FAILURE)
    document = yamlio.load(path)
    if not isinstance(document, dict):
        raise UserError(f"invalid pipeline YAML: {path}", code=FAILURE)
    return rewrite_intel(document, str(path)), None


def annotate_command() -> door.Command:
    """Say on the build why CI was skipped; a failure is ignored, as in resolve_skip_ci.sh."""
    return door.Command(
        ("buildkite-agent", "annotate", SKIP_ANNOTATION, "--style", "info"),
        description="say why CI was skipped",
        tolerate="",
    )


# --------------------------------------------------------------------------- entry


def run(
    platform: Platform, repo: Path, *, dry_run: bool = False, env: Mapping[str, str] | None = None
) -> None:
    """Decide, render, validate, then upload (or print with `--dry-run`)."""
    from ci.target import resolve_build

    source = dict(os.environ if env is None else env)
    if platform not in (Platform.CUDA, Platform.NPU, Platform.XPU):
        raise UserError(f"--platform: no bootstrap here for {platform}; use ci.amd.bootstrap")
    # The build first: inside Buildkite a missing BUILDKITE_COMMIT stops here (exit 2),
    # outside it the `local build: …` line says what the rule chose.
    resolve_build(repo, source)
    if platform is Platform.XPU:
        log("--- 🛠 Preparing Intel pipeline")
        pipeline, word = plan_intel(repo, source)
        if pipeline is None:
            if word == "skip-all":
                door.execute(door.Plan((annotate_command(),)), dry_run=dry_run, log_dry_run=True)
            log("Intel pipeline not uploaded (skip-ci)")
            return
        source_name = INTEL_PIPELINE
    else:
        chosen: BootstrapPlatform = "cuda" if platform is Platform.CUDA else "npu"
        pipeline = plan_pipeline(chosen, repo, source)
        source_name = BOOTSTRAP_FILES[chosen]
    from ci.pipeline.upload import emit

    emit(pipeline, source_name, upload=True, dry_run=dry_run, log=log)
