"""`ci.schema`: the packaged schema, jsonschema's verdict step by step, messages at the field.

`plan` (and every upload) checks each pipeline it would upload against
Buildkite's schema; the fast path must never accept what jsonschema rejects,
nor reject what it accepts. The oracle is the plain jsonschema validator of
the packaged schema, on the real corpus renders and on broken variants.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ci import schema
from ci.pipeline.upload import render_file
from ci.schema import schema_problems, schema_text, validator
from tests.conftest import SHARED, need_shared
from tests.corpus import make_corpus, uploader_yamls


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    schema.clear_cache()
    yield
    schema.clear_cache()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    repo = make_corpus(tmp_path_factory.mktemp("schema") / "omni")
    return [
        render_file(repo, repo / rel, scope="all", changed=None, mirror_hw="").pipeline
        for rel in uploader_yamls()
    ]


def oracle(pipeline: Any) -> bool:
    return bool(validator().is_valid(pipeline))


def test_every_corpus_render_is_valid_both_ways(rendered: list[dict[str, Any]]) -> None:
    assert len(rendered) == 6
    for pipeline in rendered:
        assert oracle(pipeline)
        assert schema_problems(pipeline) == []


def _first_leaf(pipeline: dict[str, Any]) -> dict[str, Any]:
    for step in pipeline["steps"]:
        if "group" in step:
            return step["steps"][0]  # type: ignore[no-any-return]
        return step  # type: ignore[no-any-return]
    raise AssertionError("no step")


def _first_group(pipeline: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in pipeline["steps"] if isinstance(s, dict) and "group" in s)


BROKEN: dict[str, Callable[[dict[str, Any]], None]] = {
    "timeout is a word": lambda p: _first_leaf(p).update(timeout_in_minutes="soon"),
    "unknown step key": lambda p: _first_leaf(p).update(source_file_dependencies=["x/"]),
    "parallelism is a string": lambda p: _first_leaf(p).update(parallelism="2"),
    "commands is a tuple": lambda p: _first_leaf(p).update(commands=("true",)),
    "label is a number": lambda p: _first_leaf(p).update(label=5),
    "agents is a number": lambda p: _first_leaf(p).update(agents=3),
    "retry limit is a word": lambda p: _first_leaf(p).update(
        retry={"automatic": [{"exit_status": -1, "limit": "many"}]}
    ),
    "nested group": lambda p: _first_group(p)["steps"].append(
        {"group": "inner", "steps": [{"command": "true"}]}
    ),
    "empty group": lambda p: _first_group(p).update(steps=[]),
    "group without steps": lambda p: _first_group(p).pop("steps"),
    "group with an unknown key": lambda p: _first_group(p).update(mirror_hardwares=["x"]),
    "a step is a number": lambda p: p["steps"].append(5),
    "steps is a mapping": lambda p: p.update(steps={"a": {"command": "true"}}),
    "top-level env is a list": lambda p: p.update(env=["A=1"]),
}
STILL_VALID: dict[str, Callable[[dict[str, Any]], None]] = {
    "wait string": lambda p: p["steps"].append("wait"),
    "wait step": lambda p: p["steps"].append({"wait": None, "continue_on_failure": True}),
    "block step": lambda p: p["steps"].append({"block": "Release?", "key": "release-gate"}),
    "trigger step": lambda p: p["steps"].append({"trigger": "deploy", "label": "Deploy"}),
    "nested command step": lambda p: p["steps"].append({"command": {"command": "true"}}),
    "agents as a list": lambda p: _first_leaf(p).update(agents=["queue=cpu"]),
    "soft_fail as exit statuses": lambda p: _first_leaf(p).update(soft_fail=[{"exit_status": 1}]),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_pipelines_are_rejected_as_jsonschema_rejects_them(
    rendered: list[dict[str, Any]], name: str
) -> None:
    for original in rendered:
        # Warm the memo with the valid values first: a remembered "valid" must not leak.
        assert schema_problems(original) == []
        broken = copy.deepcopy(original)
        BROKEN[name](broken)
        assert oracle(broken) is False, name
        assert schema_problems(broken), name


@pytest.mark.parametrize("name", list(STILL_VALID))
def test_other_step_types_are_accepted_as_jsonschema_accepts_them(
    rendered: list[dict[str, Any]], name: str
) -> None:
    changed = copy.deepcopy(rendered[0])
    STILL_VALID[name](changed)
    assert oracle(changed) is True, name
    assert schema_problems(changed) == [], name


def test_remembered_values_are_told_apart_by_type() -> None:
    step: dict[str, Any] = {"command": "true", "parallelism": 2}
    assert schema_problems({"steps": [step]}) == []
    for bad in ("2", 2.5, [2]):
        pipeline = {"steps": [{**step, "parallelism": bad}]}
        assert (schema_problems(pipeline) == []) is oracle(pipeline) is False, bad
    boolean = {"steps": [{**step, "parallelism": True}]}
    assert (schema_problems(boolean) == []) is oracle(boolean)


@pytest.mark.parametrize("document", [None, [], {"step": []}, {"steps": None}, "steps"])
def test_not_a_pipeline_at_all(document: Any) -> None:
    assert (schema_problems(document) == []) is oracle(document) is False


def test_the_fast_path_is_what_makes_plan_affordable(rendered: list[dict[str, Any]]) -> None:
    """Not a timing test: the memo must actually be hit (values repeat across steps)."""
    for pipeline in rendered:
        schema_problems(pipeline)
    remembered = len(schema._MEMO)
    leaves = sum(
        len(s["steps"]) if isinstance(s, dict) and "group" in s else 1
        for p in rendered
        for s in p["steps"]
    )
    keys = sum(
        len(leaf)
        for p in rendered
        for s in p["steps"]
        for leaf in (s["steps"] if isinstance(s, dict) and "group" in s else [s])
    )
    assert leaves > 100
    assert 0 < remembered < keys * 0.8, (remembered, keys)


def test_packaged_schema_equals_the_shared_one_byte_for_byte() -> None:
    shared = need_shared(SHARED / "schemas" / "buildkite-pipeline.schema.json")
    assert schema_text() == shared.read_bytes()


def test_schema_rejects_an_empty_group_and_accepts_a_command_step() -> None:
    assert schema_problems({"steps": [{"label": "x", "command": "true"}]}) == []
    assert schema_problems({"steps": [{"group": "g", "steps": []}]}) != []


def test_problems_name_the_field_and_only_invalid_steps() -> None:
    """Not "<the step> is not valid under any of the given schemas": the bad field itself.

    The nested command step is valid (jsonschema accepts it as another step
    type), so nothing is said about it although it is no plain command step.
    """
    group = {"group": "g", "steps": [{"command": "true"}, {"command": "x", "parallelism": "2"}]}
    pipeline = {"env": ["A=1"], "steps": [{"command": {"command": "true"}}, "wait", group]}
    assert schema_problems(pipeline) == [
        "env: ['A=1'] is not of type 'object'",
        "steps/2/steps/1/parallelism: '2' is not of type 'integer'",
    ]
