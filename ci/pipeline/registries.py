"""The uploader's two YAML registries, and the per-run holder of every registry.

`ci_source_file_dependencies.yml` maps job keys to path prefixes and
`ci_mirror_hardwares.yml` preset names to Buildkite fields; each is read at
most once per run, only when a step needs it, with the original's messages (exit 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from ci import yamlio
from ci.errors import Failure, TaskError
from ci.pipeline import files
from ci.pipeline.markers import MarkerRegistry, load_markers

SOURCE_REGISTRY = ".buildkite/common/ci_source_file_dependencies.yml"
PRESET_REGISTRY = ".buildkite/common/ci_mirror_hardwares.yml"
FALLBACK_KEY = "source_filter_fallback"


def fail(message: str) -> Failure:
    """A validation error of the uploader: exit 1, as the original's."""
    return Failure(message)


def read_yaml(path: Path, head: str, *, codec_words: bool = False) -> Any:
    """The file's YAML document, else `head (why)` once per problem (exit 1): unreadable
    (a FIFO or a loop never hangs), not UTF-8, invalid YAML, a duplicate key … Under
    `codec_words` a non-UTF-8 file is told in Python's words, as the uploader tells it."""
    try:
        data = files.read_bytes(path, str(path))
        return yamlio.loads(data.decode("utf-8"), source=str(path))
    except UnicodeDecodeError as exc:
        whys = [str(exc) if codec_words else files.not_utf8(exc)]
    except TaskError as exc:
        whys = [p.removeprefix(f"{path}: ") for p in exc.problems]
    raise Failure(*(f"{head} ({why})" for why in whys)) from None


def _read_registry(path: Path, what: str) -> Any:
    if not files.exists(path):
        raise fail(f"missing CI {what} registry: {path}")
    return read_yaml(path, f"invalid CI {what} registry: {path}")


def _table(data: Any, name: str, path: str) -> Mapping[Any, Any]:
    if not isinstance(data, dict):
        raise fail(f"invalid CI {name} registry: {path}")
    if not isinstance(table := data.get(name), dict):
        raise fail(f"{name} must be a mapping in {path}")
    return table


def _flatten(value: list[Any], key: str) -> Iterator[str]:
    for item in value:
        if isinstance(item, list):
            yield from _flatten(item, key)
        elif not (text := "" if item is None else str(item).strip()):
            raise fail(f"empty path in source_file_dependencies[{key!r}]")
        else:
            yield text


@dataclass(frozen=True)
class SourceRegistry:
    """Job key -> path prefixes (YAML anchors flattened, duplicates dropped, order kept)."""

    path: str
    keys: Mapping[str, tuple[str, ...]]

    @classmethod
    def parse(cls, data: Any, path: str) -> SourceRegistry:
        table = _table(data, "source_file_dependencies", path)
        keys: dict[str, tuple[str, ...]] = {}
        for key, value in table.items():
            if not isinstance(key, str) or not key.strip():
                raise fail(f"source_file_dependencies keys must be non-empty strings in {path}")
            if not isinstance(value, list):
                raise fail(
                    f"source_file_dependencies[{key!r}] must be a list of path prefixes, "
                    f"got {type(value).__name__}"
                )
            keys[key] = tuple(dict.fromkeys(_flatten(value, key)))
        return cls(path, keys)

    @property
    def job_keys(self) -> tuple[str, ...]:
        """Keys a step may name (sorted; the fallback list is not a job key)."""
        return tuple(sorted(k for k in self.keys if k != FALLBACK_KEY))

    def fallback(self) -> tuple[str, ...]:
        paths = self.keys.get(FALLBACK_KEY, ())
        if not paths:
            raise fail(
                f"source_file_dependencies[{FALLBACK_KEY!r}] must list shared uploader "
                f"paths in {self.path}"
            )
        return paths


@dataclass(frozen=True)
class PresetRegistry:
    """Preset name -> the Buildkite step fields it stands for."""

    path: str
    presets: Mapping[str, Mapping[str, Any]]

    @classmethod
    def parse(cls, data: Any, path: str) -> PresetRegistry:
        table = _table(data, "mirror_hardwares", path)
        bad = next((str(k) for k, v in table.items() if not isinstance(v, dict)), None)
        if bad is not None:
            raise fail(f"invalid CI mirror_hardwares registry: {path} (not a mapping: {bad})")
        return cls(path, {str(k): v for k, v in table.items()})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.presets))


class Registries:
    """Every registry one run may read, each loaded on first use and then reused."""

    def __init__(
        self,
        sources: Callable[[], SourceRegistry],
        presets: Callable[[], PresetRegistry],
        markers: Callable[[], MarkerRegistry],
    ) -> None:
        self.sources, self.presets, self.markers = Lazy(sources), Lazy(presets), Lazy(markers)

    @classmethod
    def for_repo(cls, repo: Path) -> Registries:
        root = files.realpath(repo)
        src, pre = root / SOURCE_REGISTRY, root / PRESET_REGISTRY
        return cls(
            lambda: SourceRegistry.parse(_read_registry(src, "source_file_dependencies"), str(src)),
            lambda: PresetRegistry.parse(_read_registry(pre, "mirror_hardwares"), str(pre)),
            lambda: load_markers(root),
        )


T = TypeVar("T")


class Lazy(Generic[T]):
    """A value loaded on first call, then reused; a failure is remembered and re-raised."""

    def __init__(self, load: Callable[[], T]) -> None:
        self._load = load
        self._done: tuple[T] | TaskError | None = None

    def __call__(self) -> T:
        if self._done is None:
            try:
                self._done = (self._load(),)
            except TaskError as exc:
                self._done = exc
        if isinstance(self._done, TaskError):
            raise self._done
        return self._done[0]
