"""One planner per platform, each calling the code its real bootstrap runs.

* rocm: `ci.amd.bootstrap.plan_pipeline` (suite selection, skip-ci per suite,
  combine, render, the mirror filter) with the plan's labels and diff;
* cuda, npu: the bootstrap file through `ci.bootstraps.rewrite_steps` and
  `ci.pipeline.bootstrap_mode.render_bootstrap` (the skip-ci gates), the gates
  evaluated by `ci.pipeline.ifexpr`, then each upload step's test YAML through
  `ci.pipeline.upload.render_file` with the scope `--scope auto` would pick;
* xpu: skip-ci (`intel l2`), then `ci.bootstraps.rewrite_intel`.

Nothing here decides what CI runs: it only reads those functions' results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ci.errors import FAILURE, UserError
from ci.plan.model import Dropped, Pipeline, PlatformPlan, Reason
from ci.plan.steps import labels_in, step_name, verdict, walk

if TYPE_CHECKING:
    from ci.diff import Diff
    from ci.pipeline.registries import Registries
    from ci.plan.inputs import PlanInputs
    from ci.skipci import Decision

LEVELS = ("l2", "l3")


@dataclass
class Situation:
    """What every platform planner shares: inputs, the diff and its skip-ci decision."""

    inputs: PlanInputs
    diff: Diff
    decision: Decision
    known_labels: set[str] = field(default_factory=set)
    _registries: Registries | None = None

    def registries(self) -> Registries:
        from ci.pipeline.registries import Registries

        if self._registries is None:
            self._registries = Registries.for_repo(self.inputs.repo)
        return self._registries

    def skip_words(self, platform: str) -> str:
        return ", ".join(f"{lvl} {self.decision.gate(platform, lvl) or 'run'}" for lvl in LEVELS)

    def skip_reason(self) -> str:
        return f"skip-ci: {self.decision.message}"


def _finish(plan: PlatformPlan, tests: list[Pipeline], situation: Situation, what: str) -> None:
    """Status and reason from what runs; an error found earlier wins."""
    if plan.errors:
        plan.status = "error"
        plan.reason = plan.errors[0]
        return
    jobs = sum(len(p.steps) for p in tests)
    if jobs:
        plan.status = "run"
        plan.reason = f"{jobs} test job(s) in {what}"
        return
    plan.status = "skip"
    if situation.decision.skip_all or (
        tests and all(p.reason.startswith("skip-ci") for p in tests)
    ):
        plan.reason = situation.skip_reason()
        return
    why = "; ".join(f"{p.name}: {p.reason}" for p in tests if p.reason)
    plan.reason = f"no test job runs ({why})" if why else "no test job runs"


# --------------------------------------------------------------------------- rocm


def plan_rocm(situation: Situation) -> PlatformPlan:
    from ci.amd import bootstrap

    inputs = situation.inputs
    plan = PlatformPlan("rocm", skip_ci=situation.skip_words("rocm"))
    outcome = bootstrap.plan_pipeline(
        inputs.repo,
        inputs.amd_env(),
        labels="\n".join(inputs.labels),
        diff=situation.diff,
        validate=False,
    )
    chosen = [*outcome.kept, *(s for s, _ in outcome.skipped)]
    name = " + ".join(s.group for s in chosen) or "AMD suites"
    files = ", ".join(f".buildkite/amd/{s.file}" for s in chosen)
    pipeline = Pipeline(name, files or None)
    pipeline.dropped += [
        Dropped(s.spec, "skip-ci", (), f"{word}: {situation.decision.message}")
        for s, word in outcome.skipped
    ]
    if outcome.pipeline is None:
        pipeline.status = "not-uploaded"
        pipeline.reason = f"{situation.skip_reason()} ({bootstrap.NOTHING_LEFT})"
    else:
        kept, dropped = walk(outcome.pipeline.get("steps") or [], inputs.context())
        pipeline.steps = kept
        pipeline.dropped += dropped
        mirror = f"not in mirror_hardwares of {outcome.mirror_hw}"
        pipeline.dropped += [
            Dropped(label, "mirror-hw", (), mirror) for label in outcome.not_mirrored
        ]
        pipeline.dropped += [
            Dropped(group, "empty-group", (), f"every step is {mirror}")
            for group in outcome.empty_groups
        ]
        pipeline.dropped += [
            Dropped(label, "duplicate", (group,), "identical to a step of an earlier suite")
            for group, label in outcome.duplicates
        ]
        amd_inputs = bootstrap.Inputs.from_env(inputs.repo, inputs.amd_env())
        run_all, precompiled, _ = bootstrap.precompiled_choice(
            amd_inputs, list(situation.diff.paths or ())
        )
        plan.notes.append(f"RUN_ALL={int(run_all)} VLLM_USE_PRECOMPILED={precompiled}")
    plan.pipelines.append(pipeline)
    _finish(plan, [_without_image(pipeline)], situation, name)
    return plan


def _without_image(pipeline: Pipeline) -> Pipeline:
    from ci.amd import render

    image = render.image_build_group()["group"]
    copy = Pipeline(pipeline.name, pipeline.file, pipeline.status, pipeline.reason)
    copy.steps = [s for s in pipeline.steps if s.groups[:1] != (image,)]
    return copy


# --------------------------------------------------------------------------- cuda / npu


def _upload_steps(steps: list[Any]) -> list[dict[str, Any]]:
    from ci.pipeline.bootstrap_mode import UPLOAD_KEYS

    found: list[dict[str, Any]] = []
    for step in steps:
        if isinstance(step, dict) and isinstance(step.get("steps"), list):
            found += _upload_steps(step["steps"])
        elif isinstance(step, dict) and step.get("key") in UPLOAD_KEYS:
            found.append(step)
    return found


def plan_upload(situation: Situation, platform: str) -> PlatformPlan:
    """CUDA or NPU: the bootstrap's gates, then every child pipeline it would upload."""
    from ci import bootstraps
    from ci.pipeline import bootstrap_mode
    from ci.pipeline import scope as scopes
    from ci.pipeline.bootstrap_mode import BootstrapPlatform

    inputs = situation.inputs
    ctx = inputs.context()
    decision = situation.decision
    chosen: BootstrapPlatform = "npu" if platform == "npu" else "cuda"
    plan = PlatformPlan(platform, skip_ci=situation.skip_words(platform))
    relative = bootstraps.BOOTSTRAP_FILES[chosen]
    path = inputs.repo / relative
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise UserError(f"missing bootstrap steps file: {path}", code=FAILURE) from None
    document = bootstrap_mode.load_document(text, str(path))
    rewritten, image_keys = bootstraps.rewrite_steps(document, chosen)
    rendered = bootstrap_mode.render_bootstrap(
        rewritten, decision, chosen, image_keys=bootstrap_mode.IMAGE_KEYS | image_keys
    )

    boot = Pipeline(f"{platform} bootstrap", relative)
    boot.steps, dropped = walk(rendered.pipeline["steps"], ctx)
    # Under skip-all the gates admit only scheduled builds: a false gate is skip-ci's doing.
    boot.dropped = [
        Dropped(d.label, "skip-ci", d.groups, d.detail) if decision.skip_all else d for d in dropped
    ]
    omitted = set(rendered.omitted)
    for step in _upload_steps(rewritten["steps"]):
        if step.get("key") in omitted:
            boot.dropped.append(
                Dropped(step_name(step), "skip-ci", (), f"omitted: {decision.message}")
            )
    plan.pipelines.append(boot)

    tests: list[Pipeline] = []
    for step in _upload_steps(document["steps"]):
        key = str(step["key"])
        child_file = bootstraps.uploaded_pipeline(step)
        child = Pipeline(f"{key.removeprefix('upload-').removesuffix('-pipeline')}", child_file)
        tests.append(child)
        plan.pipelines.append(child)
        gate = rendered.gates.get(key, True)
        if key in omitted or gate is False:
            child.status = "not-uploaded"
            child.reason = situation.skip_reason()
            continue
        value, shown = (True, "") if gate is True else verdict([str(gate)], ctx)
        if value is False:
            child.status = "not-uploaded"
            child.reason = (
                situation.skip_reason()
                if decision.skip_all
                else f"upload step's if is false ({_gate_labels(str(gate))})"
            )
            continue
        if value is None:
            child.status = "conditional"
            child.reason = f"upload step's if is not evaluated: {shown}"
        scope = scopes.resolve("auto", child_file, inputs.branch, inputs.env())
        child.scope = scope
        try:
            _render_child(situation, child, scope)
        except UserError as exc:
            plan.errors += list(exc.problems)
    _finish(plan, tests, situation, ", ".join(p.name for p in tests if p.steps))
    return plan


def _gate_labels(gate: str) -> str:
    """What would make a false upload gate true, in words (from the gate's own labels)."""
    from ci.pipeline import ifexpr

    wanted = sorted(labels_in(ifexpr.parse(gate)))
    if wanted:
        names = " or ".join(repr(w) for w in wanted)
        return f"needs label {names}, or a main or scheduled build"
    return "main or scheduled builds only"


def bootstrap_labels() -> set[str]:
    """Every PR label a bootstrap tests: AMD suite labels, CUDA/NPU gates of normal CI."""
    from ci.amd import suites
    from ci.pipeline import bootstrap_mode
    from ci.skipci import Decision

    found = {s.label for s in suites.SUITES}
    normal = Decision(False, False, "")
    for platform in ("cuda", "npu"):
        gates = bootstrap_mode.gates(normal, platform)
        for each in (gates.image, gates.ready, gates.merge, gates.nightly, gates.weekly):
            if not isinstance(each, bool):
                found |= labels_in(each)
    return found


def _render_child(situation: Situation, child: Pipeline, scope: str) -> None:
    from ci.pipeline import ifexpr
    from ci.pipeline.upload import render_file

    inputs = situation.inputs
    path = inputs.repo / (child.file or "")
    if not path.is_file():
        raise UserError(f"upload_pipeline: missing pipeline file: {path}", code=FAILURE)
    rendered = render_file(
        inputs.repo,
        path,
        scope=scope,
        changed=situation.diff.paths if scope == "diff" else None,
        mirror_hw=inputs.mirror_hw or "",
        registries=situation.registries(),
    )
    presets = {id(k.step): k.preset for k in rendered.kept}
    for kept in rendered.kept:
        for text in kept.conditions:
            situation.known_labels.update(labels_in(ifexpr.parse(text)))
    child.steps, dropped = walk(
        rendered.pipeline.get("steps") or [], inputs.context(), presets=presets
    )
    reasons: dict[str, Reason] = {
        "source-filter": "source-filter",
        "mirror-hw": "mirror-hw",
        "no-chip": "no-chip",
        "empty-group": "empty-group",
        "e2e-scope": "e2e-scope",
        "error": "error",
    }
    child.dropped = [
        Dropped(
            d.label,
            reasons[d.reason],
            d.path,
            f"no change under {d.detail}" if d.reason == "source-filter" else d.detail,
        )
        for d in rendered.dropped
    ] + dropped
    if rendered.bypassed_by:
        child.reason = f"source filter bypassed by {rendered.bypassed_by}"
    if rendered.problems:
        raise UserError(
            *(f"{child.file}: {p}" for p in dict.fromkeys(rendered.problems)), code=FAILURE
        )
    if not child.steps and not child.reason:
        child.reason = "every step dropped"


# --------------------------------------------------------------------------- xpu


def plan_xpu(situation: Situation) -> PlatformPlan:
    from ci import bootstraps, yamlio

    inputs = situation.inputs
    plan = PlatformPlan("xpu", skip_ci=situation.skip_words("xpu"))
    pipeline = Pipeline("intel", bootstraps.INTEL_PIPELINE)
    plan.pipelines.append(pipeline)
    word = situation.decision.gate("intel", "l2")
    if word is not None:
        pipeline.status = "not-uploaded"
        pipeline.reason = f"{word}: {situation.decision.message}"
        plan.status = "skip"
        plan.reason = situation.skip_reason()
        return plan
    path = inputs.repo / bootstraps.INTEL_PIPELINE
    if not path.is_file():
        raise UserError(f"missing pipeline file: {path}", code=FAILURE)
    document = yamlio.load(path)
    if not isinstance(document, dict):
        raise UserError(f"invalid pipeline YAML: {path}", code=FAILURE)
    rewritten = bootstraps.rewrite_intel(document, str(path))
    pipeline.steps, pipeline.dropped = walk(rewritten["steps"], inputs.context())
    _finish(plan, [pipeline], situation, "intel")
    return plan
