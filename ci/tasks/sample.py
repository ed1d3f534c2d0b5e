"""`wheelhouse`: wheels for the offline image builds (sample images, tools image)."""

from __future__ import annotations

from invoke.context import Context

from ci.taskkit import task


@task(
    iterable=["dest"],
    help={
        "dest": "output directory, repeatable (default: ./wheelhouse and "
        "examples/omni-sample/wheelhouse of this checkout)",
        "python_version": "CPython version of the images (default: 3.11, Debian bookworm)",
    },
)
def wheelhouse(
    c: Context,
    dest: list[str] | None = None,
    python_version: str = "",
    dry_run: bool = False,
) -> None:
    """Build vllm-omni-ci's wheel and download its dependency wheels for offline images."""
    from pathlib import Path

    from ci import wheelhouse as wh
    from ci.errors import UserError

    if any(not d.strip() for d in dest or ()):
        raise UserError("--dest: an empty path; give a directory (or leave --dest out)")
    root = wh.project_root()
    dests = tuple(Path(d).resolve() for d in dest or ()) or wh.default_dests(root)
    wh.build(
        wh.WheelhouseOptions(
            root=root,
            dests=dests,
            python_version=python_version or wh.DEFAULT_PYTHON_VERSION,
        ),
        dry_run=dry_run,
    )
