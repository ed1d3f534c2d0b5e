"""The `if` module: every `if` of ../shared parses, renders and evaluates.

Sources: the corpus YAMLs, the spec's tables and code spans, both sides of the
seed diffs' `if:` lines (the labels the seed removed included), and the
examples of Buildkite's schema.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci.pipeline import ifexpr as x
from tests.conftest import SHARED, from_shared, need_shared, shared_params

SPEC = SHARED / "spec"
CORPUS = SHARED / "vllm-omni"
SEEDS = SHARED / "seeds"
SCHEMA = SHARED / "schemas"
_IF_LINE = re.compile(r"^(?P<indent>\s*)(?:-\s+)?if:\s*(?P<value>.*)$")
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|&&|\|\||==|!=|[()]|[^\s()"\']+')


def tokens(text: str) -> list[str]:
    return [t.replace("'", '"') if t.startswith("'") else t for t in _TOKENS.findall(text)]


def _ifs(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "if" and isinstance(value, str):
                found.append(value)
            found += _ifs(value)
    elif isinstance(node, list):
        for item in node:
            found += _ifs(item)
    return found


def corpus_ifs() -> list[str]:
    found: list[str] = []
    for path in sorted(CORPUS.rglob("*.yml")):
        for document in yaml.safe_load_all(path.read_text()):
            found += _ifs(document)
    return list(dict.fromkeys(found))


def named_expressions() -> dict[str, str]:
    """The spec §3.2 table of named expressions (NAME -> text, with names inside)."""
    table: dict[str, str] = {}
    for line in need_shared(SPEC / "pipeline.md").read_text().splitlines():
        match = re.match(r"^\| ([A-Z]+_[A-Z0-9_]+) \| `(.*)` \|$", line)
        if match:
            table[match.group(1)] = match.group(2).replace("\\|", "|")
    return table


def expand_names(text: str, table: dict[str, str]) -> str:
    """Textual substitution, as the spec describes (inner references keep their parens)."""
    while True:
        done = re.sub(r"\b[A-Z][A-Z0-9_]+\b", lambda m: table.get(m.group(0), m.group(0)), text)
        if done == text:
            return done
        text = done


def spec_ifs() -> list[str]:
    table = named_expressions()
    found: list[str] = []
    for path in sorted(SPEC.glob("*.md")):
        for span in re.findall(r"`([^`\n]+)`", path.read_text()):
            text = span.replace("\\|", "|").removeprefix("if: ").strip()
            if ("==" in text or "!=" in text or "includes" in text) and (
                text.startswith(("build.", "(")) or text in table.values()
            ):
                found.append(expand_names(text, table))
    found += [expand_names(name, table) for name in table]
    return list(dict.fromkeys(found))


def diff_sides(diff: Path) -> tuple[list[str], list[str]]:
    """The old ("-" and context) and new ("+" and context) lines; hunks split by blanks."""
    old: list[str] = []
    new: list[str] = []
    for line in diff.read_text().splitlines():
        if line.startswith(("@@", "---", "+++", "\\", "diff ")):
            old.append("")
            new.append("")
            continue
        tag, body = (line[:1], line[1:]) if line else (" ", "")
        if tag in " -":
            old.append(body)
        if tag in " +":
            new.append(body)
    return old, new


def if_lines(lines: list[str]) -> list[str]:
    """The value of every `if:` key, folded/literal block scalars included."""
    found: list[str] = []
    for i, line in enumerate(lines):
        match = _IF_LINE.match(line)
        if match is None:
            continue
        snippet = f"if: {match['value']}\n"
        if match["value"].startswith((">", "|")):
            for following in lines[i + 1 :]:
                indent = len(following) - len(following.lstrip())
                if not following.strip() or indent <= len(match["indent"]):
                    break
                snippet += following + "\n"
        value = yaml.safe_load(snippet)["if"]
        if isinstance(value, str):
            found.append(value)
    return found


def seed_ifs() -> list[str]:
    found: list[str] = []
    for diff in sorted(SEEDS.rglob("*.yml.diff")):
        for side in diff_sides(diff):
            found += if_lines(side)
    return list(dict.fromkeys(found))


def schema_ifs() -> list[str]:
    schema = json.loads((SCHEMA / "buildkite-pipeline.schema.json").read_text())
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("if"), dict):
                found.extend(e for e in node["if"].get("examples", []) if isinstance(e, str))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return list(dict.fromkeys(found))


# Read at collection time; without ../shared, empty (and the tests below fail, naming it).
CORPUS_IFS: list[str] = from_shared(corpus_ifs, [])
SPEC_IFS: list[str] = from_shared(spec_ifs, [])
SEED_IFS: list[str] = from_shared(seed_ifs, [])
SCHEMA_IFS: list[str] = from_shared(schema_ifs, [])
ALL_IFS = list(dict.fromkeys(CORPUS_IFS + SPEC_IFS + SEED_IFS + SCHEMA_IFS))
OPAQUE = {t for t in ALL_IFS if "build.message" in t or t.startswith("__")}
CONTEXTS = [
    x.Context.of("main"),
    x.Context.of("main", env={"NIGHTLY": "1"}),
    x.Context.of("main", env={"WEEKLY": "1"}),
    x.Context.of("main", env={"NON_CRITICAL": "1", "EMAIL_DISTRIBUTION": "1"}),
    x.Context.of("feature", ["ready", "nightly-test"]),
    x.Context.of("feature", ["merge-test", "weekly-test"]),
]


def test_the_inputs_were_found() -> None:
    need_shared()
    assert len(CORPUS_IFS) >= 10
    assert len(SPEC_IFS) >= 15
    assert 'build.env("NIGHTLY") == "1" && build.env("EMAIL_DISTRIBUTION") == "1"' in CORPUS_IFS
    assert "__IMAGE_BUILD_IF__" in OPAQUE
    # The seed diffs: the labels the seed removed, and the `>-` folded group gates.
    assert (
        'build.env("NIGHTLY") == "1" || build.pull_request.labels includes "nightly-test" || '
        'build.pull_request.labels includes "diffusion-x2v-test"'
    ) in SEED_IFS
    assert 'build.env("NIGHTLY") != "1"' in SEED_IFS
    assert len(SEED_IFS) >= 10
    assert SCHEMA_IFS == ["build.message != 'skip me'", "build.branch == 'master'"]


@pytest.mark.parametrize("text", shared_params(lambda: sorted(set(ALL_IFS) - OPAQUE)))
def test_every_if_parses_renders_and_evaluates(text: str) -> None:
    expr = x.parse(text)
    assert x.is_evaluable(expr), getattr(expr, "reason", "")
    rendered = x.render(expr)
    assert tokens(rendered) == tokens(text)
    assert x.parse(rendered) == expr
    for ctx in CONTEXTS:
        assert x.evaluate(expr, ctx) in (True, False)


@pytest.mark.parametrize("text", shared_params(lambda: sorted(OPAQUE)))
def test_outside_the_subset_is_kept_verbatim(text: str) -> None:
    expr = x.parse(text)
    assert isinstance(expr, x.Opaque)
    assert x.render(expr) == text.strip()
    assert x.evaluate(expr, CONTEXTS[0]) is None
    assert not x.is_evaluable(expr)


@pytest.mark.parametrize(
    "text",
    [
        "true",
        'build.env("A") =~ /x/',
        "!build.pull_request.draft",
        'build.env("A") == "1" &&',
        '(build.branch == "main"',
        "build.branch == main",
        'build.env(A) == "1"',
        "build.pull_request.labels includes 1",
        "",
    ],
)
def test_unsupported_syntax_is_opaque(text: str) -> None:
    expr = x.parse(text)
    assert isinstance(expr, x.Opaque) and expr.reason


NIGHTLY_GROUP = 'build.env("NIGHTLY") == "1" || build.pull_request.labels includes "nightly-test"'


@pytest.mark.parametrize(
    ("ctx", "expected"),
    [
        (x.Context.of("main", env={"NIGHTLY": "1"}), True),
        (x.Context.of("feature", ["nightly-test"]), True),
        (x.Context.of("feature", ["ready"]), False),
        (x.Context.of("main", env={"NIGHTLY": "0"}), False),
    ],
)
def test_nightly_group_gate(ctx: x.Context, expected: bool) -> None:
    assert x.check(NIGHTLY_GROUP, ctx) is expected


def test_unset_env_compares_unequal() -> None:
    merge_main = expand_names("MERGE_MAIN", named_expressions())
    assert x.check(merge_main, x.Context.of("main")) is True
    assert x.check(merge_main, x.Context.of("main", env={"WEEKLY": "1"})) is False
    assert x.check('build.env("X") == ""', x.Context.of("main")) is False


def test_kleene_logic_with_opaque_parts() -> None:
    unknown = x.parse('build.message == "x"')
    main = x.branch_eq("main")
    both = x.all_of(unknown, main)
    either = x.any_of(unknown, main)
    assert x.evaluate(both, x.Context.of("dev")) is False
    assert x.evaluate(both, x.Context.of("main")) is None
    assert x.evaluate(either, x.Context.of("main")) is True
    assert x.evaluate(either, x.Context.of("dev")) is None
    assert x.render(both) == '(build.message == "x") && build.branch == "main"'


def test_builders_render_the_spec_strings() -> None:
    nightly_main = x.all_of(x.branch_eq("main"), x.env_eq("NIGHTLY", "1"))
    nightly_label = x.any_of(
        x.Paren(nightly_main),
        x.Paren(x.all_of(x.branch_ne("main"), x.LabelIncludes("nightly-test"))),
    )
    table = named_expressions()
    assert x.render(nightly_main) == table["NIGHTLY_MAIN"]
    assert x.render(nightly_label) == expand_names("NIGHTLY_LABEL", table)
    weekly_main = x.all_of(
        x.branch_eq("main"),
        x.Paren(x.any_of(x.env_eq("WEEKLY", "1"), x.env_eq("NON_CRITICAL", "1"))),
    )
    assert x.render(weekly_main) == table["WEEKLY_MAIN"]
    u2_image = x.Paren(x.any_of(x.Paren(nightly_main), x.Paren(weekly_main)))
    assert x.render(u2_image) == (
        '((build.branch == "main" && build.env("NIGHTLY") == "1") || '
        '(build.branch == "main" && (build.env("WEEKLY") == "1" || '
        'build.env("NON_CRITICAL") == "1")))'
    )


def test_precedence_adds_parentheses_only_where_needed() -> None:
    a, b, c = x.env_eq("A", "1"), x.env_eq("B", "1"), x.LabelIncludes("c")
    assert x.render(x.all_of(x.any_of(a, b), c)) == (
        '(build.env("A") == "1" || build.env("B") == "1") && build.pull_request.labels includes "c"'
    )
    assert x.render(x.any_of(x.all_of(a, b), c)) == (
        'build.env("A") == "1" && build.env("B") == "1" || build.pull_request.labels includes "c"'
    )
    assert x.parse(x.render(x.any_of(x.all_of(a, b), c))) == x.any_of(x.all_of(a, b), c)


def test_quotes_and_escapes() -> None:
    expr = x.parse("build.env('A B') == 'it\\'s'")
    assert expr == x.env_eq("A B", "it's")
    assert x.render(expr) == 'build.env("A B") == "it\'s"'
    tricky = x.env_eq("Q", 'say "hi" && go')
    assert x.parse(x.render(tricky)) == tricky


def test_and_binds_tighter_than_or() -> None:
    expr = x.parse('build.branch == "a" || build.branch == "b" && build.env("X") == "1"')
    assert isinstance(expr, x.Or)
    assert x.evaluate(expr, x.Context.of("a")) is True
    assert x.evaluate(expr, x.Context.of("b")) is False
    assert x.evaluate(expr, x.Context.of("b", env={"X": "1"})) is True


def test_source_of_truth_files_exist() -> None:
    assert need_shared(SPEC / "pipeline.md").is_file()
