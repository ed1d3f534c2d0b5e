"""YAML edited as text: each change replaces one span, found through PyYAML's composer.

A composed node knows where it starts and ends in the text, so a new value
replaces exactly its scalar and every other byte (comments, key order,
anchors, blank lines) stays. A replaced scalar keeps its style where the new
text allows: plain stays plain when it still reads back as the same string,
single-quoted stays single-quoted on one line, anything else becomes
double-quoted. In a literal block (`|`) only the lines that change are
rewritten, at the block's indentation; a folded block (`>`) becomes its new
one-line value. Where a block does not map line by line onto its value, no
span is offered and the caller lists the scalar for a person.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ci import yamlio

COMMAND_KEYS = ("command", "commands")


@dataclass(frozen=True)
class Splice:
    """Text[start:end] becomes `text`."""

    start: int
    end: int
    text: str


def splice(text: str, splices: Iterable[Splice]) -> str:
    out, at = [], 0
    for part in sorted(splices, key=lambda s: (s.start, s.end)):
        if part.start < at:
            raise ValueError(f"overlapping edits at offset {part.start}")
        out += [text[at : part.start], part.text]
        at = part.end
    return "".join([*out, text[at:]])


def compose(text: str, source: str) -> list[Any]:
    """The documents' root nodes; the text passes the one YAML loader's checks first."""
    import yaml

    yamlio.loads_all(text, source=source)
    return list(yaml.compose_all(text, Loader=yaml.SafeLoader))


def mappings(node: Any, seen: set[int] | None = None) -> Iterator[Any]:
    """Every mapping node under `node`, each once (an alias is its anchor's node)."""
    import yaml

    seen = set() if seen is None else seen
    if id(node) in seen or not isinstance(node, yaml.CollectionNode):
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        yield node
        children = [n for pair in node.value for n in pair]
    else:
        children = node.value
    for child in children:
        yield from mappings(child, seen)


def pairs(mapping: Any) -> dict[str, tuple[Any, Any]]:
    """A mapping node's plain-string keys, each with its (key node, value node)."""
    return {k.value: (k, v) for k, v in mapping.value if k.tag == "tag:yaml.org,2002:str"}


def field(mapping: Any, key: str) -> Any:
    """The value node of `key` in a mapping node, or None."""
    return pairs(mapping).get(key, (None, None))[1]


def scalar(node: Any) -> str | None:
    import yaml

    return node.value if isinstance(node, yaml.ScalarNode) else None


def own_commands(mapping: Any) -> list[Any]:
    """The string scalars of the mapping's own `command`/`commands` value."""
    import yaml

    found = []
    for key in COMMAND_KEYS:
        value = field(mapping, key)
        items = value.value if isinstance(value, yaml.SequenceNode) else [value]
        found += [
            item
            for item in items
            if isinstance(item, yaml.ScalarNode) and item.tag == "tag:yaml.org,2002:str"
        ]
    return found


def command_scalars(roots: Iterable[Any]) -> list[Any]:
    """Every command scalar under `roots`, each once, in text order."""
    seen: set[int] = set()
    found = {id(n): n for root in roots for m in mappings(root, seen) for n in own_commands(m)}
    return sorted(found.values(), key=lambda n: n.start_mark.index)


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _starts(text: str) -> list[int]:
    """Each line's start offset, plus the text's length."""
    return [0, *(m.end() for m in re.finditer("\n", text)), len(text) + 1]


def newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _plain_ok(value: str) -> bool:
    import yaml

    if not value or value != value.strip() or any(c in value for c in "\n,[]{}"):
        return False
    try:
        return bool(yaml.safe_load(f"k: {value}") == {"k": value})
    except yaml.YAMLError:
        return False


def flow_text(value: str, style: str | None) -> str:
    """`value` written as a scalar in `style` (None: plain) where it can be, else double-quoted."""
    if style is None and _plain_ok(value):
        return value
    if style == "'" and "\n" not in value:
        return "'" + value.replace("'", "''") + "'"
    return json.dumps(value, ensure_ascii=False)  # JSON strings are YAML double-quoted scalars


def _body(value: str) -> tuple[list[str], int]:
    """A block scalar's lines without the trailing line breaks, and how many there were."""
    lines = value.split("\n")
    ends = 0
    while lines and lines[-1] == "":
        lines.pop()
        ends += 1
    return lines, ends


def replace_scalar(text: str, node: Any, value: str) -> Splice | None:
    """The splice that makes scalar `node` read `value`; None where a block cannot take it."""
    if node.style not in ("|", ">"):
        return Splice(node.start_mark.index, node.end_mark.index, flow_text(value, node.style))
    starts, nl = _starts(text), newline(text)
    old, old_ends = _body(node.value)
    new, new_ends = _body(value)
    first = node.start_mark.line + 1  # the line after the `|` / `>` header
    if old_ends != new_ends or not old or not new:
        return None
    if node.style == ">":
        if len(new) != 1:
            return None
        # The end mark is at the start of the line after the block's trailing blank lines
        # (or at the end of the text): the content is the non-blank lines before it.
        last = node.end_mark.line + (node.end_mark.column > 0)
        lines = [text[starts[i] : starts[i + 1]] for i in range(first, last)]
        content = [i for i, line in enumerate(lines) if line.strip()]
        line = lines[content[0]]
        indent = line[: len(line) - len(line.lstrip())]
        return Splice(starts[first], starts[first + content[-1] + 1], indent + new[0] + nl)
    if first + len(old) >= len(starts):
        return None
    source = [text[starts[first + i] : starts[first + i + 1]] for i in range(len(old))]
    indents = set()
    for src, line in zip(source, old, strict=True):
        bare = src.rstrip("\r\n")
        if line and not bare.endswith(line):
            return None
        indents |= {bare[: len(bare) - len(line)]} if line else set()
    indent = indents.pop() if len(indents) == 1 else ""
    if not indent or indent.strip():
        return None
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += source[i1:i2]
        else:
            out += [(indent + line if line else "") + nl for line in new[j1:j2]]
    return Splice(starts[first], starts[first + len(old)], "".join(out))
