"""`wheelhouse`: the wheels of the offline image builds (ci.wheelhouse)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    iterable=["dest"],
    help={
        "dest": "output directory, repeatable (default: ./wheelhouse and "
        "examples/omni-sample/wheelhouse of this checkout)",
        "python_version": "CPython version of the images (default: 3.11, Debian bookworm)",
    },
)
def wheelhouse(
    dest: list[str] | None = None,
    python_version: str = "",
    dry_run: bool = False,
) -> None:
    """Build vllm-omni-ci's wheel and download its dependency wheels for offline images."""
    import os
    from pathlib import Path

    from ci import wheelhouse as wh
    from ci.errors import UserError

    if any(not d.strip() for d in dest or ()):
        raise UserError("--dest: an empty path; give a directory (or leave --dest out)")
    root = wh.project_root()
    # os.path's resolution: a symlink loop stays a path (pathlib's raises RuntimeError).
    dests = tuple(Path(os.path.realpath(d)) for d in dest or ()) or wh.default_dests(root)
    version = python_version or wh.DEFAULT_PYTHON_VERSION
    wh.build(wh.WheelhouseOptions(root, dests, version), dry_run=dry_run)
