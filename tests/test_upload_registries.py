"""The uploader's YAML registries: every §3.8 loading message, anchors, and read-once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ci.pipeline.registries import (
    FALLBACK_KEY,
    PRESET_REGISTRY,
    SOURCE_REGISTRY,
    PresetRegistry,
    Registries,
    SourceRegistry,
)
from ci.pipeline.render import render_test_pipeline
from tests.corpus import make_corpus

KEYED = {"label": "k", "command": "c", "source_file_dependencies": "model_a"}
PRESET = {"label": "p", "mirror_hardwares": "x_1", "command": "c"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "repo")


def problems(repo: Path, steps: list[Any], **kw: Any) -> list[str]:
    return render_test_pipeline(
        {"steps": steps},
        scope=kw.pop("scope", "all"),
        changed=kw.pop("changed", None),
        registries=Registries.for_repo(repo),
        **kw,
    ).problems


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "missing CI source_file_dependencies registry: {p}"),
        (
            "a: [\n",
            "invalid CI source_file_dependencies registry: {p} "
            "(invalid YAML at line 2, column 1: did not find expected node content)",
        ),
        ("- a\n", "invalid CI source_file_dependencies registry: {p}"),
        ("source_file_dependencies: [a]\n", "source_file_dependencies must be a mapping in {p}"),
        (
            "source_file_dependencies:\n  1: [a/]\n",
            "source_file_dependencies keys must be non-empty strings in {p}",
        ),
        (
            "source_file_dependencies:\n  '': [a/]\n",
            "source_file_dependencies keys must be non-empty strings in {p}",
        ),
        (
            "source_file_dependencies:\n  model_a: ['']\n",
            "empty path in source_file_dependencies['model_a']",
        ),
        (
            "source_file_dependencies:\n  model_a: [[a/, null]]\n",
            "empty path in source_file_dependencies['model_a']",
        ),
        (
            "source_file_dependencies:\n  model_a: a/\n",
            "source_file_dependencies['model_a'] must be a list of path prefixes, got str",
        ),
        (
            "source_file_dependencies:\n  model_a: {a: 1}\n",
            "source_file_dependencies['model_a'] must be a list of path prefixes, got dict",
        ),
    ],
)
def test_source_registry_messages(repo: Path, text: str | None, message: str) -> None:
    path = repo / SOURCE_REGISTRY
    if text is None:
        path.unlink()
    else:
        path.write_text(text)
    assert problems(repo, [KEYED]) == [message.format(p=path.resolve())]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "missing CI mirror_hardwares registry: {p}"),
        (
            "mirror_hardwares: {\n",
            "invalid CI mirror_hardwares registry: {p} "
            "(invalid YAML at line 2, column 1: did not find expected node content)",
        ),
        ("just text\n", "invalid CI mirror_hardwares registry: {p}"),
        ("mirror_hardwares: [x_1]\n", "mirror_hardwares must be a mapping in {p}"),
    ],
)
def test_preset_registry_messages(repo: Path, text: str | None, message: str) -> None:
    path = repo / PRESET_REGISTRY
    if text is None:
        path.unlink()
    else:
        path.write_text(text)
    assert problems(repo, [PRESET]) == [message.format(p=path.resolve())]


def test_anchors_are_flattened_and_deduplicated(repo: Path) -> None:
    (repo / SOURCE_REGISTRY).write_text(
        "x-a: &a\n  - pkg/a/\n  - pkg/shared.py\n"
        "x-b: &b\n  - *a\n  - pkg/b/\n"
        "source_file_dependencies:\n"
        "  model_a: [*b, pkg/shared.py, tests/a.py, [pkg/a/]]\n"
        "  source_filter_fallback: [tests/helpers/]\n"
    )
    registry = Registries.for_repo(repo).sources()
    assert registry.keys["model_a"] == ("pkg/a/", "pkg/shared.py", "pkg/b/", "tests/a.py")
    assert registry.job_keys == ("model_a",)
    assert registry.fallback() == ("tests/helpers/",)


def test_registries_are_read_once_per_run(repo: Path) -> None:
    (repo / SOURCE_REGISTRY).write_text("source_file_dependencies:\n  model_a: [pkg/a/]\n")
    registries = Registries.for_repo(repo)
    steps = [KEYED, {"label": "l4", "mirror_hardwares": "l4_1", "command": "c"}]
    first = render_test_pipeline({"steps": steps}, scope="all", changed=None, registries=registries)
    assert first.problems == []
    (repo / SOURCE_REGISTRY).unlink()
    (repo / PRESET_REGISTRY).unlink()
    again = render_test_pipeline(
        {"steps": steps}, scope="diff", changed=["pkg/a/x.py"], registries=registries
    )
    assert again.problems == [] and [k.label for k in again.kept] == ["k", "l4"]


def test_registries_are_not_read_when_no_step_uses_them(repo: Path) -> None:
    (repo / SOURCE_REGISTRY).unlink()
    (repo / PRESET_REGISTRY).unlink()
    steps = [
        {"label": "cpu", "command": "pytest"},
        {"label": "inline", "command": "c", "source_file_dependencies": "pkg/inline/"},
    ]
    assert problems(repo, steps) == []
    # A diff that matches the inline prefix needs no fallback check either.
    assert problems(repo, steps, scope="diff", changed=["pkg/inline/x.py"]) == []
    # No step matches: the fallback list must be consulted, and is missing.
    assert problems(repo, steps, scope="diff", changed=["other.py"]) == [
        f"missing CI source_file_dependencies registry: {(repo / SOURCE_REGISTRY).resolve()}"
    ]


def test_registries_built_from_parsed_data() -> None:
    from ci.pipeline.markers import parse_marker_lines

    markers = parse_marker_lines(
        ["H100: GPU [hardware-resource] [cuda]", "cards_2: two [hardware-cards]"], "<m>"
    )
    registries = Registries(
        lambda: SourceRegistry.parse(
            {"source_file_dependencies": {"model_a": ["pkg/a/"], FALLBACK_KEY: ["tests/"]}}, "<s>"
        ),
        lambda: PresetRegistry.parse(
            {"mirror_hardwares": {"h100_2": {"agents": {"queue": "gpu"}}}}, "<p>"
        ),
        lambda: markers,
    )
    steps = [
        KEYED,
        {"label": "infer", "command": 'pytest -m "H100 and cards_2"'},
    ]
    rendered = render_test_pipeline(
        {"steps": steps}, scope="diff", changed=["pkg/a/x.py"], registries=registries
    )
    assert rendered.problems == []
    assert [(k.label, k.preset) for k in rendered.kept] == [("k", None), ("infer", "h100_2")]
    assert rendered.kept[1].step.fields["agents"] == {"queue": "gpu"}
