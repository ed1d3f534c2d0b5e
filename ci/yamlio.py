"""YAML in and out, with libyaml's C loader/dumper when present (pipelines are big)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ci.errors import UserError


def loads(text: str, *, source: str = "<string>") -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        raise UserError(f"{source}: invalid YAML{_where(exc)}", code=1) from None


def _where(exc: Any) -> str:
    """One line for a YAML error: `at line L, column C: problem` (PyYAML's text spans lines)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        return ": " + " ".join(str(exc).split())
    return f" at line {mark.line + 1}, column {mark.column + 1}: {problem}"


def read_text(path: Path, source: str, *, code: int = 1) -> str:
    """A text file the task depends on; unreadable or not UTF-8 is one error line."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{source}: cannot read: {exc.strerror or exc}", code=code) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{source}: {not_utf8(exc)}", code=code) from None


def not_utf8(exc: UnicodeDecodeError) -> str:
    return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"


def problem(exc: Any) -> str:
    """A YAML error as one line: `invalid YAML at line L, column C: problem`."""
    return f"invalid YAML{_where(exc)}"


def load(path: str | Path) -> Any:
    p = Path(path)
    return loads(read_text(p, str(p)), source=str(p))


def dumps(data: Any) -> str:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return str(
        yaml.dump(
            data,
            Dumper=dumper,
            sort_keys=False,
            default_flow_style=False,
            allow_unicode=True,
            width=1 << 20,
        )
    )
