"""Every pipeline we emit, checked first against Buildkite's schema (a packaged copy).

A bad pipeline is an exit-1 line naming the field, not a rejection after upload.
The verdict comes from the schema compiled once per process into plain Python
tests, one per schema node, each equal to jsonschema's draft-07 `is_valid`
there (tests/test_schema.py holds them to it on the corpus and on tricky
values). So a valid pipeline never imports jsonschema: importing it costs more
than the whole check. The compiler refuses a keyword it does not know, so an
updated official schema cannot be checked by half.

Only an invalid pipeline loads jsonschema, to word the problems; an invalid
step is validated again against the definition its shape selects, so the line
names the field: `steps/0/steps/5/timeout_in_minutes: 'soon' is not of type 'integer'`.
Where no step is to blame, jsonschema's own errors on the whole pipeline are
the answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Final

from ci.errors import Failure

SCHEMA_FILE = "buildkite-pipeline.schema.json"
MAX_MESSAGE = 160
# A step's kind is the first of these keys it has (`groupStep`...), else `commandStep`.
_KINDS: Final = tuple((key, f"{key}Step") for key in ("group", "trigger", "block", "input", "wait"))

Check = Callable[[Any], bool]

# Keywords that say nothing about validity: the compiler skips them. `definitions`
# holds the `$ref` targets; `fileMatch` is SchemaStore's, which jsonschema ignores.
ANNOTATIONS: Final = frozenset(
    {"$schema", "$comment", "title", "description", "examples", "default", "deprecated"}
    | {"definitions", "fileMatch"}
)
# The keywords each family of instance applies to (any other instance passes them).
_OBJECT: Final = frozenset(
    {"properties", "additionalProperties", "required", "propertyNames"}
    | {"maxProperties", "minProperties"}
)
_ARRAY: Final = frozenset({"items", "minItems", "maxItems"})
_STRING: Final = frozenset({"pattern", "minLength", "maxLength"})
_NUMBER: Final = frozenset({"minimum", "maximum"})
# `format` is an annotation to jsonschema unless it is given a format checker
# (we give none), so it is compiled to nothing.
KEYWORDS: Final = (
    _OBJECT
    | _ARRAY
    | _STRING
    | _NUMBER
    | {"$ref", "type", "enum", "const", "anyOf", "oneOf", "allOf", "not", "format"}
)


class UnknownKeyword(Exception):
    """The packaged schema uses a keyword the compiler has no rule for."""


def schema_text() -> bytes:
    """The packaged schema, read by its path beside this module (`ci` is always installed
    as files): importlib.resources would cost every upload job its import, ~3-10 ms of
    zipfile, tempfile and the rest where nothing else has loaded it."""
    return (Path(__file__).parent / "data" / SCHEMA_FILE).read_bytes()


def clear_cache() -> None:
    """Forget the compiled schema (benchmarks measure a cold plan)."""
    _compiler.cache_clear()


@cache
def _schema() -> dict[str, Any]:
    return json.loads(schema_text())  # type: ignore[no-any-return]


def _at(pointer: str) -> Any:
    """The schema node at a local pointer (`#/definitions/...`; `#` or "" is the root)."""
    node: Any = _schema()
    for part in pointer.removeprefix("#").split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _node(pointer: str) -> Any:
    """The schema at `pointer`, following `$ref`s (draft-07 ignores their siblings)."""
    seen: set[str] = set()
    node: Any = {"$ref": pointer}
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        target = node["$ref"]
        if target in seen or not target.startswith("#/"):
            break
        seen.add(target)
        node = _at(target)
    return node


@cache
def validator(pointer: str = "") -> Any:
    """The jsonschema validator of a place in the schema (`#/definitions/...`; "" is all)."""
    import jsonschema  # type: ignore[import-untyped]

    full = _schema()
    cls = jsonschema.validators.validator_for(full)
    # The place itself is the root: one `$ref` lookup less on every check.
    return cls({**_node(pointer), "definitions": full["definitions"]} if pointer else full)


# -- the compiler: one Python test per schema node, jsonschema's verdict ------------------


def _is_integer(value: Any) -> bool:
    # Draft 6 and later: 1.0 is an integer; True never is (bool is an int to Python only).
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    if isinstance(value, (int, float)):  # what JSON and YAML give; `numbers` costs an import
        return not isinstance(value, bool)
    import numbers

    return isinstance(value, numbers.Number)


# Types that are one isinstance test ("boolean" is: bool has no subclass).
_CLASSES: Final[dict[str, type]] = {
    "string": str,
    "object": dict,
    "array": list,
    "boolean": bool,
    "null": type(None),
}
_TESTS: Final[dict[str, Check]] = {"integer": _is_integer, "number": _is_number}


def _equal(one: Any, two: Any) -> bool:
    """JSON equality as jsonschema's `enum` and `const` see it: True is not 1, 1.0 is 1,
    and any sequence or mapping is compared item by item."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return one is two
    return bool(one == two)


def _all(checks: list[Check]) -> Check:
    if not checks:
        return lambda value: True
    if len(checks) == 1:
        return checks[0]

    def every(value: Any) -> bool:
        for check in checks:
            if not check(value):
                return False
        return True

    return every


class _Compiler:
    """Compiles schema nodes; each `$ref` target once, shared by every place that names it."""

    def __init__(self) -> None:
        self._refs: dict[str, Check] = {}

    def ref(self, pointer: str) -> Check:
        found = self._refs.get(pointer)
        if found is None:
            # A target that refers back to itself reaches the finished test through `late`.
            late: list[Check] = []
            self._refs[pointer] = lambda value: late[0](value)
            found = self._refs[pointer] = self.compile(_at(pointer), pointer)
            late.append(found)
        return found

    def compile(self, node: Any, where: str) -> Check:
        if node is True or node is False:
            verdict = bool(node)
            return lambda value: verdict
        if not isinstance(node, dict):
            raise UnknownKeyword(f"{where}: a schema must be an object or a boolean, not {node!r}")
        if "$ref" in node:  # draft-07: the siblings of `$ref` are ignored
            target = node["$ref"]
            if not isinstance(target, str) or not target.startswith("#"):
                raise UnknownKeyword(f"{where}: only local `$ref`s are compiled, not {target!r}")
            return self.ref(target)
        unknown = sorted(set(node) - KEYWORDS - ANNOTATIONS)
        if unknown:
            raise UnknownKeyword(f"{where}: no compiled rule for schema keyword(s) {unknown}")
        names = node.get("type")
        checks: list[Check] = []
        typed = False  # is the type tested by a family's test?
        for family, kind, build in (
            (_OBJECT, "object", self._object),
            (_ARRAY, "array", self._array),
            (_STRING, "string", self._string),
            (_NUMBER, "number", self._number),
        ):
            if family & node.keys():
                # Given its own single type, the family's test fails any other value.
                typed = typed or names == kind
                checks.append(build(node, where, names == kind))
        if names is not None and not typed:
            checks.insert(0, self._type(names, where))
        if "enum" in node:
            options = node["enum"]
            if all(isinstance(option, str) for option in options):
                strings = frozenset(options)
                checks.append(lambda value: isinstance(value, str) and value in strings)
            else:
                checks.append(lambda value: any(_equal(option, value) for option in options))
        if "const" in node:
            const = node["const"]
            checks.append(lambda value: _equal(value, const))
        if "allOf" in node:
            checks.append(_all(self._each(node["allOf"], f"{where}/allOf")))
        if "anyOf" in node:
            checks.append(_any(self._each(node["anyOf"], f"{where}/anyOf")))
        if "oneOf" in node:
            checks.append(_one(self._each(node["oneOf"], f"{where}/oneOf")))
        if "not" in node:
            inner = self.compile(node["not"], f"{where}/not")
            checks.append(lambda value: not inner(value))
        return _all(checks)

    def _each(self, nodes: list[Any], where: str) -> list[Check]:
        return [self.compile(node, f"{where}/{i}") for i, node in enumerate(nodes)]

    @staticmethod
    def _type(names: Any, where: str) -> Check:
        names = [names] if isinstance(names, str) else names
        unknown = [name for name in names if name not in _CLASSES and name not in _TESTS]
        if unknown:
            raise UnknownKeyword(f"{where}: no compiled rule for type(s) {unknown}")
        classes = tuple(_CLASSES[name] for name in names if name in _CLASSES)
        tests = [_TESTS[name] for name in names if name in _TESTS]
        if not tests:
            return lambda value: isinstance(value, classes)
        return lambda value: isinstance(value, classes) or any(test(value) for test in tests)

    def _object(self, node: dict[str, Any], where: str, strict: bool) -> Check:
        """properties, additionalProperties, required, propertyNames, min/maxProperties:
        one pass over the keys. `strict`: the node's type is "object", so a non-object fails."""
        properties = {
            key: self.compile(sub, f"{where}/properties/{key}")
            for key, sub in node.get("properties", {}).items()
        }
        extra_node = node.get("additionalProperties", True)
        closed = extra_node is False
        extra = None  # the test of each key `properties` does not name, if any
        if isinstance(extra_node, dict):
            extra = self.compile(extra_node, f"{where}/additionalProperties")
        elif not isinstance(extra_node, bool):
            raise UnknownKeyword(f"{where}/additionalProperties: {extra_node!r} is no schema")
        required = tuple(node.get("required", ()))
        names_node = node.get("propertyNames")
        names = None if names_node is None else self.compile(names_node, f"{where}/propertyNames")
        most = node.get("maxProperties")
        least = node.get("minProperties", 0)

        def object_ok(value: Any) -> bool:
            if not isinstance(value, dict):
                return not strict
            if most is not None and len(value) > most:
                return False
            if len(value) < least:
                return False
            for name in required:
                if name not in value:
                    return False
            for key, item in value.items():
                if names is not None and not names(key):
                    return False
                rule = properties.get(key)
                if rule is not None:
                    if not rule(item):
                        return False
                elif closed or (extra is not None and not extra(item)):
                    return False
            return True

        return object_ok

    def _array(self, node: dict[str, Any], where: str, strict: bool) -> Check:
        least = node.get("minItems", 0)
        most = node.get("maxItems")
        items = node.get("items", True)
        each: Check | None = None
        positions: list[Check] = []
        if isinstance(items, list):  # draft-07 tuple form: item i against schema i
            positions = self._each(items, f"{where}/items")
        elif items is not True:
            each = self.compile(items, f"{where}/items")

        def array_ok(value: Any) -> bool:
            if not isinstance(value, list):
                return not strict
            if len(value) < least or (most is not None and len(value) > most):
                return False
            if each is not None:
                for item in value:
                    if not each(item):
                        return False
            for check, item in zip(positions, value, strict=False):
                if not check(item):
                    return False
            return True

        return array_ok

    @staticmethod
    def _string(node: dict[str, Any], where: str, strict: bool) -> Check:
        pattern = re.compile(node["pattern"]) if "pattern" in node else None
        least = node.get("minLength", 0)
        most = node.get("maxLength")

        def string_ok(value: Any) -> bool:
            if not isinstance(value, str):
                return not strict
            if len(value) < least or (most is not None and len(value) > most):
                return False
            return pattern is None or pattern.search(value) is not None

        return string_ok

    @staticmethod
    def _number(node: dict[str, Any], where: str, strict: bool) -> Check:
        least = node.get("minimum")
        most = node.get("maximum")

        def number_ok(value: Any) -> bool:
            if not _is_number(value):
                return not strict
            # Fail on `<` and `>` as jsonschema does, so NaN passes both bounds.
            return not (
                (least is not None and value < least) or (most is not None and value > most)
            )

        return number_ok


def _any(checks: list[Check]) -> Check:
    def any_ok(value: Any) -> bool:
        for check in checks:
            if check(value):
                return True
        return False

    return any_ok


def _one(checks: list[Check]) -> Check:
    """Exactly one passes (as jsonschema, which stops at the second)."""

    def one_ok(value: Any) -> bool:
        found = False
        for check in checks:
            if check(value):
                if found:
                    return False
                found = True
        return found

    return one_ok


@cache
def _compiler() -> _Compiler:
    return _Compiler()


def compiled(pointer: str = "#") -> Check:
    """The compiled test of a place in the schema (`#/definitions/...`; `#` or "" is all)."""
    return _compiler().ref(pointer or "#")


def compile_schema(node: Any) -> Check:
    """A fresh test of any schema `node` whose `$ref`s point into the packaged schema."""
    return _Compiler().compile(node, "#")


# -- the messages: jsonschema's, loaded only for an invalid pipeline ----------------------


def _format(path: list[Any], message: str) -> str:
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return f"{'/'.join(str(p) for p in path) or '<root>'}: {message}"


def _kind(step: dict[Any, Any]) -> str:
    return next((definition for key, definition in _KINDS if key in step), "commandStep")


def _step_ok(step: Any, step_list: str) -> bool:
    return compiled(f"#/definitions/{step_list}/items")(step)


def _against(definition: str, instance: Any, path: list[Any]) -> list[str]:
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

    errors = validator(f"#/definitions/{definition}").iter_errors(instance)
    best = [best_match([error]) for error in errors]
    return [_format([*path, *b.absolute_path], b.message) for b in best]


def _messages(step: Any, path: list[Any]) -> list[str]:
    """Why an invalid step is invalid, said at its fields (may be empty: see _problems)."""
    if not isinstance(step, dict):
        return [_format(path, f"{step!r} is not a valid step")]
    kind = _kind(step)
    children = step.get("steps") if kind == "groupStep" else None
    if not isinstance(children, list) or not children:
        return _against(kind, step, path)
    found = _against(kind, {**step, "steps": [{"command": "true"}]}, path)
    for i, child in enumerate(children):
        if not _step_ok(child, "groupSteps"):
            found += _messages(child, [*path, "steps", i])
    return found


def _problems(pipeline: Any) -> list[str]:
    """jsonschema's words for a pipeline the compiled test rejected: the top level
    without its steps, then each rejected step at its fields."""
    steps = pipeline.get("steps") if isinstance(pipeline, dict) else None
    rest = {**pipeline, "steps": []} if isinstance(steps, list) else pipeline
    errors = validator().iter_errors(rest)
    found = dict.fromkeys(_format(list(e.absolute_path), e.message) for e in errors)
    for i, step in enumerate(steps if isinstance(steps, list) else ()):
        if not _step_ok(step, "pipelineSteps"):
            found.update(dict.fromkeys(_messages(step, ["steps", i])))
    if not found:  # the per-step view missed it (a group in a group): jsonschema's own
        errors = sorted(validator().iter_errors(pipeline), key=lambda e: list(e.absolute_path))
        return [
            f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors
        ]
    return list(found)


def schema_problems(pipeline: Any) -> list[str]:
    """One `path: message` line per problem (empty exactly when jsonschema accepts it)."""
    return [] if compiled()(pipeline) else _problems(pipeline)


def require_valid(pipeline: Any, source: str) -> None:
    """Stop (exit 1) with one line per problem: what every upload checks before it leaves."""
    Failure.collect(
        (
            f"{source}: rendered pipeline fails the Buildkite schema at {p}"
            for p in schema_problems(pipeline)
        ),
    )
