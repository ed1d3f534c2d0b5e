"""The pytest marker registry: SKUs and cards from pyproject.toml tags, read lazily, fail closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ci.pipeline.markers import parse_marker_lines, parse_pyproject
from ci.pipeline.registries import Registries
from ci.pipeline.render import render_test_pipeline
from tests.conftest import SAMPLE
from tests.corpus import make_corpus, pyproject_text


def test_corpus_registry_matches_markers_md() -> None:
    registry = parse_pyproject(pyproject_text(), "pyproject.toml")
    assert registry.skus("cuda") == ("H100", "H800", "H200", "L4", "A100", "B200")
    assert registry.skus("npu") == ("A2", "A3", "A5", "310P")
    assert registry.skus("rocm") == ("MI325",)
    assert registry.card_counts == (1, 2, 3, 4, 5, 6, 7, 8)


def test_sample_repo_registry_is_readable() -> None:
    text = (SAMPLE / "pyproject.toml").read_text()
    registry = parse_pyproject(text, str(SAMPLE / "pyproject.toml"))
    assert "H100" in registry.skus("cuda")
    assert 1 in registry.card_counts


def test_tags_need_the_right_marker_shape() -> None:
    registry = parse_marker_lines(
        [
            "cards_x: not a count [hardware-cards]",
            "cards_16: sixteen [hardware-cards]",
            "twocards: [hardware-cards]",
            "H100: GPU [hardware-resource] [cuda]",
            "MI325: GPU [hardware-resource] [rocm]",
            "L4: a GPU without the platform tag [hardware-resource]",
            42,
        ],
        "x",
    )
    assert registry.card_counts == (16,)
    assert registry.skus("cuda") == ("H100",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[tool.pytest.ini_options]\nmarkers = ['core_model: L2 [ci-level]']\n",
            "no tagged pytest markers ([hardware-resource] / [hardware-cards]) in {p}",
        ),
        ("[project]\nname = 'x'\n", "no [tool.pytest.ini_options].markers list in {p}"),
        ("[tool.pytest.ini_options\n", "invalid pytest marker registry: {p}: "),
    ],
)
def test_unusable_registry_fails_closed_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    repo = make_corpus(tmp_path / "repo")
    (repo / "pyproject.toml").write_text(text)
    found = needs_inference(repo)
    assert len(found) == 1
    assert found[0].startswith(message.format(p=(repo / "pyproject.toml").resolve()))


INFER = {"label": "infer", "commands": ['pytest -m "H100 and cards_1"']}
NO_INFER: list[dict[str, Any]] = [
    {"label": "cpu", "command": "pytest tests/unit"},
    {"label": "pooled", "command": 'pytest -m "H100 and cards_2"', "agents": {"queue": "q"}},
    {"label": "npu", "mirror_hardwares": "a2b3_npu_1", "command": "pytest -m 'npu and A2'"},
    {"label": "l4", "mirror_hardwares": "l4_1", "command": "pytest tests/x"},
]


def needs_inference(repo: Path) -> list[str]:
    rendered = render_test_pipeline(
        {"steps": [INFER]}, scope="all", changed=None, registries=Registries.for_repo(repo)
    )
    return rendered.problems


def test_missing_registry_fails_closed_when_needed(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "repo", pyproject=False)
    assert needs_inference(repo) == [
        f"missing pytest marker registry: {(repo / 'pyproject.toml').resolve()}"
    ]


def test_registry_is_not_read_unless_a_step_needs_inference(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "repo", pyproject=False)
    registries = Registries.for_repo(repo)
    rendered = render_test_pipeline(
        {"steps": NO_INFER}, scope="all", changed=None, registries=registries
    )
    assert rendered.problems == []
    assert [k.label for k in rendered.kept] == ["cpu", "pooled", "npu", "l4"]
    assert rendered.kept[3].step["commands"][0].startswith("if [ -n ")  # HF export, no markers


def test_mirror_hw_on_a_named_preset_needs_the_registry(tmp_path: Path) -> None:
    """Knowing which presets are CUDA chips (to drop them under b200) needs the SKU list."""
    repo = make_corpus(tmp_path / "repo", pyproject=False)
    rendered = render_test_pipeline(
        {"steps": [NO_INFER[3]]},
        scope="all",
        changed=None,
        registries=Registries.for_repo(repo),
        mirror_hw="b200",
    )
    assert rendered.problems == [
        f"missing pytest marker registry: {(repo / 'pyproject.toml').resolve()}"
    ]


def test_registry_is_read_once_per_run(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "repo")
    registries = Registries.for_repo(repo)
    first = render_test_pipeline(
        {"steps": [INFER]}, scope="all", changed=None, registries=registries
    )
    assert first.kept[0].preset == "h100_1"
    (repo / "pyproject.toml").unlink()
    (repo / ".buildkite/common/ci_mirror_hardwares.yml").unlink()
    again = render_test_pipeline(
        {"steps": [INFER]}, scope="all", changed=None, registries=registries
    )
    assert again.problems == [] and again.kept[0].preset == "h100_1"
    fresh = render_test_pipeline(
        {"steps": [INFER]}, scope="all", changed=None, registries=Registries.for_repo(repo)
    )
    assert fresh.problems == [
        f"missing pytest marker registry: {(repo / 'pyproject.toml').resolve()}"
    ]


def test_unregistered_sku_is_not_a_chip(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "repo")
    (repo / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\nmarkers = [\n"
        "  'L4: GPU [hardware-resource] [cuda]',\n"
        "  'cards_1: one [hardware-cards]',\n"
        "]\n"
    )
    rendered = render_test_pipeline(
        {"steps": [INFER]}, scope="all", changed=None, registries=Registries.for_repo(repo)
    )
    assert rendered.kept == [] and rendered.dropped[0].reason == "no-chip"
