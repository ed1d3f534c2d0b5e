"""The differences between old and new CI that docs/differences.md describes, as rows.

Each row names the heading it stands for (a test checks that the heading exists),
the platforms and field where it shows, and the rule that recognises it. A
difference that no row recognises makes its cell `differs`.
"""

from __future__ import annotations

import json
from typing import Any, Final

from ci.migrate.compare import ERROR_ANNOTATION, JOB, Difference, Known


def _loaded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _exports_reordered(found: Difference) -> bool:
    """The job env differs only in the order of TEST_COMMANDS' `export` lines."""
    old, new = _loaded(found.before), _loaded(found.after)
    if not (isinstance(old, dict) and isinstance(new, dict)) or old.keys() != new.keys():
        return False
    if any(old[k] != new[k] for k in old if k != "TEST_COMMANDS"):
        return False
    was, now = (str(env.get("TEST_COMMANDS", "")).splitlines() for env in (old, new))

    def rest(lines: list[str]) -> list[str]:
        return [line for line in lines if not line.startswith("export ")]

    return sorted(was) == sorted(now) and rest(was) == rest(now)


def _image_tag_dropped(found: Difference) -> bool:
    """An NPU image step's env lost only VLLM_IMAGE_TAG (build-image derives the tag)."""
    old, new = _loaded(found.before), _loaded(found.after)
    if not (isinstance(old, dict) and isinstance(new, dict)) or "image-build" not in found.job:
        return False
    return {k: v for k, v in old.items() if k != "VLLM_IMAGE_TAG"} == new


def _deduplicated(found: Difference) -> bool:
    """A merge-suite step equal to a ready-suite step: the old combiner ran it twice."""
    return "MERGE_TESTS" in found.job and (found.before, found.after) == ("present", "absent")


def _npu_nightly_all(found: Difference) -> bool:
    """A scheduled main build uploads the whole NPU nightly file (the old file diffed)."""
    return found.job.startswith("Upload Nightly Pipeline") and found.after == "present"


def _error_annotation_added(found: Difference) -> bool:
    """Our uploader annotates its errors on the build (spec W21); the old one posted none."""
    return found.before == "[]"


KNOWN: Final[tuple[Known, ...]] = (
    Known("AMD: `TEST_COMMANDS` exports keep the YAML's order", ("rocm",), "env",
          _exports_reordered),
    Known("AMD: identical steps across suites run once", ("rocm",), JOB, _deduplicated),
    Known("The bootstrap writes tool commands, not inline shell", ("npu",), "env",
          _image_tag_dropped),
    Known("`--scope auto`: the weekly file on `main` needs a schedule", ("npu",), JOB,
          _npu_nightly_all),
    Known("Every problem at once, as `error:` lines, exit 1", ("cuda", "npu", "rocm", "xpu"),
          ERROR_ANNOTATION, _error_annotation_added),
)  # fmt: skip
