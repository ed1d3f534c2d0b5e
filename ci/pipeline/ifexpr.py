"""Buildkite `if` expressions: parse, build, render and evaluate one small subset.

Gates use only `build.env("X")`, `build.branch`, `build.pull_request.labels includes
"x"`, `==`, `!=`, `&&`, `||` and parentheses, kept as `Paren` nodes so that
`render(parse(s))` is `s`; text outside the subset is `Opaque` (evaluated as None).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

Op = Literal["==", "!="]


@dataclass(frozen=True)
class Env:
    """`build.env("NAME")`: the build's environment variable (None when unset)."""

    name: str


@dataclass(frozen=True)
class Branch:
    """`build.branch`."""


Subject = Env | Branch


@dataclass(frozen=True)
class Compare:
    subject: Subject
    op: Op
    value: str


@dataclass(frozen=True)
class LabelIncludes:
    """`build.pull_request.labels includes "label"`."""

    label: str


@dataclass(frozen=True)
class And:
    parts: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Expr, ...]


@dataclass(frozen=True)
class Paren:
    """Parentheses written by a person (or a builder); kept so rendering round-trips."""

    inner: Expr


@dataclass(frozen=True)
class Opaque:
    """Text outside the subset: kept verbatim, never evaluated."""

    text: str
    reason: str = field(default="", compare=False)


Expr = Compare | LabelIncludes | And | Or | Paren | Opaque


def env_eq(name: str, value: str) -> Compare:
    return Compare(Env(name), "==", value)


def env_ne(name: str, value: str) -> Compare:
    return Compare(Env(name), "!=", value)


def branch_eq(value: str) -> Compare:
    return Compare(Branch(), "==", value)


def branch_ne(value: str) -> Compare:
    return Compare(Branch(), "!=", value)


def label(name: str) -> LabelIncludes:
    return LabelIncludes(name)


def all_of(*parts: Expr) -> Expr:
    """`a && b && ...` (a single part is returned as is)."""
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def any_of(*parts: Expr) -> Expr:
    """`a || b || ...` (a single part is returned as is)."""
    return parts[0] if len(parts) == 1 else Or(tuple(parts))


def paren(inner: Expr) -> Paren:
    return inner if isinstance(inner, Paren) else Paren(inner)


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def render(expr: Expr) -> str:
    """Buildkite syntax. Parentheses appear where the tree has `Paren`, or where needed."""
    if isinstance(expr, Compare):
        subject = expr.subject
        name = f"build.env({_quote(subject.name)})" if isinstance(subject, Env) else "build.branch"
        return f"{name} {expr.op} {_quote(expr.value)}"
    if isinstance(expr, LabelIncludes):
        return f"build.pull_request.labels includes {_quote(expr.label)}"
    if isinstance(expr, Paren):
        return f"({render(expr.inner)})"
    if isinstance(expr, Opaque):
        return expr.text
    if isinstance(expr, And):
        return " && ".join(_operand(p, inside=And) for p in expr.parts)
    return " || ".join(_operand(p, inside=Or) for p in expr.parts)


def _operand(part: Expr, *, inside: type[And] | type[Or]) -> str:
    needs = isinstance(part, Opaque) or (inside is And and isinstance(part, Or))
    text = render(part)
    return f"({text})" if needs else text


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<op>&&|\|\||==|!=|\(|\))
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    )""",
    re.VERBOSE,
)


class _Unsupported(Exception):
    pass


def _unquote(token: str) -> str:
    return re.sub(r"\\(.)", r"\1", token[1:-1])


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise _Unsupported(f"unsupported syntax at {text[pos:].strip()[:20]!r}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, kind: str, value: str | None = None) -> str:
        tok = self.peek()
        if tok is None or tok[0] != kind or value not in (None, tok[1]):
            got = "end of expression" if tok is None else repr(tok[1])
            raise _Unsupported(f"expected {value or kind}, got {got}")
        self.i += 1
        return tok[1]

    def skip(self, op: str) -> bool:
        """Consume the operator `op` when it comes next."""
        found = self.peek() == ("op", op)
        self.i += found
        return found

    def parse_or(self) -> Expr:
        parts = [self.parse_and()]
        while self.skip("||"):
            parts.append(self.parse_and())
        return any_of(*parts)

    def parse_and(self) -> Expr:
        parts = [self.parse_atom()]
        while self.skip("&&"):
            parts.append(self.parse_atom())
        return all_of(*parts)

    def parse_atom(self) -> Expr:
        if self.skip("("):
            inner = self.parse_or()
            self.take("op", ")")
            return Paren(inner)
        name = self.take("name")
        if name == "build.pull_request.labels":
            self.take("name", "includes")
            return LabelIncludes(_unquote(self.take("str")))
        subject: Subject
        if name == "build.env":
            self.take("op", "(")
            subject = Env(_unquote(self.take("str")))
            self.take("op", ")")
        elif name == "build.branch":
            subject = Branch()
        else:
            raise _Unsupported(f"{name} is outside the supported subset")
        op: Op = "==" if self.skip("==") else "!="
        if op == "!=" and not self.skip("!="):
            raise _Unsupported(f"expected == or != after {name}")
        return Compare(subject, op, _unquote(self.take("str")))


def parse(text: str) -> Expr:
    """The expression tree; text outside the subset comes back as `Opaque` (never raises)."""
    try:
        parser = _Parser(_tokens(text))
        expr = parser.parse_or()
        if (extra := parser.peek()) is not None:
            raise _Unsupported(f"unexpected {extra[1]!r}")
    except _Unsupported as exc:
        return Opaque(text.strip(), str(exc))
    return expr


@dataclass(frozen=True)
class Context:
    """What Buildkite knows when it evaluates an `if`: branch, PR labels, build env."""

    branch: str = ""
    labels: frozenset[str] = frozenset()
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, branch: str = "", labels: Iterable[str] = (), env: Mapping[str, str] | None = None
    ) -> Context:
        return cls(branch, frozenset(labels), dict(env or {}))


def evaluate(expr: Expr, ctx: Context) -> bool | None:
    """True/False, or None when some part is `Opaque` and decides the result (Kleene logic)."""
    if isinstance(expr, Compare):
        actual = ctx.branch if isinstance(expr.subject, Branch) else ctx.env.get(expr.subject.name)
        return (actual == expr.value) == (expr.op == "==")
    if isinstance(expr, LabelIncludes):
        return expr.label in ctx.labels
    if isinstance(expr, Paren):
        return evaluate(expr.inner, ctx)
    if isinstance(expr, Opaque):
        return None
    values = [evaluate(p, ctx) for p in expr.parts]
    decisive = isinstance(expr, Or)  # the value one part settles the whole with
    if decisive in values:
        return decisive
    return None if None in values else not decisive


def is_evaluable(expr: Expr) -> bool:
    """False when the tree holds any `Opaque` part."""
    if isinstance(expr, Paren):
        return is_evaluable(expr.inner)
    if isinstance(expr, And | Or):
        return all(map(is_evaluable, expr.parts))
    return not isinstance(expr, Opaque)


def check(text: str, ctx: Context) -> bool | None:
    """Parse and evaluate in one call (None = not evaluable)."""
    return evaluate(parse(text), ctx)
