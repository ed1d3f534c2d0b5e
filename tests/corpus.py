"""A working copy of the real vLLM-Omni `.buildkite/` corpus, for pipeline tests.

The corpus (../shared/vllm-omni) has no `pyproject.toml`; the uploader needs
its pytest markers to infer presets. `make_corpus` writes one generated from
MARKERS.md (the marker table of the matching upstream version) plus the A5 and
310P SKUs that the NPU ready YAML uses, and can register the one
`source_file_dependencies` key the corpus lacks. Nothing is copied into the
repository: every call works in a temporary directory. Without ../shared,
each of them fails the calling test with `need_shared`'s one line.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.conftest import SHARED, need_shared

CORPUS = SHARED / "vllm-omni"
BUILDKITE = CORPUS / ".buildkite"
MISSING_KEY = "diffusion_joy_image_accuracy"
EXTRA_NPU_SKUS = (
    ("A5", "Tests that require A5 NPU", "[hardware-resource] [npu]"),
    ("310P", "Tests that require 310P NPU", "[hardware-resource] [npu]"),
)
_ROW = re.compile(r"^\|\s*([A-Za-z0-9_]+)\s*\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*$")


def marker_rows() -> list[tuple[str, str, str]]:
    """(name, description, tags) of the registered-markers table in MARKERS.md."""
    rows: list[tuple[str, str, str]] = []
    in_table = False
    for line in need_shared(CORPUS / "MARKERS.md").read_text().splitlines():
        if line.startswith("## Registered markers"):
            in_table = True
            continue
        if in_table and line.startswith("## "):
            break
        match = _ROW.match(line) if in_table else None
        if match and match.group(1) != "Marker":
            tags = " ".join(re.findall(r"\[[a-z-]+\]", match.group(3)))
            rows.append((match.group(1), match.group(2), tags))
    return rows


def pyproject_text(extra: tuple[tuple[str, str, str], ...] = EXTRA_NPU_SKUS) -> str:
    lines = [f"{n}: {d} {t}".rstrip() for n, d, t in [*marker_rows(), *extra]]
    body = "\n".join(f'    "{line}",' for line in lines)
    return (
        '[project]\nname = "vllm-omni"\n\n[tool.pytest.ini_options]\n'
        f'addopts = "--strict-markers"\nmarkers = [\n{body}\n]\n'
    )


def register_missing_key(repo: Path) -> None:
    registry = repo / ".buildkite/common/ci_source_file_dependencies.yml"
    registry.write_text(
        registry.read_text().rstrip("\n") + f"\n\n  {MISSING_KEY}:\n"
        "    - vllm_omni/diffusion/models/joy_image/\n"
        "    - tests/e2e/accuracy/test_joy_image_edit.py\n"
    )


def make_corpus(dest: Path, *, pyproject: bool = True, register_key: bool = True) -> Path:
    """`dest` becomes a repo root holding the corpus `.buildkite/` (returns `dest`)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(need_shared(BUILDKITE), dest / ".buildkite")
    if pyproject:
        (dest / "pyproject.toml").write_text(pyproject_text())
    if register_key:
        register_missing_key(dest)
    return dest


def uploader_yamls(platforms: tuple[str, ...] = ("cuda", "npu")) -> list[str]:
    """Repo-relative paths of the corpus test YAMLs of `platforms`."""
    need_shared(BUILDKITE)
    return sorted(
        str(p.relative_to(CORPUS)) for pf in platforms for p in (BUILDKITE / pf).glob("test-*.yml")
    )
