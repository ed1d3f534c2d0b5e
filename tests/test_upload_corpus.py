"""The corpus matrix: every real CUDA and NPU test YAML, rendered in six situations.

Works on a temporary copy of ../shared/vllm-omni/.buildkite/ with a
pyproject.toml generated from MARKERS.md (plus the A5 and 310P SKUs) and with
`diffusion_joy_image_accuracy` registered (tests/corpus.py). Every result must
validate against Buildkite's schema; `steps: []` is accepted only where the
spec makes the result empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ci import yamlio
from ci.pipeline.render import Rendered
from ci.pipeline.upload import render_file
from ci.schema import schema_problems
from tests.conftest import from_shared, shared_params
from tests.corpus import MISSING_KEY, make_corpus, uploader_yamls
from tests.inproc import run_task

YAMLS = from_shared(uploader_yamls, [])
PIPELINES = shared_params(lambda: YAMLS)
MODEL_DIFF = ["vllm_omni/diffusion/models/qwen_image/transformer.py"]
DOCS_DIFF = ["docs/index.md", "README.md"]
CASES: dict[str, tuple[str, list[str] | None, str | None]] = {
    "all": ("all", None, None),
    "docs-only": ("diff", DOCS_DIFF, None),
    "model-code": ("diff", MODEL_DIFF, None),
    "tests-helpers": ("diff", ["tests/helpers/mark.py"], None),
    "pipeline-itself": ("diff", [], None),  # filled with the file's own path
    "mirror-b200": ("all", None, "b200"),
}
# Where the spec makes the result empty: MIRROR_HW=b200 on files without B200
# steps, and a diff that matches no step of a file whose every step is gated.
EMPTY = {
    ("mirror-b200", ".buildkite/cuda/test-ready.yml"),
    ("mirror-b200", ".buildkite/cuda/test-merge.yml"),
    ("mirror-b200", ".buildkite/cuda/test-weekly.yml"),
    ("docs-only", ".buildkite/npu/test-npu-nightly.yml"),
    ("model-code", ".buildkite/npu/test-npu-nightly.yml"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("matrix") / "repo")


def run_case(repo: Path, case: str, pipeline: str) -> Rendered:
    scope, changed, mirror_hw = CASES[case]
    if case == "pipeline-itself":
        changed = [pipeline]
    return render_file(repo, repo / pipeline, scope=scope, changed=changed, mirror_hw=mirror_hw)


def labels(rendered: Rendered) -> list[str]:
    return [k.label for k in rendered.kept]


def leaves(steps: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict) and isinstance(step.get("steps"), list):
            found += leaves(step["steps"])
        elif isinstance(step, dict):
            found.append(step)
    return found


def test_the_matrix_covers_every_cuda_and_npu_test_yaml() -> None:
    assert uploader_yamls() == [
        ".buildkite/cuda/test-merge.yml",
        ".buildkite/cuda/test-nightly.yml",
        ".buildkite/cuda/test-ready.yml",
        ".buildkite/cuda/test-weekly.yml",
        ".buildkite/npu/test-npu-nightly.yml",
        ".buildkite/npu/test-npu-ready.yml",
    ]


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("case", list(CASES))
def test_matrix_case_validates(corpus: Path, case: str, pipeline: str) -> None:
    rendered = run_case(corpus, case, pipeline)
    assert rendered.problems == []
    assert schema_problems(rendered.pipeline) == []
    text = yamlio.dumps(rendered.pipeline)
    assert "source_file_dependencies" not in text and "mirror_hardwares" not in text  # P42
    assert "&id" not in text  # presets are copied, never aliased
    empty = rendered.pipeline["steps"] == []
    assert empty == ((case, pipeline) in EMPTY), rendered.log
    original = [s.get("label") for s in leaves(yamlio.load(corpus / pipeline)["steps"])]
    assert [k.label for k in rendered.kept] == [
        label for label in original if label in set(labels(rendered))
    ]


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_fallback_cases_keep_every_job(corpus: Path, pipeline: str) -> None:
    everything = labels(run_case(corpus, "all", pipeline))
    for case in ("tests-helpers", "pipeline-itself"):
        rendered = run_case(corpus, case, pipeline)
        assert labels(rendered) == everything
        gated = any(
            "source_file_dependencies" in s for s in leaves(yamlio.load(corpus / pipeline)["steps"])
        )
        assert (rendered.bypassed_by is not None) == gated


def test_docs_only_keeps_exactly_the_ungated_steps(corpus: Path) -> None:
    pipeline = ".buildkite/cuda/test-ready.yml"
    assert labels(run_case(corpus, "docs-only", pipeline)) == [
        "Simple · Model Executor Test",
        "Simple · Diffusion Test",
        "Simple · Engine&Entrypoints Test",
        "Simple · Other Test",
        "Diffusion · FlashAttention Test",
        "Diffusion · Offloader Test",
        "Diffusion · Cache Test",
        "Diffusion · Batch Test",
        "Diffusion · Model Test",
        "Diffusion · Other Test",
        "Tiny Model Tests · Diffusion (base)",
        "Engine&Model Executor Test",
        "Distributed Test",
        "Entrypoints Test",
    ]
    for name in YAMLS:
        ungated = [
            s.get("label")
            for s in leaves(yamlio.load(corpus / name)["steps"])
            if "source_file_dependencies" not in s
        ]
        assert labels(run_case(corpus, "docs-only", name)) == ungated


def test_model_diff_on_merge_keeps_and_drops_exactly(corpus: Path) -> None:
    rendered = run_case(corpus, "model-code", ".buildkite/cuda/test-merge.yml")
    assert labels(rendered) == [
        "Simple · Model Executor Test",
        "Simple · Diffusion Test",
        "Simple · Engine&Entrypoints Test",
        "Simple · Other Test",
        "Diffusion · LoRA Test",
        "Distributed Test",
        "Entrypoint Test with H100",
        "Entrypoint Test with L4",
        "Entrypoint Test with L4 · 2-GPU",
        "Diffusion · Qwen Image Test",
    ]
    assert [(d.label, d.reason) for d in rendered.dropped] == [
        (label, "source-filter")
        for label in (
            "TTS · Qwen3-TTS CustomVoice Test",
            "TTS · Qwen3-TTS Base Test",
            "Omni · Qwen3-Omni Test",
            "Omni · MiniCPM-o 4.5 Test",
            "Omni · MiniCPM-o 4.5 Duplex Test",
            "Diffusion · Wan22 Test",
            "Diffusion · HunyuanVideo-1.5 Test",
            "Diffusion · LingBot-Video Test",
            "Diffusion · MiniMax-H3 L3 DLO DP2 and FastH3",
            "Diffusion · MiniMax-H3 Latent Upscale and Refine",
        )
    ]


def test_model_diff_on_nightly(corpus: Path) -> None:
    rendered = run_case(corpus, "model-code", ".buildkite/cuda/test-nightly.yml")
    assert labels(rendered) == [
        ":full_moon: Tiny Model Tests · Diffusion (Multi-GPU accelerations) · 2-GPU",
        ":full_moon: Tiny Model Tests · Diffusion (Multi-GPU accelerations) · 4-GPU",
        ":full_moon: Diffusion X2I(&A&T) · Function Test with H100 · Single-GPU",
        ":full_moon: Diffusion X2I(&A&T) · Function Test with H100 · 2-GPU",
        ":full_moon: Diffusion X2I(&A&T) · Function Test with L4 · Single-GPU",
        ":full_moon: Diffusion X2I(&A&T) · Doc Test",
        ":full_moon: Diffusion X2I(&A&T) · Accuracy Test",
        ":full_moon: Diffusion X2I(&A&T) · Perf Test · Qwen-Image · Single-GPU",
        ":full_moon: Diffusion X2I(&A&T) · Perf Test · Qwen-Image · 4-GPU",
        ":full_moon: Diffusion · Distributed Test with L4 · 2-GPU",
        ":full_moon: Diffusion · Distributed Test with L4 · 3-GPU",
        ":full_moon: Diffusion · Distributed Test with L4 · 4-GPU",
        ":full_moon: Diffusion · Distributed Test with H100 · 2-GPU",
        ":full_moon: Diffusion · Distributed Test with H100 · 4-GPU",
        ":email: Nightly Collection & Email",
    ]
    groups = [g.get("group") for g in rendered.pipeline["steps"]]
    assert ":card_index_dividers: Omni Model Test" not in groups
    assert "omit empty group ':card_index_dividers: Omni Model Test'" in rendered.log


def test_b200_reroutes_nightly_by_card_count(corpus: Path) -> None:
    rendered = run_case(corpus, "mirror-b200", ".buildkite/cuda/test-nightly.yml")
    presets = {k.label: k.preset for k in rendered.kept}
    assert presets[":full_moon: Omni · Function Test with H100 · Single-GPU"] == "b200_1"
    assert presets[":full_moon: Omni · Function Test with H100 · 2-GPU"] == "b200_2"
    assert presets[":full_moon: Omni · Doc Test with L4 · 4-GPU"] == "b200_4"
    assert {p for p in presets.values() if p} <= {"b200_1", "b200_2", "b200_3", "b200_4"}
    for kept in rendered.kept:
        if kept.preset:
            assert kept.step.fields["agents"] == {"queue": "b200-k8s"}


def test_b200_keeps_npu_presets(corpus: Path) -> None:
    rendered = run_case(corpus, "mirror-b200", ".buildkite/npu/test-npu-ready.yml")
    assert [k.preset for k in rendered.kept] == [
        "a3_npu_2",
        "a2b3_npu_1",
        "a3_npu_2",
        "a5_npu_2",
        "310p_npu_1",
        "a3_npu_2",
        "a3_npu_2",
        "a3_npu_2",
        "a3_npu_2",
    ]


def test_unset_mirror_hw_prefers_h100_then_l4(corpus: Path) -> None:
    rendered = run_case(corpus, "all", ".buildkite/cuda/test-nightly.yml")
    presets = {k.label: k.preset for k in rendered.kept}
    assert presets[":full_moon: Omni · Function Test with H100 · 2-GPU"] == "h100_2"
    assert presets[":full_moon: Omni · Doc Test with L4 · 4-GPU"] == "l4_4"
    assert presets[":full_moon: Omni · MiniCPM-o 4.5 · Accuracy Test"] == "h100_2"  # (1 or 2)


def test_unmodified_corpus_nightly_names_the_unregistered_key(tmp_path: Path) -> None:
    for pyproject in (True, False):
        repo = make_corpus(tmp_path / f"raw-{pyproject}", pyproject=pyproject, register_key=False)
        done = run_task(
            "upload-pipeline", ".buildkite/cuda/test-nightly.yml", "--all", "--repo", str(repo)
        )
        assert done.returncode == 1
        assert done.stdout == ""
        assert (
            f"error: unknown source_file_dependencies '{MISSING_KEY}' in step "
            "':full_moon: JoyAI-Image-Edit · Accuracy Test'; did you mean "
            "'diffusion_qwen_image_accuracy', " in done.stderr
        )
        assert ("missing pytest marker registry" in done.stderr) is not pyproject
        assert "Traceback" not in done.stderr


def test_kept_steps_carry_their_group_and_step_conditions(corpus: Path) -> None:
    from ci.pipeline import ifexpr

    rendered = run_case(corpus, "all", ".buildkite/cuda/test-nightly.yml")
    nightly = ifexpr.Context.of("main", env={"NIGHTLY": "1"})
    email = {k.label: k for k in rendered.kept}[":email: Nightly Collection & Email"]
    assert email.conditions == (
        'build.env("NIGHTLY") == "1" && build.env("EMAIL_DISTRIBUTION") == "1"',
    )
    assert ifexpr.check(email.conditions[0], nightly) is False
    first = rendered.kept[0]
    assert first.path == (":card_index_dividers: Omni Model Test",)
    assert first.conditions == (
        'build.env("NIGHTLY") == "1" || build.pull_request.labels includes "nightly-test"',
    )
    assert all(ifexpr.check(c, nightly) for c in first.conditions)


def test_p2_the_task_reads_mirror_hw_stripped_and_lower_cased(corpus: Path) -> None:
    import os

    import yaml

    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE")}
    pipeline = ".buildkite/cuda/test-nightly.yml"
    done = run_task(
        "upload-pipeline",
        pipeline,
        "--all",
        "--repo",
        str(corpus),
        env={**env, "MIRROR_HW": " B200 "},
    )
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout) == run_case(corpus, "mirror-b200", pipeline).pipeline
    assert "b200-k8s" in done.stdout and "mithril-h100-pool" not in done.stdout
