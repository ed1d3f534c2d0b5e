"""The files a plan reads, as they are at the head of the range.

A bootstrap reads `.buildkite/` and `pyproject.toml` from the commit it builds,
so `plan --head REV` reads them at REV: `git archive` of those paths into a
temporary directory (the repository is untouched). With `--worktree`, or for a
`HEAD` whose `git status` shows those paths clean, they are read in place. What
git prints is checked before it is used: a `git` that answers nonsense stops the
plan with one `error:` line (exit 1), never a traceback.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from ci import topology
from ci.errors import Failure, UserError
from ci.target import git

# Everything the planners read: the pipelines and registries, and the pytest markers.
READS: Final = (".buildkite", "pyproject.toml")
# Each platform's folder of pipelines (the tier table's files): a checkout with no YAML
# file in any of them is not vLLM-Omni, and a plan of it would be four empty errors.
PLATFORM_DIRS: Final = tuple(
    dict.fromkeys(Path(row.file).parent.as_posix() for row in topology.TABLE)
)


def _clean(repo: Path) -> bool:
    """True when the working tree holds `READS` exactly as HEAD does (nothing ignored either)."""
    status = git(repo, "status", "--porcelain", "--untracked-files=all", "--ignored", "--", *READS)
    return status.ok and not status.stdout.strip()


@contextmanager
def files_at(repo: Path, rev: str | None) -> Iterator[Path]:
    """A directory holding `READS` at `rev` (`rev=None`: the working tree, `repo` itself)."""
    if rev is None or (rev == "HEAD" and _clean(repo)):
        yield repo
        return
    import tarfile

    listed = git(repo, "ls-tree", "--name-only", "-z", "--end-of-options", rev, "--", *READS)
    if not listed.ok:
        raise UserError(f"cannot list {', '.join(READS)} at {rev!r} in {repo}")
    names = [name for name in listed.stdout.split("\0") if name]  # those that exist at `rev`
    if strange := [name for name in names if name not in READS]:
        raise Failure(
            f"`git ls-tree` named {strange[0][:80]!r} at {rev!r} in {repo}, which was not asked"
            f" for ({', '.join(READS)})",
        )
    with tempfile.TemporaryDirectory(prefix="vllm-omni-ci-plan-") as tmp:
        root, archive = Path(tmp, "tree"), Path(tmp, "head.tar")
        root.mkdir()
        if names:
            # After --end-of-options, archive reads `--` as a path: the names (READS) follow
            # the revision directly.
            made = git(
                repo, "archive", "--format=tar", f"--output={archive}", "--end-of-options",
                rev, *names,
            )  # fmt: skip
            if not made.ok:
                raise UserError(f"cannot read {', '.join(names)} at {rev!r} in {repo}")
            try:
                with tarfile.open(archive) as tar:
                    if hasattr(tarfile, "data_filter"):  # Python 3.10.12+, 3.11.4+
                        tar.extractall(root, filter="data")
                    else:  # pragma: no cover - our own `git archive` of repo paths
                        tar.extractall(root)
            except (OSError, tarfile.TarError) as exc:  # none written, or not a tar
                raise Failure(
                    f"`git archive` of {', '.join(names)} at {rev!r} in {repo} gave no"
                    f" readable archive: {exc}",
                ) from None
        yield root


def shown(text: str, root: Path, repo: Path, rev: str | None) -> str:
    """`text` with paths inside the snapshot said as `rev:path` (they name no real file)."""
    if rev is None or root == repo:
        return text
    return text.replace(f"{root}/", f"{rev}:")


def require_pipelines(root: Path, repo: Path, rev: str | None) -> None:
    """Stop (exit 2) unless some platform's folder under `root` holds a pipeline YAML:
    `--repo` names a checkout that is not vLLM-Omni (or one from before its CI)."""
    for folder in PLATFORM_DIRS:
        with contextlib.suppress(OSError):
            if any(p.suffix in (".yml", ".yaml") for p in (root / folder).iterdir()):
                return
    where = "in the working tree" if rev is None else f"at {rev}"
    looked = ", ".join(f"{folder}/*.yml" for folder in PLATFORM_DIRS)
    raise UserError(
        f"--repo: {repo} is not a vLLM-Omni checkout: no platform's pipelines {where}"
        f" (looked for {looked})"
    )
