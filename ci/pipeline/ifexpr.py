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


# --------------------------------------------------------------------------- Buildkite's syntax

# Buildkite's whole conditional language, for a syntax check only (the subset above is what
# is evaluated): literals, `build.…` paths and calls, comparisons, `!`, `&&`, `||`, `( )`.
_LEX = re.compile(
    r"""\s*(?:
        (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<num>-?\d+(?:\.\d+)?)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>&&|\|\||==|!=|=~|!~|!|\(|\)|\.|,|\[|\])
    )""",
    re.VERBOSE,
)
_REGEX = re.compile(r"\s*/(?:[^/\\\n]|\\.)*/[a-z]*")
_COMPARE = ("==", "!=", "=~", "!~", "includes")
_WORDS = ("true", "false", "null")


class _SyntaxError(Exception):
    pass


def _lex(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens; a `/regex/` only where a pattern is expected (after =~ or !~)."""
    tokens: list[tuple[str, str]] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        if tokens and tokens[-1][1] in ("=~", "!~") and (found := _REGEX.match(text, pos)):
            tokens.append(("literal", found.group().strip()))
            pos = found.end()
            continue
        match = _LEX.match(text, pos)
        if match is None or match.end() == pos:
            rest = text[pos:].strip()
            if rest[:1] in "\"'":
                raise _SyntaxError(f"a string is not closed: {rest[:20]!r}")
            raise _SyntaxError(f"unexpected {rest[:20]!r}")
        kind = match.lastgroup or ""
        word = match.group(kind)
        if kind == "name" and word == "includes":
            kind = "op"
        elif kind in ("str", "num") or (kind == "name" and word in _WORDS):
            kind = "literal"
        tokens.append((kind, word))
        pos = match.end()
    return tokens


class _Checker:
    """Recursive descent over Buildkite's grammar; raises `_SyntaxError` where it breaks."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.at = tokens, 0

    def peek(self) -> str:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else ""

    def take(self, *words: str) -> bool:
        found = self.at < len(self.tokens) and self.tokens[self.at][1] in words
        self.at += found
        return found

    def expression(self) -> None:
        self.conjunction()
        while self.take("||"):
            self.conjunction()

    def conjunction(self) -> None:
        self.unary()
        while self.take("&&"):
            self.unary()

    def unary(self) -> None:
        if self.take("!"):
            self.unary()
            return
        self.operand()
        if self.take(*_COMPARE):
            self.operand()

    def operand(self) -> None:
        if self.at >= len(self.tokens):
            raise _SyntaxError("the expression ends where a value is expected")
        kind, word = self.tokens[self.at]
        self.at += 1
        if word == "(" and kind == "op":
            self.expression()
            self.close(")")
        elif word == "[" and kind == "op":
            self.items("]")
        elif kind == "name":
            while self.take("."):
                if self.at >= len(self.tokens) or self.tokens[self.at][0] != "name":
                    raise _SyntaxError(f"expected a name after {word!r}.")
                self.at += 1
            if self.take("("):
                self.items(")")
        elif kind != "literal":
            raise _SyntaxError(f"expected a value, got {word!r}")

    def items(self, closing: str) -> None:
        """Comma-separated expressions up to `closing` (a call's arguments, an array)."""
        if self.take(closing):
            return
        self.expression()
        while self.take(","):
            self.expression()
        self.close(closing)

    def close(self, closing: str) -> None:
        if not self.take(closing):
            raise _SyntaxError(f"expected {closing!r}, got {self.peek() or 'the end'!r}")


def syntax_problem(text: str) -> str:
    """Why Buildkite cannot parse `text` as a conditional ("" when it can)."""
    try:
        checker = _Checker(_lex(text))
        checker.expression()
        if checker.at < len(checker.tokens):
            raise _SyntaxError(f"unexpected {checker.peek()!r} after a complete expression")
    except _SyntaxError as exc:
        return str(exc)
    return ""
