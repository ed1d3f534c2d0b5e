"""`ci.schema`: the packaged schema compiled to jsonschema's verdict, messages at the field.

`plan` (and every upload) checks each pipeline it would upload against
Buildkite's schema; the compiled check must never accept what jsonschema
rejects, nor reject what it accepts. The oracle is the plain jsonschema
validator of the packaged schema, on the real corpus renders, on broken
variants and on tricky values for every keyword the compiler knows.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from ci import schema
from ci.pipeline.upload import render_file
from ci.schema import compile_schema, compiled, schema_problems, schema_text, validator
from tests.conftest import ROOT, SHARED, need_shared
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


# -- the compiled check: jsonschema's verdict, without jsonschema -------------------------

# Where a keyword's value is itself a schema, a map of them or a list of them; any
# other keyword's value is data (an `enum`'s options, a `required` list, an example).
_ONE_SCHEMA = {"not", "additionalProperties", "items", "propertyNames", "additionalItems"}
_SCHEMA_MAPS = {"properties", "definitions", "patternProperties", "dependencies"}
_SCHEMA_LISTS = {"anyOf", "oneOf", "allOf", "items"}


def _keywords(node: Any) -> Iterator[str]:
    """Every keyword of every schema in `node` (also beside a `$ref`, which draft-07 ignores)."""
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        yield key
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for sub in value.values():
                yield from _keywords(sub)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for sub in value:
                yield from _keywords(sub)
        elif key in _ONE_SCHEMA:
            yield from _keywords(value)


def test_every_keyword_of_the_packaged_schema_is_one_the_compiler_knows() -> None:
    """Fails when an updated official schema brings a keyword: teach the compiler first."""
    used = set(_keywords(json.loads(schema_text())))
    assert used <= schema.KEYWORDS | schema.ANNOTATIONS, sorted(
        used - schema.KEYWORDS - schema.ANNOTATIONS
    )
    assert {"$ref", "type", "properties", "anyOf", "oneOf", "enum", "not"} <= used
    for name in json.loads(schema_text())["definitions"]:  # also those nothing refers to
        compiled(f"#/definitions/{name}")


@pytest.mark.parametrize(
    "node",
    [
        {"type": "string", "uniqueItems": True},
        {"properties": {"a": {"if": {"type": "string"}}}},
        {"anyOf": [{"type": "string"}, {"contains": {"type": "integer"}}]},
        {"type": "decimal"},
        {"$ref": "https://example.com/schema.json"},
    ],
)
def test_an_unknown_keyword_stops_the_compiler(node: dict[str, Any]) -> None:
    with pytest.raises(schema.UnknownKeyword):
        compile_schema(node)


def test_the_compiled_verdict_is_jsonschemas_on_every_corpus_render_and_variant(
    rendered: list[dict[str, Any]],
) -> None:
    check = compiled()
    for original in rendered:
        assert check(original) is oracle(original) is True
        for name, change in {**BROKEN, **STILL_VALID}.items():
            variant = copy.deepcopy(original)
            change(variant)
            assert check(variant) is oracle(variant), name


def _group(*steps: Any) -> dict[str, Any]:
    return {"group": "g", "steps": list(steps)}


INTEGERS = [0, 1, -1, 1.0, 1.5, True, False, "1", None, 2**70, float("inf"), float("nan")]
REALS = [*INTEGERS, Decimal("1.5"), Fraction(1, 2)]
NUMBERS = [*REALS, complex(1, 0)]  # a number, but no bound compares with it (jsonschema raises)
ANYTHING = ["", "x", 0, 1, 1.0, True, False, None, [], ["x"], (), {}, {"a": 1}]
# (a schema, or a pointer into the packaged one) -> values on which jsonschema and the
# compiled check must agree. Each keyword the compiler knows meets its tricky cases.
TRICKY: list[tuple[Any, list[Any]]] = [
    ({"type": "integer"}, NUMBERS),
    ({"type": "number"}, NUMBERS),
    ({"type": "boolean"}, [True, False, 0, 1, "true", None]),
    ({"type": "null"}, [None, 0, "", "null", False, []]),
    ({"type": "string"}, ANYTHING),
    ({"type": "array"}, ANYTHING),
    ({"type": "object"}, ANYTHING),
    ({"type": ["string", "null"]}, ANYTHING),
    ({"type": ["integer", "boolean"]}, NUMBERS),
    (True, ANYTHING),
    (False, ANYTHING),
    ({}, ANYTHING),
    ({"enum": ["wait", "waiter"]}, ["wait", "Wait", "wai", "waiter ", 1, None, ["wait"]]),
    ({"enum": [True, False, "true", "false"]}, [True, False, 1, 0, 1.0, "true", "True", None]),
    ({"enum": [1, [1, 2], {"a": 1}, None]}, [1, 1.0, True, [1, 2], (1, 2), [True, 2], [1.0, 2]]),
    ({"enum": [{"a": 1}, 0]}, [{"a": 1}, {"a": True}, {"a": 1.0}, {"a": 1, "b": 2}, False, 0.0]),
    ({"const": 1}, [1, 1.0, True, "1", [1]]),
    ({"const": [False]}, [[False], [0], (False,), [None]]),
    ({"const": None}, [None, 0, False, ""]),
    (
        {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
        [{"a": 1}, {"a": "1"}, {"b": 1}, {}, {"a": 1, "b": 2}, [], "a", None],
    ),
    (
        {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
        [{}, {"a": 1}, {"b": 1}, {1: 1}, {"a": 1, "b": None}, []],
    ),
    ({"additionalProperties": {"type": "string"}}, [{}, {"x": "a"}, {"x": 1}, {1: "a"}, 5]),
    (
        {"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
        [{"a": "x"}, {"a": 1}, {"b": 1}, {"b": "x"}, {"a": "x", "b": 2}],
    ),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, [{}, {"ab": 1}, {"a-b": 1}, {1: 2}, "A-B"]),
    ({"propertyNames": {"type": "string"}}, [{"a": 1}, {1: 1}, {None: 1}]),
    ({"maxProperties": 1}, [{}, {"a": 1}, {"a": 1, "b": 2}, [1, 2], "ab"]),
    ({"minProperties": 1}, [{}, {"a": 1}, [], ""]),
    ({"items": {"type": "string"}}, [[], ["a"], ["a", 1], [None], ("a", 1), "ab", {"0": 1}]),
    ({"items": [{"type": "string"}, {"type": "integer"}]}, [[], ["a"], ["a", 1], [1, "a"]]),
    ({"items": [{"type": "string"}]}, [["a", 1, None], [1]]),
    ({"items": False}, [[], [1], "x"]),
    ({"type": "array", "minItems": 1}, [[], [None], (), "a", {}]),
    ({"minItems": 2, "maxItems": 3}, [[1], [1, 2], [1, 2, 3], [1, 2, 3, 4], "abcd", {}]),
    ({"pattern": "^\\d+g$"}, ["10g", "10G", "g", "10g\n", "x10g", 10, None]),
    ({"type": "string", "pattern": "a"}, ["cat", "dog", 1, ["a"]]),
    ({"minLength": 2, "maxLength": 3}, ["a", "ab", "abcd", "\u00e9\u00e9", "\U0001f600", 12345]),
    ({"minimum": 0, "maximum": 10}, [*REALS, -1, 10, 10.5, 11, "5", Decimal("10.5")]),
    ({"type": "integer", "minimum": 1}, [0, 1, 1.0, 0.5, True, "2"]),
    ({"format": "regex"}, ["(", "a+", 1]),
    ({"type": "string", "format": "regex"}, ["(", 1]),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, ANYTHING),
    ({"anyOf": [{"type": "integer"}, {"type": "number"}]}, NUMBERS),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, NUMBERS),
    ({"oneOf": [{"minimum": 0}, {"maximum": 10}]}, [-1, 5, 11, "x"]),
    ({"oneOf": [{}, {}]}, [1]),
    ({"oneOf": [{"type": "string"}, {"type": "boolean"}, {"type": "integer"}]}, NUMBERS),
    ({"allOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 2, 2.0, True, "2"]),
    ({"allOf": []}, [1]),
    ({"not": {"type": "string"}}, ANYTHING),
    ({"not": {"pattern": "^a"}}, ["abc", "bca", 1]),
    ({"$ref": "#/definitions/key", "type": "integer"}, ["abc", 1, "a b"]),
    ({"items": {"$ref": "#/definitions/matrixElement"}}, [[1, "a", True, 1.0, 1.5, None]]),
    (
        "#/definitions/key",
        ["abc", "a b", "x" * 100, "x" * 101, "0a1b2c3d-0000-4000-8000-00000000abcd", "{x}", 5],
    ),
    ("#/definitions/matrixElement", NUMBERS),
    (
        "#/definitions/matrixSetup",
        [["a", 1], {"os": ["a", 1]}, {"o-s": ["a"]}, {"os": "a"}, [], {}],
    ),
    ("#/definitions/agents", [{"queue": "x"}, ["queue=x"], {}, [], "queue=x", [1]]),
    ("#/definitions/automaticRetry", [{"limit": n} for n in (0, 10, 11, -1, 10.0, True, "1")]),
    ("#/definitions/pluginsList", [["x"], [{"a": 1}], [{"a": 1, "b": 2}], [{}], [None]]),
    (
        "#/definitions/dependsOnList",
        [[{"step": "a", "allow_failure": v}] for v in (True, "true", 1, "yes", None)],
    ),
    ("#/definitions/selectField", [{"select": "s", "key": "k", "options": []}]),
    ("#/definitions/selectField/properties/default", ["a", ["a"], [], [1], None]),
    ("#/definitions/ifChanged", ["a", ["a"], {"include": "a"}, {"include": ["a"], "x": 1}, 1]),
    (
        "#/definitions/cache",
        ["p", ["p"], {"paths": ["p"], "size": "20g"}, {"paths": [], "size": "20"}],
    ),
    ("#/definitions/skip", [True, False, "why", "x" * 70, "x" * 71, 1]),
    ("#/definitions/secrets", [["A"], {"A": "b"}, {"A": 1}, "A"]),
    ("#/definitions/buildNotify", [["github_check"], [{"email": "a@b"}], [{"slack": "#c"}], [1]]),
    ("#/definitions/fields", [[{"text": "t", "key": "k"}], [{"text": "t", "key": "k k"}]]),
    (
        "#/definitions/pipelineSteps",
        [
            [_group({"command": "x"})],
            [_group(_group({"command": "x"}))],
            [_group()],
            [_group("wait", {"block": "b"}, {"trigger": "t"}, {"input": "i"})],
            [{"group": "g"}],
            [{"command": "x", "label": 5}, "wait"],
            ["waiter", "block", "input", "wait "],
            [{"wait": None}, {"wait": "w", "if": "x"}, {"command": {"command": "x"}}],
        ],
    ),
    ("#", [{"steps": []}, {}, {"steps": [], "env": {"A": "1"}}, {"steps": [], "agents": 1}]),
]


@pytest.mark.parametrize(("node", "values"), TRICKY, ids=[str(i) for i in range(len(TRICKY))])
def test_the_compiled_verdict_is_jsonschemas_on_tricky_values(node: Any, values: list[Any]) -> None:
    if isinstance(node, str):
        check, oracle_of = compiled(node), validator("" if node == "#" else node)
    else:
        full = json.loads(schema_text())
        root = {**node, "definitions": full["definitions"]} if isinstance(node, dict) else node
        check, oracle_of = compile_schema(node), jsonschema.Draft7Validator(root)
    for value in values:
        assert check(value) is oracle_of.is_valid(value), (node, value)


def test_a_valid_pipeline_never_imports_jsonschema(
    rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The process's imports are the subject: start-up pays for jsonschema only to word
    the problems of an invalid pipeline."""
    valid = tmp_path / "valid.json"
    valid.write_text(json.dumps(max(rendered, key=lambda p: len(json.dumps(p)))))
    code = f"""
        import json, sys
        from ci.errors import Failure
        from ci.schema import require_valid
        pipeline = json.loads(open({str(valid)!r}).read())
        require_valid(pipeline, "valid.yml")
        assert "jsonschema" not in sys.modules, "jsonschema loaded for a valid pipeline"
        step = pipeline["steps"][0]
        (step["steps"][0] if "group" in step else step)["timeout_in_minutes"] = "soon"
        try:
            require_valid(pipeline, "broken.yml")
        except Failure as error:
            print(*error.problems, sep="\\n")
            print("code", error.code)
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        "broken.yml: rendered pipeline fails the Buildkite schema at steps/0/"
    )
    assert lines[0].endswith("timeout_in_minutes: 'soon' is not of type 'integer'")
    assert lines[1:] == ["code 1"]
