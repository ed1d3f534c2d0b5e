"""Which part of a test pipeline an upload keeps: `diff`, `all`, `e2e` or `auto`.

`--all` and `--e2e` are aliases of `--scope all` / `--scope e2e` (the original
uploader's flags). `auto` lets the task make the choice the bootstrap YAMLs'
inline shell makes today (`EXTRA="--all"` on a scheduled nightly, ...); its
rules live with the bootstrap mode (`ci.pipeline.bootstrap_mode.AUTO_RULES`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ci.errors import BAD_INPUT, UserError
from ci.pipeline import bootstrap_mode
from ci.pipeline.render import Scope

CHOICES = ("diff", "all", "e2e", "auto")


def choose(scope: str = "", all_: bool = False, e2e: bool = False) -> str:
    """The requested scope from `--scope`, `--all` and `--e2e` (conflicts exit 2)."""
    flags = [name for name, on in (("all", all_), ("e2e", e2e)) if on]
    if len(flags) > 1:
        raise UserError("--all and --e2e are mutually exclusive", code=BAD_INPUT)
    given = scope.strip().lower()
    if given and given not in CHOICES:
        raise UserError(f"--scope: unknown scope {scope!r}; allowed: {', '.join(CHOICES)}")
    if flags and given and given != flags[0]:
        raise UserError(f"--{flags[0]} conflicts with --scope {given}", code=BAD_INPUT)
    return flags[0] if flags else (given or "diff")


def auto_scope(pipeline_path: str, branch: str, env: Mapping[str, str]) -> Scope:
    """The scope this file gets: `all`/`e2e` on `main` under its schedule env, else `diff`.

    Inputs: the repo-relative pipeline path, the build branch, and the env
    (NIGHTLY, WEEKLY, NON_CRITICAL); the rules are `bootstrap_mode.AUTO_RULES`.
    """
    return bootstrap_mode.auto_scope(pipeline_path, branch, env)


def resolve(requested: str, pipeline_path: str, branch: str, env: Mapping[str, str]) -> Scope:
    if requested == "auto":
        return auto_scope(pipeline_path, branch, env)
    if requested == "all":
        return "all"
    if requested == "e2e":
        return "e2e"
    return "diff"
