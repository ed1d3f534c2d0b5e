"""Which part of a test pipeline an upload keeps: `diff`, `all`, `e2e` or `auto`.

`--all`/`--e2e` are the original's aliases of `--scope all`/`e2e`; `auto`
makes the choice the bootstrap YAMLs' shell made, by the `auto` column of `ci.topology`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath

from ci.errors import UserError
from ci.pipeline.render import Scope

CHOICES = ("diff", "all", "e2e", "auto")


def choose(scope: str = "", all_: bool = False, e2e: bool = False) -> str:
    """The requested scope from `--scope`, `--all` and `--e2e` (conflicts exit 2)."""
    flags = [name for name, on in (("all", all_), ("e2e", e2e)) if on]
    if len(flags) > 1:
        raise UserError("--all and --e2e are mutually exclusive")
    given = scope.strip().lower()
    if given and given not in CHOICES:
        raise UserError(f"--scope: unknown scope {scope!r}; allowed: {', '.join(CHOICES)}")
    if flags and given and given != flags[0]:
        raise UserError(f"--{flags[0]} conflicts with --scope {given}")
    return flags[0] if flags else (given or "diff")


def resolve(requested: str, pipeline_path: str, branch: str, env: Mapping[str, str]) -> Scope:
    """The scope a file gets; `auto`: `all`/`e2e` on `main` under its schedule env, else `diff`."""
    if requested != "auto":
        return "all" if requested == "all" else "e2e" if requested == "e2e" else "diff"
    from ci import topology  # here: only `auto` reads the tier table (two dataclasses, an enum)

    rule = topology.auto_rules().get(PurePosixPath(pipeline_path).as_posix())
    if rule is None or branch != "main" or not any(env.get(n, "") == "1" for n in rule.env):
        return "diff"
    return rule.scope
