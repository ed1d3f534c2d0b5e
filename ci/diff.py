"""The one diff resolver: which files a build changed, and against what.

* no explicit range: the build decides (`ci.target.resolve_build`). A PR diffs
  `origin/<base>...<commit>` (fetching a missing base once, then a local
  `<base>`), a `main` build `<commit>^..<commit>`; anything else has no range
  and callers run normal CI;
* an explicit base and/or head (`plan`): `<base>...<head>`; `head=WORKTREE`
  diffs the merge-base against the working tree, untracked files included.

Paths are relative to `repo`. Each resolution is cached per process, so every
gate of one bootstrap sees one answer. Revisions and branches reach git only
after `--end-of-options` (paths after `--`), once `ci.refnames` has passed them;
`fetch=False` (every `--dry-run`) never fetches. A diff's patches and new file
contents are read with a fixed number of git processes, however many files it
changed (`git diff` of the test tree, `git cat-file --batch`).
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from ci import door
from ci.errors import Failure, UserError
from ci.pipeline import files
from ci.refnames import branch_error, revision_error
from ci.target import check_build_env, git, is_object_name, resolve_build

# `git fetch` of a missing PR base: the original's depth, plus a bound on time.
FETCH_DEPTH: Final = 200
FETCH_TIMEOUT: Final = 120.0
LOG_PREFIX: Final = "[diff]: "
BASE_ENV: Final = "BUILDKITE_PULL_REQUEST_BASE_BRANCH"
# The env that decides the range; part of the cache key.
ENV_KEYS: Final = (
    "BUILDKITE",
    "BUILDKITE_PULL_REQUEST",
    BASE_ENV,
    "BUILDKITE_BRANCH",
    "BUILDKITE_COMMIT",
)
# Paths git would quote or that could break the batched patch split.
_AWKWARD = ('"', "\\", "\t", "\n")
# More test files than this are diffed as the whole test tree, in one call: a pathspec
# per file would outgrow the argument list (ARG_MAX) of a large diff.
_PATHSPEC_LIMIT: Final = 256
_TESTS: Final = "tests"


class _Worktree(enum.Enum):
    WORKTREE = "WORKTREE"

    def __repr__(self) -> str:
        return "WORKTREE"


WORKTREE: Final = _Worktree.WORKTREE
"""`head=WORKTREE`: compare with the working tree (staged, unstaged and untracked)."""

Kind = Literal["pr", "main", "explicit", "worktree", "none"]


def is_test_py(path: str) -> bool:
    """A `.py` file whose first path component is `tests`: what skip-ci reads the patch of
    (so `Diff.patch` fetches exactly these at once)."""
    head, sep, _ = path.partition("/")
    return bool(sep) and head == "tests" and path.endswith(".py")


def _log(message: str) -> None:
    door.note(LOG_PREFIX + message)


def _git(repo: Path, *args: str) -> door.Result:
    # -c core.quotePath=false: non-ASCII paths come back as text, not octal escapes.
    return git(repo, "-c", "core.quotePath=false", *args)


@dataclass(frozen=True)
class Diff:
    """The changed files of one build (`paths`; None when no range resolved or git failed:
    run normal CI, never read it as "no change"), and which rule chose `range` (`reason`)."""

    repo: Path
    paths: tuple[str, ...] | None
    range: str | None
    reason: str
    kind: Kind = "none"
    base: str | None = None
    head: str | None = None
    # git arguments naming the two sides (e.g. ("A...B",) or (merge-base,) for the worktree).
    revs: tuple[str, ...] = ()
    # WORKTREE only: paths git does not track yet (listed in `paths` too).
    untracked: tuple[str, ...] = ()
    _patches: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)
    _texts: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    def patch(self, path: str) -> str | None:
        """The unified diff of one changed file (`git diff <range> -- <path>`), None when git
        fails. The first call fetches every changed test file's (what skip-ci reads) at once."""
        if self.range is None:
            return None
        if path not in self._patches:
            wanted = [path]
            if self.paths is not None and path in self.paths:
                wanted += [p for p in self.paths if is_test_py(p) and p not in self._patches]
            self._patches.update(self._fetch_patches(list(dict.fromkeys(wanted))))
        return self._patches.get(path)

    def new_text(self, path: str) -> str | None:
        """The file's content on the head side (`<head>:<path>`), None if absent. The first
        call reads every changed test file's (what skip-ci reads) at once."""
        if self.range is None:
            return None
        if path not in self._texts:
            wanted = [path]
            if self.paths is not None and path in self.paths:
                wanted += [p for p in self.paths if is_test_py(p) and p not in self._texts]
            self._texts.update(self._read_many(list(dict.fromkeys(wanted))))
        return self._texts.get(path)

    def _read_many(self, paths: list[str]) -> dict[str, str | None]:
        """The head side of `paths`: the working tree's files, or two git calls for them all
        (`_cat_blobs`); a path with a newline alone."""
        if self.kind == "worktree" or self.head is None:
            return {path: self._read_new(path) for path in paths}
        lines = [p for p in paths if "\n" not in p and "\r" not in p]
        found = dict.fromkeys(paths, None) | _cat_blobs(self.repo, self.head, lines)
        batched = set(lines)
        for path in paths:
            if path not in batched:
                found[path] = self._read_new(path)
        return found

    def _fetch_patches(self, paths: list[str]) -> dict[str, str | None]:
        plain = [p for p in paths if not any(ch in p for ch in _AWKWARD)]
        if len(plain) > _PATHSPEC_LIMIT and all(is_test_py(p) for p in plain):
            found = self._patch_batch(plain, pathspec=[_TESTS])
        else:
            found = self._patch_batch(plain) if plain else {}
        batched, untracked = set(plain), set(self.untracked)
        for path in paths:
            if path not in batched:
                found |= self._patch_batch([path])
            if path in untracked:
                found[path] = self._untracked_patch(path)
        return found

    def _patch_batch(
        self, paths: list[str], pathspec: list[str] | None = None
    ) -> dict[str, str | None]:
        # --no-renames: as in the original's per-file `git diff <range> -- <file>`,
        # a renamed file reads as a new file. `pathspec`: what git is asked for, when
        # more than `paths` (the whole test tree of a large diff).
        result = _git(
            self.repo, "diff", "--no-color", "--no-ext-diff", "--no-renames", "--relative",
            "--src-prefix=a/", "--dst-prefix=b/", "--end-of-options", *self.revs,
            "--", *(paths if pathspec is None else pathspec),
        )  # fmt: skip
        if not result.ok or (len(paths) == 1 and pathspec is None):
            return dict.fromkeys(paths, result.stdout if result.ok else None)
        return _split_patches(result.stdout, paths)

    def _untracked_patch(self, path: str) -> str | None:
        text = self._read_new(path)
        if text is None:
            return None
        lines = text.splitlines()
        return (
            f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
            f"+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{x}\n" for x in lines)
        )

    def _read_new(self, path: str) -> str | None:
        if self.kind == "worktree":
            try:
                # Raw bytes read without blocking: a FIFO in the tree must not hang us.
                data = files.read_bytes(self.repo / path, path)
            except Failure:
                return None
            return data.decode("utf-8", errors="replace")
        if self.head is None:
            return None
        result = _git(
            self.repo, "show", "--no-textconv", "--end-of-options", f"{self.head}:./{path}"
        )
        return result.stdout if result.ok else None


def _cat_blobs(repo: Path, head: str, paths: list[str]) -> dict[str, str | None]:
    """The content at `head` of each of `paths` that is a file there, read by two git
    processes whatever the count: `git ls-tree -r` names every file's blob (paths relative
    to `repo`, as the diff's are), then `git cat-file --batch` prints the wanted ones, each
    after a random marker, so that a file's own text never splits the output (its sizes
    count bytes, and captured output is decoded text)."""
    listed = git(repo, "ls-tree", "-r", "-z", "--end-of-options", head)
    if not listed.ok:
        return {}
    blobs: dict[str, str] = {}
    for entry in listed.stdout.split("\0"):
        meta, tab, path = entry.partition("\t")  # `<mode> blob <oid>\t<path>`
        parts = meta.split(" ")
        if tab and len(parts) == 3 and parts[1] == "blob" and is_object_name(parts[2]):
            blobs[path] = parts[2]
    wanted = [p for p in paths if p in blobs]
    if not wanted:
        return {}
    # 128 random bits, as uuid4's (the uuid module loads `platform`: milliseconds a start)
    marker = f"{os.urandom(16).hex()}:"
    asked = "".join(f"{blobs[path]}\n" for path in wanted)
    # --buffer: one write per pipe-full, not one per object.
    read = git(repo, "cat-file", "--buffer", f"--batch={marker}%(objectname)", stdin=asked)
    chunks = read.stdout.split(marker)[1:]
    if not read.ok or len(chunks) != len(wanted):
        raise Failure(
            f"`git cat-file --batch` in {repo} printed {len(chunks)} of {len(wanted)} files",
        )
    # Each chunk: `<oid>\n<content>\n`.
    return {p: c.partition("\n")[2][:-1] for p, c in zip(wanted, chunks, strict=True)}


def _split_patches(text: str, paths: Sequence[str]) -> dict[str, str | None]:
    """Cut a multi-file `git diff` into one patch per requested path."""
    headers = {f"diff --git a/{p} b/{p}": p for p in paths}
    current: str | None = None
    chunks: dict[str, list[str]] = {p: [] for p in paths}
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            current = headers.get(line.rstrip("\n"))
        if current is not None:
            chunks[current].append(line)
    return {path: "".join(lines) for path, lines in chunks.items()}


_CACHE: dict[tuple[object, ...], Diff] = {}


def clear_cache() -> None:
    """Forget every resolved diff (tests; long-lived processes after a fetch)."""
    _CACHE.clear()


def resolve_diff(
    repo: str | os.PathLike[str],
    base: str | None = None,
    head: str | _Worktree | None = None,
    *,
    env: Mapping[str, str] | None = None,
    fetch: bool = True,
) -> Diff:
    """The changed files of `repo`, resolved once per process and shared.
    No `base`/`head`: the build's rule (module docstring). Otherwise `base` (default
    `default_base`) against `head` (default `HEAD`; `WORKTREE`). A bad explicit
    revision is a `UserError`; in env mode every failure is `paths=None`.
    `fetch=False`: a missing PR base is not fetched (a dry run starts nothing)."""
    source = os.environ if env is None else env
    check_build_env(source)  # a bad value stops here, before any git call
    root = Path(repo).expanduser().resolve()
    key = (str(root), base, head, fetch, tuple(source.get(k, "") for k in ENV_KEYS))
    if key not in _CACHE:
        explicit = base is not None or head is not None
        _CACHE[key] = (
            _explicit(root, base, head, source) if explicit else _from_env(root, source, fetch)
        )
    return _CACHE[key]


def _verify(repo: Path, rev: str) -> bool:
    return _git(
        repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"
    ).ok


def _names(repo: Path, revs: tuple[str, ...]) -> tuple[str, ...] | None:
    """The paths `git diff` names for `revs`, or None when it fails."""
    result = _git(
        repo, "diff", "--name-only", "-z", "--no-ext-diff", "--relative", "--end-of-options",
        *revs, "--",
    )  # fmt: skip
    return tuple(p for p in result.stdout.split("\0") if p.strip()) if result.ok else None


def _finish(
    repo: Path, kind: Kind, revs: tuple[str, ...], shown: str, reason: str, **kw: str | None
) -> Diff:
    """The diff of `revs`: its changed paths, or None (and why) when git diff fails."""
    return _told(repo, kind, revs, shown, reason, _names(repo, revs), **kw)


def _told(
    repo: Path,
    kind: Kind,
    revs: tuple[str, ...],
    shown: str,
    reason: str,
    paths: tuple[str, ...] | None,
    **kw: str | None,
) -> Diff:
    """The Diff of `revs` from the paths git named (None: git diff failed), logged."""
    if paths is None:
        reason = f"git diff failed ({shown}); using safe defaults"
    _log(reason if paths is None else f"{len(paths)} changed file(s) ({reason})")
    return Diff(repo, paths, shown, reason, kind, kw.get("base"), kw.get("head"), revs)


def _none(repo: Path, reason: str) -> Diff:
    _log(reason)
    return Diff(repo, None, None, reason)


def _pr_base_ref(repo: Path, branch: str, *, fetch: bool) -> str | None:
    """`origin/<branch>`, fetched once when missing and `fetch`, else `<branch>`."""
    if problem := branch_error(BASE_ENV, branch):
        raise UserError(problem)  # callers check first; this is the last line of defence
    remote = f"origin/{branch}"
    if _verify(repo, remote):
        return remote
    if not fetch:
        _log(f"{remote} not found locally; not fetched (local build or --dry-run)")
    else:
        _log(f"{remote} not found locally; trying fetch")
        door.run(
            door.Command(
                ("git", "fetch", f"--depth={FETCH_DEPTH}", "--end-of-options", "origin", branch),
                description=f"fetch the PR base {branch}",
                cwd=str(repo),
                timeout=FETCH_TIMEOUT,
            )
        )
        if _verify(repo, remote):
            return remote
    return branch if _verify(repo, branch) else None


def _from_env(repo: Path, env: Mapping[str, str], fetch: bool = True) -> Diff:
    build = resolve_build(repo, env)
    commit = build.commit
    if build.kind == "pr":
        branch = build.base_branch
        # A PR the local rule assumed, or a dry run, never reaches the network:
        # origin/<base>, else <base>.
        base_ref = _pr_base_ref(repo, branch, fetch=fetch and not build.local)
        if base_ref is None:
            return _none(repo, f"cannot resolve PR base {branch}; using safe defaults")
        shown = f"{base_ref}...{commit}"
        which = f"#{build.pull_request}" if build.pull_request else f"from {build.branch} (local)"
        reason = f"PR build {which}: {shown}"
        return _finish(repo, "pr", (shown,), shown, reason, base=base_ref, head=commit)
    if build.kind == "main":
        shown = f"{commit}^..{commit}"
        # The diff first, the parent asked after only when it fails (one git call less
        # per build): a commit without a parent is told as such, any other failure as one.
        named = _names(repo, (shown,))
        if named is None and main_build_base(repo, commit) is None:
            return _none(repo, "main commit has no parent; using safe defaults")
        reason = f"main build: {shown}"
        return _told(repo, "main", (shown,), shown, reason, named, base=f"{commit}^", head=commit)
    return _none(repo, "not PR/main build; using safe defaults")


def main_build_base(repo: Path, commit: str) -> str | None:
    """A main build compares the commit with its parent (`<commit>^`), if it has one."""
    parent = f"{commit}^"
    return parent if _verify(repo, parent) else None


def default_base(repo: Path, env: Mapping[str, str]) -> str:
    """`origin/<PR base or main>`, else the local branch: what `plan` compares with."""
    branch = env.get(BASE_ENV) or "main"
    ref = _pr_base_ref(repo, branch, fetch=False)
    if ref is None:
        raise UserError(
            f"no base revision: neither origin/{branch} nor {branch} exists in {repo}; "
            "pass a base revision"
        )
    return ref


def _explicit(
    repo: Path, base: str | None, head: str | _Worktree | None, env: Mapping[str, str]
) -> Diff:
    named = [("base revision", base), ("head revision", head if isinstance(head, str) else "")]
    UserError.collect(filter(None, (revision_error(n, v or "") for n, v in named)))
    base_ref = base or default_base(repo, env)
    problems = [] if _verify(repo, base_ref) else [f"base revision {base_ref!r}"]
    if isinstance(head, str) and not _verify(repo, head):
        problems.append(f"head revision {head!r}")
    if problems:
        raise UserError(*(f"{p} does not name a commit in {repo}" for p in problems))
    if head is WORKTREE:
        merge_base = _git(repo, "merge-base", "--end-of-options", base_ref, "HEAD")
        if not merge_base.ok:
            raise UserError(f"base revision {base_ref!r} shares no history with HEAD in {repo}")
        reason = f"worktree against merge-base with {base_ref}"
        point = (merge_base.stdout.strip(),)
        if not is_object_name(point[0]):
            raise Failure(f"`git merge-base` printed {point[0][:80]!r} in {repo}, not a commit")
        diff = _finish(repo, "worktree", point, f"{base_ref}...(worktree)", reason, base=base_ref)
        if diff.paths is None:
            return diff
        listed = _git(repo, "ls-files", "-z", "--others", "--exclude-standard")
        tracked = set(diff.paths)
        extra = [p for p in listed.stdout.split("\0") if p.strip() and p not in tracked]
        if not listed.ok or not extra:
            return diff
        _log(f"{len(extra)} untracked file(s) added")
        paths = tuple(sorted((*diff.paths, *extra)))
        return dataclasses.replace(diff, paths=paths, untracked=tuple(extra))
    head_ref = head or "HEAD"
    shown = f"{base_ref}...{head_ref}"
    return _finish(
        repo, "explicit", (shown,), shown, f"explicit range {shown}", base=base_ref, head=head_ref
    )
