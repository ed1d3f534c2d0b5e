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


def load(path: str | Path) -> Any:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{p}: cannot read: {exc.strerror or exc}", code=1) from None
    return loads(text, source=str(p))


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
