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
        raise UserError(f"{source}: invalid YAML: {exc}", code=1) from None


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
