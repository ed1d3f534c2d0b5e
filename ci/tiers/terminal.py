"""Text for a terminal: words kept whole, `:emoji:` shortcodes dropped, tables that fit.

For the tier and plan tables on a terminal. Buildkite's `:rocm:` shortcodes are
dropped when they stand alone; columns that say nothing are left out; when no
whole-word layout fits, the caller prints lines instead.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

# A Buildkite emoji shortcode that is a word of its own (`:rocm: Foo`, `Foo :docker:`).
_EMOJI = re.compile(r"(?<!\S):[a-z0-9_+-]+:(?!\S)")


def strip_emoji(text: str) -> str:
    """`:rocm: Foo` -> `Foo`; text that is nothing but shortcodes is kept as it is."""
    stripped = " ".join(_EMOJI.sub(" ", text).split())
    return stripped or text


def wrap(text: str, width: int, indent: str = "", hang: str = "  ") -> list[str]:
    """`text` as lines of at most `width` columns, broken only between words (`indent + hang`
    before continuation lines)."""
    if width <= len(indent) + 1:
        return [indent + text.strip()]
    wrapper = textwrap.TextWrapper(
        width=width,
        initial_indent=indent,
        subsequent_indent=indent + hang,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return wrapper.wrap(text.strip()) or [indent]


@dataclass(frozen=True)
class Columns:
    """The columns worth showing, and what the dropped ones said on every row."""

    keep: tuple[int, ...]  # indexes into the original columns
    same: tuple[tuple[str, str], ...]  # (header, the one value) of dropped constant columns


def informative(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    always: Sequence[str] = (),
    constant: bool = True,
) -> Columns:
    """Drop columns empty on every row; with `constant`, also those equal on two rows or
    more; never those named in `always`."""
    keep: list[int] = []
    same: list[tuple[str, str]] = []
    for index, header in enumerate(headers):
        values = {row[index] for row in rows}
        if header in always or not rows:
            keep.append(index)
        elif constant and len(rows) > 1 and len(values) == 1 and values != {""}:
            same.append((header, next(iter(values))))
        elif values != {""}:
            keep.append(index)
    return Columns(tuple(keep), tuple(same))


def widths(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[int] | None:
    """Column widths (without padding) that keep every word whole in `width` columns.

    Each column gets its longest word to its longest line, the spare room going
    first to those that want the most; None when the minimums do not fit.
    """
    from rich.cells import cell_len

    count = len(headers)
    if not count:
        return []
    columns = [[headers[i], *(row[i] for row in rows)] for i in range(count)]
    low = [max([1, *(cell_len(w) for c in column for w in c.split())]) for column in columns]
    high = [
        max([low[i], *(cell_len(line) for c in column for line in c.splitlines())])
        for i, column in enumerate(columns)
    ]
    # rich's box: a border before each column and at the end, padding 1+1.
    room = width - 3 * count - 1
    if sum(high) <= room:
        return high
    if sum(low) > room:
        return None
    given = list(low)
    spare = room - sum(low)
    while spare > 0:
        wanting = [i for i in range(count) if given[i] < high[i]]
        if not wanting:
            break
        share = max(spare // len(wanting), 1)
        for i in sorted(wanting, key=lambda i: high[i] - given[i], reverse=True):
            step = min(share, high[i] - given[i], spare)
            given[i] += step
            spare -= step
            if spare <= 0:
                break
    return given
