"""upload-pipeline, test mode: the P-row golden scenarios of spec §5.6.

The renderer is tested as the pure function it is, with the real seed-level
registries of the corpus (`../shared/vllm-omni/.buildkite/common/`) and the
marker registry generated from MARKERS.md; the task is tested through the
installed CLI against real git repositories, with a recording
`buildkite-agent` stand-in.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci.errors import Failure
from ci.pipeline import mirror, sourcefilter
from ci.pipeline.registries import PresetRegistry, Registries, SourceRegistry
from ci.pipeline.render import Rendered, render_test_pipeline
from tests.conftest import ROOT, StandIns
from tests.corpus import make_corpus
from tests.inproc import Outcome, run_task

NPU_NIGHTLY = ".buildkite/npu/test-npu-nightly.yml"
HF = mirror.HF_EXPORT


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("upload") / "repo")


def render(
    repo: Path,
    steps: list[Any],
    *,
    scope: str = "all",
    changed: list[str] | None = None,
    mirror_hw: str | None = None,
    path: str = ".buildkite/cuda/test-x.yml",
) -> Rendered:
    out = render_test_pipeline(
        {"steps": steps},
        scope=scope,  # type: ignore[arg-type]
        changed=changed,
        registries=Registries.for_repo(repo),
        mirror_hw=mirror_hw,
        pipeline_path=path,
    )
    return out


def kept_labels(rendered: Rendered) -> list[str]:
    return [k.label for k in rendered.kept]


def problems(repo: Path, steps: list[Any], **kw: Any) -> list[str]:
    return render(repo, steps, **kw).problems


def step(m: str | None = None, label: str = "s", **extra: Any) -> dict[str, Any]:
    made: dict[str, Any] = {"label": label}
    if m is not None:
        made["commands"] = [f'pytest -sv tests/x -m "{m}"']
    made.update(extra)
    return made


def only(rendered: Rendered) -> dict[str, Any]:
    assert rendered.problems == []
    assert len(rendered.kept) == 1, rendered.dropped
    return rendered.kept[0].step.fields


def gpus(expanded: dict[str, Any]) -> int:
    kube = expanded["plugins"][0]["kubernetes"]
    spec = kube.get("podSpec") or kube["podSpecPatch"]
    return int(spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])


# --------------------------------------------------------------------------- MIRROR_HW


def test_p1_unsupported_mirror_hw_fails_before_any_step(corpus: Path) -> None:
    with pytest.raises(Failure) as err:
        render(corpus, [{"label": "cpu", "command": "true"}], mirror_hw="b20o")
    assert err.value.problems == ("unsupported MIRROR_HW='b20o'; expected empty or 'b200'",)
    assert err.value.code == 1


@pytest.mark.parametrize("value", [" B200 ", "b200", "B200"])
def test_p2_selector_is_stripped_and_lower_cased(value: str) -> None:
    assert mirror.parse_mirror_hw(value) == "b200"
    assert mirror.parse_mirror_hw("  ") is None
    assert mirror.parse_mirror_hw(None) is None


# --------------------------------------------------------------------------- -m inference


def test_p3_h100_cards_2_composes_h100_2_with_hf_export(corpus: Path) -> None:
    got = only(render(corpus, [step("core_model and H100 and cards_2")]))
    assert got["agents"] == {"queue": "mithril-h100-pool"}
    assert gpus(got) == 2
    assert got["commands"][0] == HF
    assert "mirror_hardwares" not in got


def test_p4_b200_selector_picks_b200(corpus: Path) -> None:
    m = "H100 and B200 and cards_2"
    assert render(corpus, [step(m)]).kept[0].preset == "h100_2"
    b200 = render(corpus, [step(m)], mirror_hw="b200").kept[0]
    assert b200.preset == "b200_2"
    assert b200.step["agents"] == {"queue": "b200-k8s"}


@pytest.mark.parametrize(
    ("m", "preset", "queue", "count"),
    [
        ("H100 or L4 and cards_4", "h100_4", "mithril-h100-pool", 4),  # P5
        ("L4 and B200 and cards_4", "l4_4", "l4-k8s", 4),  # P6
        ("H100 and cards_2 and cards_3", "h100_3", "mithril-h100-pool", 3),  # P7
        ("H100 and not cards_1", "h100_4", "mithril-h100-pool", 4),  # P8
        ("H100 and not (cards_1)", "h100_1", "mithril-h100-pool", 1),  # P14 (quirk)
    ],
)
def test_p5_to_p8_and_p14_composition(
    corpus: Path, m: str, preset: str, queue: str, count: int
) -> None:
    rendered = render(corpus, [step(m)])
    assert rendered.kept[0].preset == preset
    assert rendered.kept[0].step.fields["agents"]["queue"] == queue
    assert gpus(rendered.kept[0].step.fields) == count


def test_p8_not_cards_under_b200_takes_the_highest_b200_preset(corpus: Path) -> None:
    rendered = render(corpus, [step("H100 and B200 and not cards_1")], mirror_hw="b200")
    assert rendered.kept[0].preset == "b200_4"


def test_p9_b200_drops_steps_without_b200(corpus: Path) -> None:
    rendered = render(corpus, [step("H100 and cards_2")], mirror_hw="b200")
    assert rendered.kept == []
    assert rendered.dropped[0].reason == "mirror-hw"
    assert "skip s: MIRROR_HW='b200' not in -m SKUs [h100]" in rendered.log


@pytest.mark.parametrize("m", ["B200 and cards_2", "full_model and cards_2", "H200 and cards_2"])
def test_p10_no_h100_or_l4_drops_the_step(corpus: Path, m: str) -> None:
    rendered = render(corpus, [step(m)])
    assert rendered.kept == [] and rendered.problems == []
    assert rendered.dropped[0].reason == "no-chip"


def test_p11_unregistered_count_preset(corpus: Path) -> None:
    assert problems(corpus, [step("H100 and cards_8", label="H100 8-gpu")]) == [
        "cards_8 in step 'H100 8-gpu' has no preset 'h100_8'"
    ]


def test_p12_sku_without_cards(corpus: Path) -> None:
    assert problems(corpus, [step("H100 and full_model", label="lbl")]) == [
        "step 'lbl' has a pytest -m SKU marker but no cards_* (or not cards_*); "
        "add cards_n or set mirror_hardwares to force a preset"
    ]


def test_p13_lower_case_sku_is_no_chip(corpus: Path) -> None:
    rendered = render(corpus, [step("h100 and cards_2")])
    assert rendered.kept == [] and rendered.problems == []


def test_p15_cpu_steps_are_unchanged(corpus: Path) -> None:
    cpu = step("core_model and cpu")
    assert only(render(corpus, [cpu])) == cpu
    pooled = step("core_model and H100 and cards_2", agents={"queue": "cpu_queue_premerge"})
    assert render(corpus, [pooled]).kept[0].step.fields is pooled


def test_single_quoted_and_bare_m_and_python_m(corpus: Path) -> None:
    text = "python -m pytest -m 'H100 and cards_1' && pytest -m cards_2"
    assert mirror.m_expressions(text) == ["pytest", "H100 and cards_1", "cards_2"]
    got = render(corpus, [{"label": "s", "command": text}])
    assert got.kept[0].preset == "h100_2"


# --------------------------------------------------------------------------- explicit presets


def test_p16_explicit_preset_ignores_marks(corpus: Path) -> None:
    got = only(render(corpus, [step("full_model and L4 and cards_4", mirror_hardwares="h100_1")]))
    assert got["agents"]["queue"] == "mithril-h100-pool"
    assert gpus(got) == 1


@pytest.mark.parametrize("pool", ["agents", "plugins", "image"])
def test_p17_preset_with_pool(corpus: Path, pool: str) -> None:
    bad = step(None, mirror_hardwares="l4_1", **{pool: {"queue": "gpu_1_queue"}})
    assert problems(corpus, [bad]) == [
        "step 's' sets mirror_hardwares together with agents/plugins/image; "
        "use mirror_hardwares only"
    ]


def test_p18_mapping_preset(corpus: Path) -> None:
    bad = step(None, label="bad", mirror_hardwares={"default": "h100_2", "b200": "b200_2"})
    assert problems(corpus, [bad]) == ["mirror_hardwares must be a preset string in step 'bad'"]


@pytest.mark.parametrize(
    ("value", "name"),
    [(2, "2"), ("2", "2"), ("h100_99", "h100_99"), ("not_a_preset", "not_a_preset")],
)
def test_p19_unknown_preset(corpus: Path, value: object, name: str) -> None:
    (message,) = problems(corpus, [step(None, mirror_hardwares=value)])
    assert message.startswith(f"unknown mirror_hardwares '{name}' in step 's'; known: ")
    assert message.endswith(
        "a3_npu_16, a3_npu_2, a3_npu_4, a3_npu_8, a5_npu_16, a5_npu_2, "
        "a5_npu_4, a5_npu_8, b200_1, b200_2, b200_3, b200_4, h100_1, "
        "h100_2, h100_3, h100_4, l4_1, l4_2, l4_3, l4_4"
    )


def test_p20_boolean_and_empty(corpus: Path) -> None:
    assert problems(corpus, [step(None, mirror_hardwares=True)]) == [
        "mirror_hardwares must not be a boolean in step 's'"
    ]
    for empty in ("", "  "):
        assert problems(corpus, [step(None, mirror_hardwares=empty)]) == [
            "mirror_hardwares must be a non-empty string in step 's'"
        ]


def test_p21_b200_filters_explicit_cuda_presets(corpus: Path) -> None:
    steps = [
        step(None, label=name, mirror_hardwares=name)
        for name in ("h100_4", "l4_1", "b200_2", "a2b3_npu_4")
    ]
    rendered = render(corpus, steps, mirror_hw="b200")
    assert [(k.label, k.step["agents"]["queue"]) for k in rendered.kept] == [
        ("b200_2", "b200-k8s"),
        ("a2b3_npu_4", "ascend-a2b3"),
    ]
    assert [d.label for d in rendered.dropped] == ["h100_4", "l4_1"]
    assert "skip h100_4: preset 'h100_4' is h100 hardware; MIRROR_HW='b200'" in rendered.log


def test_p22_chip_filter_runs_before_lookup(corpus: Path) -> None:
    rendered = render(corpus, [step(None, mirror_hardwares="h100_99")], mirror_hw="b200")
    assert rendered.problems == [] and rendered.kept == []


def test_p23_l4_preset_fields(corpus: Path) -> None:
    got = only(
        render(
            corpus,
            [{"label": "x", "mirror_hardwares": "l4_1", "commands": ["pytest -sv tests/example"]}],
        )
    )
    assert "mirror_hardwares" not in got
    assert got["agents"]["queue"] == "l4-k8s"
    assert got["retry"]["automatic"] == [
        {"exit_status": -1, "limit": 1},
        {"exit_status": 128, "limit": 1},
        {"signal_reason": "agent_stop", "limit": 1},
        {"signal_reason": "agent_refused", "limit": 1},
    ]
    env = got["plugins"][0]["kubernetes"]["podSpec"]["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert "VLLM_CI_HF_TOKEN" in names and "HF_TOKEN" not in names
    assert got["commands"] == [HF, "pytest -sv tests/example"]


def test_hf_export_for_command_and_string_commands(corpus: Path) -> None:
    single = only(render(corpus, [{"label": "a", "mirror_hardwares": "l4_1", "command": "c"}]))
    assert single["command"] == "c" and single["commands"] == [HF]
    text = only(render(corpus, [{"label": "b", "mirror_hardwares": "l4_1", "commands": "c"}]))
    assert text["commands"] == [HF, "c"]


def test_p24_step_retry_wins(corpus: Path) -> None:
    retry = {"automatic": [{"exit_status": 255, "limit": 2}]}
    got = only(render(corpus, [step(None, mirror_hardwares="l4_1", retry=retry, command="c")]))
    assert got["retry"] == retry


def test_p25_npu_preset(corpus: Path) -> None:
    commands = ["pytest -m 'core_model and npu and A2'"]
    got = only(
        render(corpus, [{"label": "n", "mirror_hardwares": "a2b3_npu_4", "commands": commands}])
    )
    assert got["agents"] == {"queue": "ascend-a2b3", "resource_class": "npu-4"}
    assert got["image"].endswith("${BUILDKITE_COMMIT}")
    secrets = got["plugins"][0]["kubernetes"]["podSpecPatch"]["imagePullSecrets"]
    assert secrets == [{"name": "swr-secret"}]
    assert got["commands"] == commands


def test_presets_are_copied_not_shared(corpus: Path) -> None:
    rendered = render(corpus, [step(None, label=f"s{i}", mirror_hardwares="l4_1") for i in (1, 2)])
    first, second = (k.step.fields for k in rendered.kept)
    assert first["plugins"] == second["plugins"] and first["plugins"] is not second["plugins"]
    assert "&id" not in yaml.safe_dump({"steps": [first, second]})


def test_p26_group_emptied_by_mirror_hw_is_omitted(corpus: Path) -> None:
    group = {"group": "G", "steps": [step(None, mirror_hardwares="h100_1")]}
    for scope in ("all", "diff"):
        rendered = render(corpus, [group], mirror_hw="b200", scope=scope, changed=["x"])
        assert rendered.pipeline["steps"] == []
        assert "omit empty group 'G'" in rendered.log


# --------------------------------------------------------------------------- source filter


def test_p27_registry_key_filters_by_diff(corpus: Path) -> None:
    keyed = step(None, source_file_dependencies="diffusion_qwen_image_function", command="c")
    hit = render(
        corpus,
        [keyed],
        scope="diff",
        changed=["vllm_omni/diffusion/models/qwen_image/transformer.py"],
    )
    assert kept_labels(hit) == ["s"]
    assert "source_file_dependencies" not in hit.pipeline["steps"][0]
    miss = render(corpus, [keyed], scope="diff", changed=["vllm_omni/unrelated.py"])
    assert kept_labels(miss) == [] and miss.dropped[0].reason == "source-filter"


def test_p28_unknown_key_even_with_all(corpus: Path) -> None:
    bad = step(None, label="bad", source_file_dependencies="not_a_real_key", command="c")
    (message,) = problems(corpus, [bad], scope="all")
    # Nothing close: say so, and where the keys are, instead of listing all ~55 of them.
    assert re.fullmatch(
        r"unknown source_file_dependencies 'not_a_real_key' in step 'bad'; no key is close to "
        r"it \(all \d+ keys: `source_file_dependencies:` in "
        r"\.buildkite/common/ci_source_file_dependencies\.yml\)",
        message,
    )


def test_unknown_key_suggests_the_closest_keys(corpus: Path) -> None:
    """A typo gets `did you mean` with the nearest keys (difflib), never the whole list."""
    bad = step(None, label="bad", source_file_dependencies="omni_qwen3_omni_functon", command="c")
    (message,) = problems(corpus, [bad], scope="all")
    head, hint = message.split("; ", 1)
    assert head == "unknown source_file_dependencies 'omni_qwen3_omni_functon' in step 'bad'"
    assert hint.startswith("did you mean 'omni_qwen3_omni_function'")
    assert hint.count("'") <= 6 and "source_filter_fallback" not in hint
    assert len(message) < 300


def test_p29_mixed_list(corpus: Path) -> None:
    mixed = ["omni_qwen3_omni_function", "tests/e2e/online_serving/test_qwen3_omni.py"]
    assert problems(corpus, [step(None, source_file_dependencies=mixed, command="c")]) == [
        "source_file_dependencies in step 's' mixes registry keys and path prefixes"
    ]


@pytest.mark.parametrize("value", ["source_filter_fallback", ["source_filter_fallback"]])
def test_p30_fallback_key_on_a_step(corpus: Path, value: object) -> None:
    assert problems(
        corpus, [step(None, label="L", source_file_dependencies=value, command="c")]
    ) == [
        "source_file_dependencies 'source_filter_fallback' bypasses filtering and cannot be "
        "attached to a step ('L')"
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": 1}, "source_file_dependencies must be a string key or list in step 's'"),
        (3, "source_file_dependencies must be a string key or list in step 's'"),
        (["a", 3], "source_file_dependencies must be a string key or list of strings in step 's'"),
    ],
)
def test_bad_source_file_dependencies_shapes(corpus: Path, value: object, message: str) -> None:
    assert problems(corpus, [step(None, source_file_dependencies=value, command="c")]) == [message]


def test_p31_key_union_is_deduplicated(corpus: Path) -> None:
    registries = Registries.for_repo(corpus)
    keys = ["omni_qwen3_omni_function", "tts_qwen3_tts_function"]
    prefixes = sourcefilter.prefixes_of({"source_file_dependencies": keys}, registries.sources)
    assert prefixes is not None
    shared = "vllm_omni/model_executor/models/common/snake_activation.py"
    assert prefixes.count(shared) == 1
    table = registries.sources().keys
    assert set(prefixes) == set(table[keys[0]]) | set(table[keys[1]])
    assert prefixes[: len(table[keys[0]])] == table[keys[0]]


BYPASS_STEPS: list[dict[str, Any]] = [
    {"label": "ungated", "command": "c"},
    {"label": "gated_a", "command": "c", "source_file_dependencies": "pkg/model_a/"},
    {"label": "gated_b", "command": "c", "source_file_dependencies": "pkg/model_b/"},
]


@pytest.mark.parametrize(
    ("changed", "kept", "bypassed"),
    [
        ([NPU_NIGHTLY], ["ungated", "gated_a", "gated_b"], NPU_NIGHTLY),  # P32
        (["tests/helpers/x.py"], ["ungated", "gated_a", "gated_b"], "tests/helpers/x.py"),  # P33
        (
            [".buildkite/common/ci_mirror_hardwares.yml"],
            ["ungated", "gated_a", "gated_b"],
            ".buildkite/common/ci_mirror_hardwares.yml",
        ),  # P33
        ([".buildkite/cuda/test-nightly.yml"], ["ungated"], None),  # P34
        (["pkg/model_a/transformer.py", "tests/helpers/x.py"], ["ungated", "gated_a"], None),  # P35
    ],
)
def test_p32_to_p35_fallback_bypass(
    corpus: Path, changed: list[str], kept: list[str], bypassed: str | None
) -> None:
    rendered = render(corpus, BYPASS_STEPS, scope="diff", changed=changed, path=NPU_NIGHTLY)
    assert kept_labels(rendered) == kept
    assert rendered.bypassed_by == bypassed
    if bypassed:
        assert (
            f"keep all jobs (no source_file_dependencies match; bypassed by {bypassed})"
            in rendered.log
        )


def test_fallback_missing_in_registry(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "repo")
    registry = repo / ".buildkite/common/ci_source_file_dependencies.yml"
    registry.write_text("source_file_dependencies:\n  k: [a/]\n")
    assert problems(repo, BYPASS_STEPS, scope="diff", changed=["x/y.py"]) == [
        "source_file_dependencies['source_filter_fallback'] must list shared uploader paths "
        f"in {registry}"
    ]
    # The pipeline file itself decides first: the registry is not consulted.
    rendered = render(repo, BYPASS_STEPS, scope="diff", changed=[NPU_NIGHTLY], path=NPU_NIGHTLY)
    assert rendered.problems == [] and rendered.bypassed_by == NPU_NIGHTLY


def test_p37_e2e_keeps_only_e2e_groups_unfiltered(corpus: Path) -> None:
    steps = [
        {
            "group": ":card_index_dividers: E2E Test",
            "steps": [{"label": "e", "command": "c", "source_file_dependencies": "pkg/none/"}],
        },
        {"group": "Simple Test", "steps": [{"label": "s", "command": "c"}]},
    ]
    rendered = render(corpus, steps, scope="e2e", changed=["unrelated"])
    assert kept_labels(rendered) == ["e"]
    assert [g["group"] for g in rendered.pipeline["steps"]] == [":card_index_dividers: E2E Test"]
    assert "keep 1 group(s) matching 'E2E Test'" in rendered.log
    none = render(corpus, steps[1:], scope="e2e")
    assert none.pipeline["steps"] == []
    assert "no group matching 'E2E Test' found" in none.log


@pytest.mark.parametrize(
    ("prefix", "path", "hit"),
    [
        ("vllm_omni/foo", "vllm_omni/foobar.py", False),
        ("vllm_omni/foo", "vllm_omni/foo/x.py", True),
        ("vllm_omni/foo/", "vllm_omni/foo/x.py", True),
        ("vllm_omni/foo/", "vllm_omni/foo", True),
        ("vllm_omni/foo.py", "vllm_omni/foo.py", True),
    ],
)
def test_p39_segment_matching(prefix: str, path: str, hit: bool) -> None:
    assert sourcefilter.path_matches(prefix, path) is hit


def test_p40_empty_diff_drops_every_gated_step(corpus: Path) -> None:
    steps = [*BYPASS_STEPS, {"label": "empty", "command": "c", "source_file_dependencies": []}]
    rendered = render(corpus, steps, scope="diff", changed=[], path=NPU_NIGHTLY)
    assert kept_labels(rendered) == ["ungated"]
    assert rendered.bypassed_by is None


def test_p41_empty_list_never_matches(corpus: Path) -> None:
    steps = [{"label": "empty", "command": "c", "source_file_dependencies": []}]
    assert kept_labels(render(corpus, steps, scope="diff", changed=["a.py"])) == []
    assert kept_labels(render(corpus, steps, scope="all", changed=["a.py"])) == ["empty"]


def test_unknown_diff_keeps_everything(corpus: Path) -> None:
    rendered = render(corpus, BYPASS_STEPS, scope="diff", changed=None)
    assert kept_labels(rendered) == ["ungated", "gated_a", "gated_b"]


def test_group_level_filter_and_labels(corpus: Path) -> None:
    steps = [
        {"group": "G", "source_file_dependencies": ["pkg/g/"], "steps": [{"command": "c"}]},
        {"group": "H", "steps": [{"command": "c", "source_file_dependencies": "pkg/h/"}]},
    ]
    rendered = render(corpus, steps, scope="diff", changed=["pkg/g/a.py"])
    assert [s["group"] for s in rendered.pipeline["steps"]] == ["G"]
    assert "source_file_dependencies" not in rendered.pipeline["steps"][0]
    assert "skip '<step>' (no changes under [pkg/h/])" in rendered.log
    assert "omit empty group 'H'" in rendered.log


def test_a_dropped_steps_log_line_names_three_paths_and_counts_the_rest(corpus: Path) -> None:
    """A step with 60 dependencies was one 60-path log line (issue 35): now the first three
    and a count; the drop record keeps every path for `plan`."""
    paths = [f"pkg/m{n:02}/" for n in range(60)]
    steps = [{"label": "wide", "command": "c", "source_file_dependencies": paths}]
    rendered = render(corpus, steps, scope="diff", changed=["elsewhere.py"])
    assert "skip 'wide' (no changes under [pkg/m00/, pkg/m01/, pkg/m02/, … and 57 more])" in (
        rendered.log
    )
    assert [d.detail for d in rendered.dropped] == [", ".join(paths)]
    few = render(corpus, [{**steps[0], "source_file_dependencies": paths[:3]}], scope="diff",
                 changed=["elsewhere.py"])  # fmt: skip
    assert "skip 'wide' (no changes under [pkg/m00/, pkg/m01/, pkg/m02/])" in few.log


def test_every_problem_is_reported_at_once(corpus: Path) -> None:
    steps = [
        step(None, label="a", source_file_dependencies="nope_a", command="c"),
        step(None, label="b", mirror_hardwares="nope_b"),
        step("H100 and cards_8", label="c"),
    ]
    found = problems(corpus, steps)
    assert [p.split(";")[0] for p in found] == [
        "unknown source_file_dependencies 'nope_a' in step 'a'",
        "unknown mirror_hardwares 'nope_b' in step 'b'",
        "cards_8 in step 'c' has no preset 'h100_8'",
    ]


def test_invalid_document(corpus: Path) -> None:
    with pytest.raises(Failure, match=r"invalid pipeline YAML: p\.yml"):
        render_test_pipeline(
            [1], scope="all", changed=None, registries=Registries.for_repo(corpus), source="p.yml"
        )
    unchanged = render_test_pipeline(
        {"env": {"A": 1}}, scope="all", changed=None, registries=Registries.for_repo(corpus)
    )
    assert unchanged.pipeline == {"env": {"A": 1}}


# --------------------------------------------------------------------------- the task (CLI)


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e.invalid",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


PIPELINE = {
    "steps": [
        {"label": "ungated", "command": "echo hi"},
        {"label": "gated_a", "command": "c", "source_file_dependencies": "pkg/model_a/"},
        {"label": "gated_b", "command": "c", "source_file_dependencies": "pkg/model_b/"},
        {"label": "l4", "mirror_hardwares": "l4_1", "commands": ["pytest -sv tests/example"]},
    ]
}


@pytest.fixture(scope="module")
def gitrepo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus with PIPELINE committed on main, then a commit changing pkg/model_a;
    built once for the module (no origin: the tests read the commit diff)."""
    repo = make_corpus(tmp_path_factory.mktemp("upload-template") / "repo")
    (repo / ".buildkite/cuda/test-x.yml").write_text(yaml.safe_dump(PIPELINE, sort_keys=False))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    (repo / "pkg/model_a").mkdir(parents=True)
    (repo / "pkg/model_a/x.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "change model a")
    return repo


@pytest.fixture
def gitrepo(gitrepo_template: Path, tmp_path: Path) -> Path:
    """A copy of the template for each test (several write files into it)."""
    return Path(shutil.copytree(gitrepo_template, tmp_path / "repo", symlinks=True))


def clean_env(**values: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE") and k != "MIRROR_HW"
    }
    env.update(values)
    return env


def labels(text: str) -> list[str]:
    return [s["label"] for s in yaml.safe_load(text)["steps"]]


def test_p36_main_build_filters_by_the_commit_diff(gitrepo: Path) -> None:
    env = clean_env(
        BUILDKITE_BRANCH="main",
        BUILDKITE_PULL_REQUEST="false",
        BUILDKITE_COMMIT=git(gitrepo, "rev-parse", "HEAD"),
    )
    done = run_task(
        "upload-pipeline", ".buildkite/cuda/test-x.yml", "--repo", str(gitrepo), env=env
    )
    assert done.returncode == 0, done.stderr
    assert labels(done.stdout) == ["ungated", "gated_a", "l4"]
    assert "upload_pipeline: skip 'gated_b' (no changes under [pkg/model_b/])" in done.stderr


def test_scope_all_and_aliases(gitrepo: Path) -> None:
    env = clean_env(BUILDKITE_BRANCH="main", BUILDKITE_COMMIT=git(gitrepo, "rev-parse", "HEAD"))
    for flags in (["--all"], ["--scope", "all"], ["--all", "--scope", "all"]):
        done = run_task(
            "upload-pipeline", ".buildkite/cuda/test-x.yml", "--repo", str(gitrepo), *flags, env=env
        )
        assert done.returncode == 0, done.stderr
        assert labels(done.stdout) == ["ungated", "gated_a", "gated_b", "l4"]


def test_output_is_yaml_alone_and_schema_valid(gitrepo: Path) -> None:
    done = run_task(
        "upload-pipeline",
        ".buildkite/cuda/test-x.yml",
        "--all",
        "--repo",
        str(gitrepo),
        env=clean_env(),
    )
    assert done.returncode == 0, done.stderr
    document = yaml.safe_load(done.stdout)
    from ci.schema import schema_problems

    assert schema_problems(document) == []
    assert "source_file_dependencies" not in done.stdout  # P42
    assert "mirror_hardwares" not in done.stdout
    assert document["steps"][3]["commands"][0] == HF


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--all", "--e2e"], "--all and --e2e are mutually exclusive"),  # P38
        (["--e2e", "--scope", "all"], "--e2e conflicts with --scope all"),
        (["--scope", "weekly"], "--scope: unknown scope 'weekly'; allowed: diff, all, e2e, auto"),
    ],
)
def test_p38_scope_conflicts_exit_2(gitrepo: Path, flags: list[str], message: str) -> None:
    done = run_task(
        "upload-pipeline",
        ".buildkite/cuda/test-x.yml",
        "--repo",
        str(gitrepo),
        *flags,
        env=clean_env(),
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {message}"
    assert done.stdout == ""


def test_auto_scope_is_diff_for_a_file_without_a_schedule(gitrepo: Path) -> None:
    """`--scope auto` (rules: ci.pipeline.bootstrap_mode) falls back to the diff."""
    head = git(gitrepo, "rev-parse", "HEAD")
    env = clean_env(BUILDKITE_BRANCH="main", BUILDKITE_COMMIT=head, NIGHTLY="1", WEEKLY="1")
    done = run_task(
        "upload-pipeline",
        ".buildkite/cuda/test-x.yml",
        "--scope",
        "auto",
        "--repo",
        str(gitrepo),
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert labels(done.stdout) == ["ungated", "gated_a", "l4"]


def test_p43_relative_path_is_resolved_against_the_repo(gitrepo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ok = run_task(
        "upload-pipeline",
        ".buildkite/cuda/test-x.yml",
        "--all",
        "--repo",
        str(gitrepo),
        cwd=elsewhere,
        env=clean_env(),
    )
    assert ok.returncode == 0, ok.stderr
    missing = run_task(
        "upload-pipeline", "cuda/x.yml", "--repo", str(gitrepo), cwd=elsewhere, env=clean_env()
    )
    # An input error (exit 2, issue 35), naming the repo it was looked for in.
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        f"error: upload_pipeline: missing pipeline file: {gitrepo.resolve()}/cuda/x.yml"
        f" (a relative path is read from the repo root, {gitrepo.resolve()};"
        " --repo names another checkout)"
    )


def test_an_unknown_user_in_the_pipeline_path_is_a_missing_file(
    gitrepo: Path, inproc: Callable[..., Outcome]
) -> None:
    """`~nouser/x.yml` stays as written, as a shell leaves it (pathlib raised RuntimeError)."""
    done = inproc(
        "upload-pipeline", "~no-such-user-x/x.yml", "--repo", str(gitrepo), env=clean_env()
    )
    assert done.code == 2, done.stderr
    assert done.stderr.startswith("error: upload_pipeline: missing pipeline file: "), done.stderr
    assert "~no-such-user-x/x.yml" in done.stderr
    # A file that is there but broken stays a failure (exit 1).
    (gitrepo / "broken.yml").write_text("steps: [\n")
    broken = inproc("upload-pipeline", "broken.yml", "--repo", str(gitrepo), env=clean_env())
    assert broken.code == 1, broken.stderr
    assert "error: invalid pipeline YAML: " in broken.stderr, broken.stderr


def test_p1_cli_bad_mirror_hw_uploads_nothing(gitrepo: Path, standins: StandIns) -> None:
    standins.add("buildkite-agent")
    done = run_task(
        "upload-pipeline",
        ".buildkite/cuda/test-x.yml",
        "--upload",
        "--repo",
        str(gitrepo),
        env=standins.env(clean_env(MIRROR_HW="b20o")),
    )
    assert done.returncode == 1
    assert "error: unsupported MIRROR_HW='b20o'; expected empty or 'b200'" in done.stderr
    assert standins.calls() == []


def test_upload_pipes_the_yaml_to_the_agent(
    gitrepo: Path, standins: StandIns, tmp_path: Path
) -> None:
    got = tmp_path / "uploaded.yml"
    standins.add("buildkite-agent", f"cat > {got}")
    done = run_task(
        "upload-pipeline",
        ".buildkite/cuda/test-x.yml",
        "--upload",
        "--all",
        "--repo",
        str(gitrepo),
        env=standins.env(clean_env()),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert standins.argvs("buildkite-agent") == [["pipeline", "upload"]]
    assert labels(got.read_text()) == ["ungated", "gated_a", "gated_b", "l4"]


def test_failed_upload_passes_the_agent_exit_code(gitrepo: Path, standins: StandIns) -> None:
    standins.add("buildkite-agent", "exit 3")
    done = run_task(
        "upload-pipeline",
        ".buildkite/cuda/test-x.yml",
        "--upload",
        "--all",
        "--repo",
        str(gitrepo),
        env=standins.env(clean_env()),
    )
    assert done.returncode == 3


def test_dry_run_prints_yaml_and_the_command(gitrepo: Path, standins: StandIns) -> None:
    standins.add("buildkite-agent")
    done = run_task(
        "upload-pipeline",
        ".buildkite/cuda/test-x.yml",
        "--upload",
        "--dry-run",
        "--all",
        "--repo",
        str(gitrepo),
        env=standins.env(clean_env()),
    )
    assert done.returncode == 0, done.stderr
    assert labels(done.stdout) == ["ungated", "gated_a", "gated_b", "l4"]
    assert "buildkite-agent pipeline upload" in done.stderr
    assert standins.calls() == []


# Modules a test YAML's unfiltered upload must not load: every module is start-up
# time on each upload job (issue 34); these serve the diff, skip-ci, bootstrap files and
# `--scope auto` (the tier table); importlib.resources (~3-10 ms of zipfile, tempfile…)
# serves nothing the upload reads.
NOT_FOR_AN_UNFILTERED_UPLOAD = (
    "importlib.resources",
    "ci.diff",
    "ci.skipci",
    "ci.pipeline.bootstrap_mode",
    "ci.pipeline.ifexpr",
    "ci.topology",
)


def test_an_unfiltered_upload_loads_no_diff_or_bootstrap_code(gitrepo: Path) -> None:
    """Start-up is the subject (a fresh process): `--all` needs no diff, no skip-ci, no
    bootstrap gates, so their modules stay unloaded; the same pipeline is printed. Run
    without the site's start-up files (`-S`, site-packages on the path): what a `.pth`
    file of this machine happens to load is no proof of what the upload loads."""
    argv = ["x", "upload-pipeline", ".buildkite/cuda/test-x.yml", "--all", "--dry-run"]
    argv += ["--repo", str(gitrepo)]
    code = (
        f"import sys; sys.argv = {argv!r}\n"
        "from ci.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        f"print('LOADED=' + ','.join(m for m in {NOT_FOR_AN_UNFILTERED_UPLOAD!r} "
        "if m in sys.modules))"
    )
    path = os.pathsep.join([str(ROOT), *site.getsitepackages()])
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=gitrepo,
        env={**clean_env(), "PYTHONPATH": path},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert labels(done.stdout.split("LOADED=")[0]) == ["ungated", "gated_a", "gated_b", "l4"]
    assert done.stdout.rstrip().rpartition("LOADED=")[2] == ""


def test_validation_errors_exit_1_and_upload_nothing(gitrepo: Path, standins: StandIns) -> None:
    standins.add("buildkite-agent")
    bad = {
        "steps": [
            {"label": "x", "command": "c", "bogus": 1},
            {"label": "y", "mirror_hardwares": "nope"},
        ]
    }
    (gitrepo / "bad.yml").write_text(yaml.safe_dump(bad))
    done = run_task(
        "upload-pipeline",
        "bad.yml",
        "--upload",
        "--all",
        "--repo",
        str(gitrepo),
        env=standins.env(clean_env()),
    )
    assert done.returncode == 1
    assert done.stderr.count("error: ") == 1
    assert "error: unknown mirror_hardwares 'nope' in step 'y'" in done.stderr
    assert "Traceback" not in done.stderr
    (gitrepo / "bad.yml").write_text(yaml.safe_dump({"steps": [bad["steps"][0]]}))
    done = run_task(
        "upload-pipeline",
        "bad.yml",
        "--upload",
        "--all",
        "--repo",
        str(gitrepo),
        env=standins.env(clean_env()),
    )
    assert done.returncode == 1
    assert "fails the Buildkite schema at steps/0" in done.stderr
    assert standins.calls() == []


def test_invalid_yaml_file(gitrepo: Path) -> None:
    (gitrepo / "broken.yml").write_text("steps: [\n")
    done = run_task(
        "upload-pipeline", "broken.yml", "--all", "--repo", str(gitrepo), env=clean_env()
    )
    assert done.returncode == 1
    assert f"error: invalid pipeline YAML: {gitrepo.resolve()}/broken.yml" in done.stderr


def test_errors_are_annotated_in_a_buildkite_upload_job(gitrepo: Path, standins: StandIns) -> None:
    standins.add("buildkite-agent")
    bad = {"steps": [{"label": "y", "mirror_hardwares": "nope"}]}
    (gitrepo / "bad.yml").write_text(yaml.safe_dump(bad))
    env = standins.env(clean_env(BUILDKITE="true", BUILDKITE_COMMIT="abc", BUILDKITE_BRANCH="x"))
    done = run_task(
        "upload-pipeline", "bad.yml", "--upload", "--all", "--repo", str(gitrepo), env=env
    )
    assert done.returncode == 1
    (call,) = standins.argvs("buildkite-agent")
    assert call[:5] == ["annotate", "--style", "error", "--context", "upload-pipeline-bad.yml"]
    assert "- unknown mirror_hardwares 'nope' in step 'y'; known: " in call[5]
    # Outside Buildkite, or without --upload, nothing is annotated.
    for extra_env, flags in (({}, ["--upload"]), ({"BUILDKITE": "true"}, [])):
        standins.log.unlink(missing_ok=True)
        run_task(
            "upload-pipeline",
            "bad.yml",
            "--all",
            *flags,
            "--repo",
            str(gitrepo),
            env=standins.env(clean_env(**extra_env)),
        )
        assert standins.calls() == []


@pytest.mark.parametrize("task", ["upload-pipeline", "bootstrap", "lint-pipelines"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_is_printed_not_taken_as_the_positional(task: str, flag: str) -> None:
    """`upload-pipeline` and `bootstrap` have a positional; Invoke would feed it `--help`."""
    done = run_task(task, flag)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: vllm-omni-ci {task} [OPTIONS]")
    assert "-r, --repo REPO" in done.stdout
    assert done.stderr == ""
    # After `--`, `--help` belongs to the forwarded command, not to us.
    forwarded = run_task("upload-pipeline", "x.yml", "--", "--help")
    assert "Usage:" not in forwarded.stdout


def test_platform_names_a_bootstrap_file(gitrepo: Path) -> None:
    """`--platform` picks the bootstrap platform; with a test YAML it is the loader's guard."""
    done = run_task(
        "upload-pipeline",
        ".buildkite/cuda/test-x.yml",
        "--platform",
        "cuda",
        "--all",
        "--repo",
        str(gitrepo),
        env=clean_env(),
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip() == "error: expected bootstrap-upload-steps.yml, got test-x.yml"


def test_compose_messages_without_count_presets_or_registered_count() -> None:
    """The two §3.7 compose messages the seed registries cannot reach."""
    from ci.pipeline.markers import parse_marker_lines

    markers = parse_marker_lines(
        [
            "H100: GPU [hardware-resource] [cuda]",
            "cards_1: one [hardware-cards]",
            "cards_2: two [hardware-cards]",
        ],
        "<m>",
    )
    # `h100` is a mirror chip (a preset named `h100`), but has no `h100_<n>` preset.
    registries = Registries(
        lambda: SourceRegistry.parse({"source_file_dependencies": {}}, "<s>"),
        lambda: PresetRegistry.parse(
            {"mirror_hardwares": {"h100": {"agents": {"queue": "q"}}}}, "<p>"
        ),
        lambda: markers,
    )
    rendered = render_test_pipeline(
        {"steps": [step("H100 and not cards_1", label="lbl")]},
        scope="all",
        changed=None,
        registries=registries,
    )
    assert rendered.problems == ["not cards_* in step 'lbl' has no CUDA count presets for h100"]
    ask = mirror.MarkAsk(frozenset({"h100"}), 16)
    with pytest.raises(Failure) as err:
        mirror.compose_preset("lbl", ask, None, registries.presets(), markers.card_counts)
    assert err.value.problems == (
        "cards_16 in step 'lbl' is not a registered cards_* mark; supported: cards_1, cards_2",
    )
    assert err.value.code == 1
