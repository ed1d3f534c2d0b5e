"""Bootstrap mode of the uploader: `if` gates on `bootstrap-upload-steps.yml`.

The CUDA and NPU bootstrap files list an image build and one upload step per tier;
which may run depends on the skip-ci decision and on what Buildkite knows at upload
(branch, PR labels, schedule env). The gates are the original's exact `if` strings,
injected by step key; false drops the step, true removes the key. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from ci import topology, yamlio
from ci.errors import Failure, UserError
from ci.pipeline import ifexpr, model
from ci.pipeline.ifexpr import (
    Compare,
    Env,
    Expr,
    Paren,
    all_of,
    any_of,
    branch_eq,
    branch_ne,
    env_eq,
)
from ci.platforms import Platform, platform_option

if TYPE_CHECKING:
    from ci.skipci import Decision

BootstrapPlatform = Literal["cuda", "npu"]
Gate = Expr | bool  # True: no `if`; False: the step is omitted

MAIN: Final = "main"
IMAGE_KEYS: Final = frozenset(
    {"image-build", "image-build-a2", "image-build-a3", "image-build-a5", "image-build-310p"}
)
UPLOAD_KEYS: Final = topology.upload_keys()  # ready, merge, nightly, weekly


# The labels and schedule variables are the topology's (one source for every platform).
_LABEL = topology.LABELS
_NIGHTLY, _WEEKLY, _NON_CRITICAL = topology.SCHEDULE_ENV

# The named gate expressions. Each reference to another name keeps its own
# parentheses (`_p`, always one more pair), so the text is the spec's, character for character.
_p = Paren

NIGHTLY_MAIN: Final[Expr] = all_of(branch_eq(MAIN), env_eq(_NIGHTLY, "1"))
NIGHTLY_LABEL: Final[Expr] = any_of(
    _p(NIGHTLY_MAIN), _p(all_of(branch_ne(MAIN), ifexpr.LabelIncludes(_LABEL[topology.NIGHTLY])))
)
WEEKLY_E2E: Final[Expr] = all_of(branch_eq(MAIN), env_eq(_WEEKLY, "1"))
WEEKLY_MAIN: Final[Expr] = all_of(
    branch_eq(MAIN), _p(any_of(env_eq(_WEEKLY, "1"), env_eq(_NON_CRITICAL, "1")))
)
WEEKLY_LABEL: Final[Expr] = any_of(
    _p(WEEKLY_MAIN), _p(all_of(branch_ne(MAIN), ifexpr.LabelIncludes(_LABEL[topology.WEEKLY])))
)
READY_LABEL: Final[Expr] = all_of(branch_ne(MAIN), ifexpr.LabelIncludes(_LABEL[topology.READY]))
MERGE_LABEL: Final[Expr] = all_of(branch_ne(MAIN), ifexpr.LabelIncludes(_LABEL[topology.MERGE]))
MERGE_MAIN: Final[Expr] = all_of(
    branch_eq(MAIN),
    *(Compare(Env(name), "!=", "1") for name in topology.SCHEDULE_ENV),
)
READY_UPLOAD: Final[Expr] = any_of(_p(WEEKLY_E2E), _p(READY_LABEL))
MERGE_UPLOAD: Final[Expr] = any_of(_p(WEEKLY_E2E), _p(any_of(_p(MERGE_MAIN), _p(MERGE_LABEL))))


@dataclass(frozen=True)
class Gates:
    """The five gates of one bootstrap file, before the final wrapping."""

    image: Gate
    ready: Gate
    merge: Gate
    nightly: Gate
    weekly: Gate

    def by_key(self, image_keys: Iterable[str] = IMAGE_KEYS) -> dict[str, Gate]:
        levels = zip(UPLOAD_KEYS, (self.ready, self.merge, self.nightly, self.weekly), strict=True)
        return {**dict.fromkeys(image_keys, self.image), **dict(levels)}


def gates(decision: Decision, platform: BootstrapPlatform) -> Gates:
    """The gates of each upload level: normal CI, skip-all (per platform) and yaml-gated."""
    cuda = platform == "cuda"
    ready_up: Gate = READY_UPLOAD if cuda else READY_LABEL
    merge_up: Gate = MERGE_UPLOAD if cuda else False
    weekly_lbl: Gate = WEEKLY_LABEL if cuda else False
    if decision.skip_all:
        if cuda:
            image = any_of(_p(NIGHTLY_MAIN), _p(WEEKLY_MAIN))
            return Gates(image, WEEKLY_E2E, WEEKLY_E2E, NIGHTLY_MAIN, WEEKLY_MAIN)
        return Gates(NIGHTLY_MAIN, False, False, NIGHTLY_MAIN, False)
    if not decision.yaml_gated:
        return Gates(True, ready_up, merge_up, NIGHTLY_LABEL, weekly_lbl)
    ready = ready_up if decision.is_run(platform, "l2") else False
    merge = merge_up if cuda and decision.is_run("cuda", "l3") else False
    parts = (ready, merge, NIGHTLY_LABEL, weekly_lbl)
    image = any_of(*(_p(p) for p in parts if not isinstance(p, bool)))
    return Gates(image, ready, merge, NIGHTLY_LABEL, weekly_lbl)


def parse_bootstrap_platform(value: str, path: str | Path) -> BootstrapPlatform:
    """`--platform` if given (cuda or npu), else the original's rule: `npu` if a path
    component is `npu`, else cuda."""
    if not value:
        return "npu" if "npu" in Path(path).parts else "cuda"
    chosen = platform_option(value)
    if chosen in (Platform.CUDA, Platform.NPU):
        return "cuda" if chosen is Platform.CUDA else "npu"
    raise UserError(
        f"--platform: bootstrap-upload-steps.yml exists for cuda and npu, got {value!r}",
    )


@dataclass
class BootstrapRendered:
    """The bootstrap steps with their gates, and what was omitted."""

    tree: model.Pipeline
    gates: dict[str, str | bool] = field(default_factory=dict)
    omitted: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    @property
    def pipeline(self) -> model.Document:
        """The gated bootstrap pipeline as it is uploaded (plain data)."""
        return model.emit(self.tree)


def load_document(text: str, source: str) -> model.Document:
    """A mapping with a `steps` list, else the original's messages (the loader's for a bad key)."""
    try:
        document = yamlio.loads(text, source=source)
    except yamlio.InvalidYAML:
        document = None
    if not isinstance(document, dict):
        raise Failure(f"invalid bootstrap steps YAML for {source}")
    if not isinstance(document.get("steps"), list):
        raise Failure(f"bootstrap steps YAML must contain steps: list in {source}")
    return document


def render_bootstrap(
    document: model.Pipeline | Mapping[str, Any],
    decision: Decision,
    platform: BootstrapPlatform,
    *,
    image_keys: Iterable[str] = IMAGE_KEYS,
) -> BootstrapRendered:
    """Inject the gates by step key, drop disabled steps and empty groups (pure)."""
    by_key = gates(decision, platform).by_key(image_keys)
    tree = model.parse(document)
    out = BootstrapRendered(tree)

    def gate(step: model.Step, _outer: object) -> model.Step | None:
        key = step.key
        if key in by_key:  # True/False stay words; an expression gets one more ( )
            chosen = by_key[key]
            out.gates[key] = chosen if isinstance(chosen, bool) else ifexpr.render(_p(chosen))
            step = step.replace(**{"if": out.gates[key]})
        condition = step.get("if")
        if condition is False or condition == "false":
            out.log.append(f"omit disabled bootstrap step {step.get('key')!r}")
            out.omitted.append(str(step.get("key")))
            return None
        if condition is True or condition == "true":
            return step.replace(**{"if": model.Step.DELETE})
        return step

    def empty(group: model.Group, _outer: object) -> None:
        out.log.append(f"omit empty group {model.name_of(group.fields)!r}")

    out.tree = tree.with_steps(model.prune(tree.steps or (), gate, on_empty=empty))
    return out
