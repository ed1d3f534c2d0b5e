"""Branch names and revisions from the environment or the command line, checked
before git sees them.

A value such as `--upload-pack=touch x` given as a branch would be an option to
`git fetch`; every git call also puts such values after `--end-of-options` or
`--`, and these rules refuse them first, with one line that names the input.

* a branch name (`BUILDKITE_PULL_REQUEST_BASE_BRANCH`, `BUILDKITE_BRANCH`,
  `--branch`) follows `git check-ref-format --branch`: no leading `-`, no `..`,
  no `@{`, no control character, space or any of `~^:?*[\\`, no component that
  starts with `.` or ends in `.lock`, no empty component, not `@`, not ending
  in `/` or `.`; a build's branch may carry Buildkite's fork prefix (`owner:`,
  a GitHub login), as a PR from a fork has it;
* a revision (`BUILDKITE_COMMIT`, `--base`, `--head`, `--from-ref`, `--to-ref`)
  may use git's revision syntax (`main~2`, `HEAD^`), so only what can never be
  a revision is refused: a leading `-` and control characters.
"""

from __future__ import annotations

import re
from typing import Final

# A GitHub login: letters, digits and single hyphens, at most 39 characters.
_FORK_OWNER: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")
_FORBIDDEN: Final = " ~^:?*[\\"


def _control(value: str) -> bool:
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value)


def branch_problem(value: str, *, fork_prefix: bool = False) -> str | None:
    """Why `value` is not a branch name (None: it is one); `fork_prefix` allows `owner:`."""
    if fork_prefix and ":" in value:
        owner, _, value = value.partition(":")
        if not _FORK_OWNER.fullmatch(owner):
            return f"has a fork prefix {owner!r} that is not a GitHub login"
    why = ""
    if value.startswith("-"):
        why = "starts with '-'"
    elif value in ("@", "HEAD"):
        why = f"is {value!r}"
    elif _control(value):
        why = "has a control character"
    elif found := [ch for ch in _FORBIDDEN if ch in value]:
        why = "has " + " ".join(repr(ch) for ch in found)
    elif ".." in value or "@{" in value:
        why = "has '..'" if ".." in value else "has '@{'"
    elif value.endswith(("/", ".")):
        why = f"ends in {value[-1]!r}"
    else:
        for part in value.split("/"):
            if not part:
                why = "has an empty component ('//' or a leading '/')"
            elif part.startswith("."):
                why = f"has a component starting with '.' ({part!r})"
            elif part.endswith(".lock"):
                why = f"has a component ending in '.lock' ({part!r})"
            if why:
                break
    return why or None


def revision_problem(value: str) -> str | None:
    """Why `value` can never be a revision (None: git may resolve it)."""
    if value.startswith("-"):
        return "starts with '-'"
    if _control(value):
        return "has a control character"
    return None


def branch_error(name: str, value: str, *, fork_prefix: bool = False) -> str | None:
    """The `NAME: …` line for a bad branch name, None when it is good (or empty: unset)."""
    why = value and branch_problem(value, fork_prefix=fork_prefix)
    if not why:
        return None
    return f"{name}: {value!r} is not a valid branch name: it {why} (see git check-ref-format)"


def revision_error(name: str, value: str) -> str | None:
    """The `NAME: …` line for a value that cannot be a revision, None when it may be one."""
    why = value and revision_problem(value)
    return f"{name}: {value!r} is not a git revision: it {why}" if why else None
