"""Plan rows from the values the real bootstraps and uploads compute.

Nothing here decides what CI runs, so the plan cannot drift from the uploads:
rocm reads `ci.amd.bootstrap.plan_pipeline`; cuda and npu
`ci.bootstraps.bootstrap_plan`, each upload gate evaluated by `ci.pipeline.ifexpr`,
then its test YAML through `render_upload`; xpu `ci.bootstraps.intel_pipeline`.
Every pipeline that would be uploaded must pass the schema check.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ci import bootstraps
from ci.amd import bootstrap, render, suites
from ci.errors import Failure, TaskError
from ci.pipeline import bootstrap_mode, ifexpr, model
from ci.pipeline.bootstrap_mode import BootstrapPlatform
from ci.pipeline.registries import Registries
from ci.pipeline.render import Dropped
from ci.pipeline.upload import UploadInputs, pipeline_file, render_upload
from ci.plan.model import NOT_EVALUATED, PlannedPipeline, PlatformPlan
from ci.plan.steps import labels_in, one_line, verdict, walk
from ci.schema import require_valid
from ci.skipci import Decision
from ci.target import MAIN

if TYPE_CHECKING:
    from ci.diff import Diff
    from ci.plan.inputs import PlanInputs


@dataclass
class Situation:
    """What every platform planner shares: inputs, the diff and its skip-ci decision."""

    inputs: PlanInputs
    diff: Diff
    decision: Decision
    known_labels: set[str] = field(default_factory=set)
    files: Path = Path()  # where `.buildkite/` and `pyproject.toml` are read (head revision)

    @cached_property
    def registries(self) -> Registries:
        return Registries.for_repo(self.files)

    def skip_words(self, platform: str) -> str:
        return ", ".join(
            f"{lvl} {self.decision.gate(platform, lvl) or 'run'}" for lvl in ("l2", "l3")
        )

    def skip_reason(self) -> str:
        return f"skip-ci: {self.decision.message}"


def _finish(
    plan: PlatformPlan,
    tests: list[PlannedPipeline],
    situation: Situation,
    what: str,
    jobs: int | None = None,
) -> None:
    """Status and reason from what runs (`jobs`: the test jobs, when not every step of
    `tests` is one). An error is the caller's to report: it wins over both."""
    jobs = sum(len(p.steps) for p in tests) if jobs is None else jobs
    why = "; ".join(f"{p.name}: {p.reason}" for p in tests if p.reason)
    plan.status = "run" if jobs else "skip"
    if jobs:
        plan.reason = f"{jobs} test job(s) in {what}"
    elif situation.decision.skip_all or (
        tests and all(p.reason.startswith("skip-ci") for p in tests)
    ):
        plan.reason = situation.skip_reason()
    else:
        plan.reason = f"no test job runs ({why})" if why else "no test job runs"


def plan_rocm(situation: Situation, plan: PlatformPlan) -> None:
    inputs = situation.inputs
    amd_inputs = bootstrap.Inputs.of_branch(inputs.branch, nightly=inputs.nightly)
    # The bootstrap's log lines (`Run all: 0`, `AMD test suites: …`) are its own;
    # the plan reports the same facts in its output, so they stay off plan's stderr.
    outcome = bootstrap.plan_pipeline(
        situation.files,
        {},
        labels="\n".join(inputs.labels),
        diff=situation.diff,
        note=lambda _line: None,
        inputs=amd_inputs,
    )
    chosen = [*outcome.kept, *(s for s, _ in outcome.skipped)]
    name = " + ".join(s.group for s in chosen) or "AMD suites"
    files = ", ".join(f".buildkite/amd/{s.file}" for s in chosen)
    pipeline = PlannedPipeline(name, files or None)
    pipeline.dropped += [
        Dropped(s.spec, (), "skip-ci", f"{word}: {situation.decision.message}")
        for s, word in outcome.skipped
    ]
    if outcome.pipeline is None:
        pipeline.status = "not-uploaded"
        pipeline.reason = f"{situation.skip_reason()} ({bootstrap.NOTHING_LEFT})"
    else:
        pipeline.steps, dropped = walk(model.parse(outcome.pipeline).steps, inputs.context())
        pipeline.dropped += dropped
        mirror = f"not in mirror_hardwares of {outcome.mirror_hw}"
        pipeline.dropped += [
            *(Dropped(label, (), "mirror-hw", mirror) for label in outcome.not_mirrored),
            *(
                Dropped(g, (), "empty-group", f"every step is {mirror}")
                for g in outcome.empty_groups
            ),
            *(
                Dropped(label, (group,), "duplicate", "identical to a step of an earlier suite")
                for group, label in outcome.duplicates
            ),
        ]
        run_all, precompiled, _ = bootstrap.precompiled_choice(
            amd_inputs, list(situation.diff.paths or ())
        )
        plan.notes.append(f"RUN_ALL={int(run_all)} VLLM_USE_PRECOMPILED={precompiled}")
    plan.pipelines.append(pipeline)
    image = render.image_build_group()["group"]  # builds the image the test jobs run in
    tests = sum(s.groups[:1] != (image,) for s in pipeline.steps)
    _finish(plan, [pipeline], situation, name, jobs=tests)
    why = []
    if outcome.notice:  # the selection's own word that its fallback chose (ci.amd.suites)
        labels = ", ".join(s.label for s in suites.SUITES)
        fallback = " + ".join(s.name for s in chosen)
        why.append(
            f"no AMD suite label ({labels}): the AMD bootstrap falls back to the {fallback} suite"
        )
    if tests:
        why.append(AMD_WHOLE)
    plan.why = "; ".join(why)


# Neither bootstrap filters steps by `source_file_dependencies` (only the CUDA and NPU
# uploads do): every step of a chosen suite runs, whatever the change touched.
AMD_WHOLE = "AMD suites run whole (no source-file filter)"
INTEL_WHOLE = "the Intel pipeline runs whole (no source-file filter)"


def plan_upload(situation: Situation, plan: PlatformPlan) -> None:
    """CUDA or NPU: the bootstrap's gates, then every child pipeline it would upload."""
    inputs, decision = situation.inputs, situation.decision
    ctx = inputs.context()
    platform: BootstrapPlatform = "npu" if plan.platform == "npu" else "cuda"
    made = bootstraps.bootstrap_plan(platform, situation.files, decision)
    rendered = made.rendered
    require_valid(rendered.pipeline, made.file)

    boot = PlannedPipeline(f"{platform} bootstrap", made.file)
    boot.steps, dropped = walk(rendered.tree.steps, ctx)
    # Under skip-all the gates admit only scheduled builds: a false gate is skip-ci's doing.
    boot.dropped = [replace(d, reason="skip-ci") if decision.skip_all else d for d in dropped]
    boot.dropped += [
        Dropped(u.label, (), "skip-ci", f"omitted: {decision.message}")
        for u in made.uploads
        if u.key in rendered.omitted
    ]
    plan.pipelines.append(boot)

    tests: list[PlannedPipeline] = []
    for upload in made.uploads:
        child = PlannedPipeline(
            upload.key.removeprefix("upload-").removesuffix("-pipeline"), upload.file
        )
        tests.append(child)
        plan.pipelines.append(child)
        gate = upload.gate
        value, shown = (gate, "") if isinstance(gate, bool) else verdict([gate], ctx)
        if value is False:
            child.status = "not-uploaded"
            child.reason = (
                situation.skip_reason()
                if gate is False or decision.skip_all
                else f"upload step's if is false ({_gate_needs(str(gate), inputs)})"
            )
            continue
        if value is None:
            child.status = "conditional"
            child.reason = f"upload step's if: {NOT_EVALUATED}: {one_line(shown)}"
        try:
            _render_child(situation, child)
        except TaskError as exc:
            plan.errors += list(exc.problems)
            child.status = "not-uploaded"
            child.reason = f"upload-pipeline fails: {exc.problems[0]}"
            child.steps = []
    _finish(plan, tests, situation, ", ".join(p.name for p in tests if p.steps))


def _gate_needs(gate: str, inputs: PlanInputs) -> str:
    """Why a false upload gate is false, in words (from the gate's own labels)."""
    if inputs.branch == MAIN:
        env = ", ".join(f"{k}={v}" for k, v in inputs.env().items()) or "no schedule env"
        return f"false for a main build with {env}"
    wanted = sorted(labels_in(ifexpr.parse(gate)))
    if wanted:
        names = " or ".join(repr(w) for w in wanted)
        return f"needs label {names}, or a main or scheduled build"
    return "main or scheduled builds only"


def bootstrap_labels() -> set[str]:
    """Every PR label a bootstrap tests: AMD suite labels, CUDA/NPU gates of normal CI."""
    found = {s.label for s in suites.SUITES}
    normal = Decision(False, False, "")
    for platform in ("cuda", "npu"):
        for each in bootstrap_mode.gates(normal, platform).by_key().values():
            if not isinstance(each, bool):
                found |= labels_in(each)
    return found


def _render_child(situation: Situation, child: PlannedPipeline) -> None:
    inputs = situation.inputs
    path = pipeline_file(situation.files, child.file or "")
    build = UploadInputs(
        branch=inputs.branch,
        schedule=inputs.env(),
        changed=lambda: situation.diff.paths,
        mirror_hw=inputs.mirror_hw or "",
    )
    child.scope, rendered = render_upload(
        situation.files, path, "auto", build, situation.registries
    )
    presets = {id(k.step): k.preset for k in rendered.kept}
    for kept in rendered.kept:
        for text in kept.conditions:
            situation.known_labels.update(labels_in(ifexpr.parse(text)))
    child.steps, dropped = walk(rendered.tree.steps, inputs.context(), presets=presets)
    under = {"source-filter": "no change under "}
    child.dropped = [
        replace(d, detail=under.get(d.reason, "") + d.detail) for d in rendered.dropped
    ] + dropped
    if rendered.bypassed_by:
        child.reason = f"source filter bypassed by {rendered.bypassed_by}"
    if rendered.problems:
        raise Failure(*(f"{child.file}: {p}" for p in dict.fromkeys(rendered.problems)))
    require_valid(rendered.pipeline, child.file or str(path))
    if not child.steps and not child.reason:
        child.reason = "every step dropped"


def plan_xpu(situation: Situation, plan: PlatformPlan) -> None:
    pipeline = PlannedPipeline("intel", bootstraps.INTEL_PIPELINE)
    plan.pipelines.append(pipeline)
    rewritten, word = bootstraps.intel_pipeline(situation.files, situation.decision)
    if rewritten is None:
        pipeline.status, pipeline.reason = "not-uploaded", f"{word}: {situation.decision.message}"
        plan.status, plan.reason = "skip", situation.skip_reason()
        return
    require_valid(model.emit(rewritten), bootstraps.INTEL_PIPELINE)
    pipeline.steps, pipeline.dropped = walk(rewritten.steps, situation.inputs.context())
    _finish(plan, [pipeline], situation, "intel")
    plan.why = INTEL_WHOLE if pipeline.steps else ""
