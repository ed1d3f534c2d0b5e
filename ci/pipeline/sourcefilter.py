"""`source_file_dependencies`: which steps a diff keeps.

Pure functions over the changed paths the diff resolver (`ci.diff`) gives, so
`plan`, the bootstrap and the uploader filter alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ci.pipeline import model
from ci.pipeline.registries import FALLBACK_KEY, SOURCE_REGISTRY, SourceRegistry, fail

FIELD = "source_file_dependencies"
KEY_SHAPE = re.compile(r"^[a-z][a-z0-9_]*$")


def _keys(
    keys: Sequence[str], label: str, sources: Callable[[], SourceRegistry]
) -> tuple[str, ...]:
    if FALLBACK_KEY in keys:
        raise fail(
            f"{FIELD} {FALLBACK_KEY!r} bypasses filtering and cannot be attached to a step "
            f"({label!r})"
        )
    registry = sources()
    for key in keys:
        if key not in registry.keys:
            raise fail(f"unknown {FIELD} {key!r} in step {label!r}; {_suggest(key, registry)}")
    return tuple(dict.fromkeys(p for key in keys for p in registry.keys[key]))


def _suggest(key: str, registry: SourceRegistry) -> str:
    """The closest keys, and where all of them are listed (the full list made a ~2 KB line)."""
    import difflib

    keys = registry.job_keys
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
    # Repo-relative: the line stays short, and lint-pipelines still puts the YAML in front.
    where = f"all {len(keys)} keys: `{FIELD}:` in {SOURCE_REGISTRY}"
    if not close:
        return f"no key is close to it ({where})"
    return f"did you mean {', '.join(repr(k) for k in close)}? ({where})"


def prefixes_of(step: Any, sources: Callable[[], SourceRegistry]) -> tuple[str, ...] | None:
    """The step's path prefixes (None: no `source_file_dependencies`). A key-shaped string is
    a registry key, else a prefix; a list is all keys or all prefixes (empty: never matches)."""
    if not isinstance(step, dict) or step.get(FIELD) is None:
        return None
    value = step[FIELD]
    label = model.name_of(step)
    if isinstance(value, str):
        return _keys([value], label, sources) if KEY_SHAPE.match(value) else (value,)
    if not isinstance(value, list):
        raise fail(f"{FIELD} must be a string key or list in step {label!r}")
    if not all(isinstance(item, str) for item in value):
        raise fail(f"{FIELD} must be a string key or list of strings in step {label!r}")
    shaped = [bool(KEY_SHAPE.match(item)) for item in value]
    if value and all(shaped):
        return _keys(value, label, sources)
    if any(shaped):
        raise fail(f"{FIELD} in step {label!r} mixes registry keys and path prefixes")
    return tuple(dict.fromkeys(value))


def path_matches(prefix: str, path: str) -> bool:
    """Segment semantics: `pkg/foo` matches `pkg/foo` and `pkg/foo/x`, not `pkg/foobar.py`."""
    base = prefix.rstrip("/")
    return path == base or path.startswith(base + "/")


def matches(prefixes: Iterable[str], changed: Iterable[str]) -> bool:
    paths = list(changed)
    return any(path_matches(p, c) for p in prefixes for c in paths)


def bypass(
    gated: Iterable[tuple[str, ...]],
    changed: Sequence[str],
    pipeline_path: str | None,
    sources: Callable[[], SourceRegistry],
) -> str | None:
    """The changed path that switches filtering off, or None: when no gated step matches, a
    change to the pipeline file itself or under a `source_filter_fallback` prefix keeps all."""
    prefix_lists = list(gated)
    if not changed or not prefix_lists or any(matches(p, changed) for p in prefix_lists):
        return None
    if pipeline_path is not None and pipeline_path in changed:
        return pipeline_path
    fallback = sources().fallback()
    return next((path for path in changed if any(path_matches(p, path) for p in fallback)), None)
