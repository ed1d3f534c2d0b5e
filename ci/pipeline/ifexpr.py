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


def branch_eq(value: str) -> Compare:
    return Compare(Branch(), "==", value)


def branch_ne(value: str) -> Compare:
    return Compare(Branch(), "!=", value)


def all_of(*parts: Expr) -> Expr:
    """`a && b && ...` (a single part is returned as is)."""
    return parts[0] if len(parts) == 1 else And(parts)


def any_of(*parts: Expr) -> Expr:
    """`a || b || ...` (a single part is returned as is)."""
    return parts[0] if len(parts) == 1 else Or(parts)


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
    # An operand needs parentheses when it is opaque text, or an `||` inside an `&&`.
    joiner, bracketed = (" && ", (Opaque, Or)) if isinstance(expr, And) else (" || ", (Opaque,))
    return joiner.join(
        f"({render(p)})" if isinstance(p, bracketed) else render(p) for p in expr.parts
    )


_STR = r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"""
# The subset's only operands are whole comparisons, so each is one token.
_TOKEN = re.compile(
    rf"""\s*(?:
        build\.pull_request\.labels\s+includes\s*(?P<label>{_STR})
      | (?:build\.env\s*\(\s*(?P<env>{_STR})\s*\)|build\.branch)
        \s*(?P<cmp>==|!=)\s*(?P<value>{_STR})
      | (?P<op>&&|\|\||\(|\))
    )""",
    re.VERBOSE,
)


class _Unsupported(Exception):
    pass


def _unquote(token: str) -> str:
    return re.sub(r"\\(.)", r"\1", token[1:-1])


def _comparison(match: re.Match[str]) -> Expr:
    if match["label"]:
        return LabelIncludes(_unquote(match["label"]))
    subject: Subject = Env(_unquote(match["env"])) if match["env"] else Branch()
    return Compare(subject, "==" if match["cmp"] == "==" else "!=", _unquote(match["value"]))


def _tokens(text: str) -> list[Expr | str]:
    """Comparisons as `Expr`s, operators and parentheses as their text."""
    out: list[Expr | str] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        if (match := _TOKEN.match(text, pos)) is None:
            raise _Unsupported(f"unsupported syntax at {text[pos:].strip()[:20]!r}")
        out.append(match["op"] or _comparison(match))
        pos = match.end()
    return out


_LEVELS = (("||", any_of), ("&&", all_of))  # loosest first


class _Parser:
    """`||` binds looser than `&&`; `( … )` is kept as `Paren`."""

    def __init__(self, tokens: list[Expr | str]) -> None:
        self.rest = tokens[::-1]  # pop() takes the next token

    def skip(self, op: str) -> bool:
        """Consume the operator `op` when it comes next."""
        found = bool(self.rest) and self.rest[-1] == op
        if found:
            self.rest.pop()
        return found

    def chain(self, level: int = 0) -> Expr:
        """Operands joined by the operator of `level` (`_LEVELS`), each a chain of the next."""
        if level == len(_LEVELS):
            return self.atom()
        op, join = _LEVELS[level]
        parts = [self.chain(level + 1)]
        while self.skip(op):
            parts.append(self.chain(level + 1))
        return join(*parts)

    def atom(self) -> Expr:
        if self.skip("("):
            inner = self.chain()
            if not self.skip(")"):
                raise _Unsupported("expected )")
            return Paren(inner)
        token = self.rest.pop() if self.rest else "end of expression"
        if isinstance(token, str):
            raise _Unsupported(f"expected a comparison, got {token!r}")
        return token


def parse(text: str) -> Expr:
    """The expression tree; text outside the subset comes back as `Opaque` (never raises)."""
    try:
        parser = _Parser(_tokens(text))
        expr = parser.chain()
        if parser.rest:
            raise _Unsupported(f"unexpected {parser.rest[-1]!r}")
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
