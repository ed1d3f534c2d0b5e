"""Input resolution shared by the image builds: flag, then env, then default.

Every resolver appends its problems to one list, so that a user sees every
input error of a run at once (one `error:` line each) before any command runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ci.errors import UserError
from ci.images import backends, refs
from ci.images.cachekey import CacheKey
from ci.images.options import BuildOptions
from ci.target import resolve_commit, resolve_repo

T = TypeVar("T")
K = TypeVar("K", bound=backends.KeyedBuild)
# An existing buildx builder to use instead of the platform's own (for example the
# engine's `docker`-driver builder where the docker-container driver's image cannot
# be pulled); the inspect -> create sequence stays, so a missing one is still created.
BUILDX_BUILDER_ENV = "VLLM_OMNI_CI_BUILDX_BUILDER"


def setting(
    flag: str, flag_name: str, env: Mapping[str, str], var: str, default: str
) -> tuple[str, str]:
    """(value, source): the flag, then the env var (empty counts as unset), then the default."""
    if flag:
        return flag, flag_name
    if env.get(var):
        return env[var], var
    return default, "default"


def gather(problems: list[str], fn: Callable[[], T]) -> T | None:
    """Run one resolver; on a UserError keep its problems and return None."""
    try:
        return fn()
    except UserError as exc:
        problems.extend(exc.problems)
        return None


def commit_and_repo(
    options: BuildOptions, env: Mapping[str, str], problems: list[str]
) -> tuple[Path | None, str | None]:
    """`--repo` and the image-tag commit (`--commit`, $BUILDKITE_COMMIT, git HEAD outside CI)."""
    repo = gather(problems, lambda: resolve_repo(options.repo or None))
    if repo is None:
        return None, None
    commit = gather(problems, lambda: resolve_commit(repo, options.commit or None, env))
    if commit is not None:
        source = "--commit" if options.commit else "BUILDKITE_COMMIT"
        if not options.commit and not env.get("BUILDKITE_COMMIT"):
            source = "git HEAD"
        problems += filter(None, [refs.tag_problem(commit, source)])
    return repo, commit


def prepare_keyed(
    cls: type[K],
    options: BuildOptions,
    env: Mapping[str, str],
    *,
    registry_env: str | None,
    default_registry: str,
    key_of: Callable[[Path], CacheKey],
    problems: Iterable[str] = (),
    **extra: Any,
) -> K:
    """Resolve and check a content-keyed build (ROCm, CUDA); every problem at once, exit 2.

    `registry_env` is the script's registry variable (None: the script had a
    constant); `extra` are the platform's own fields, already resolved, and
    `problems` what the platform found wrong with them.
    """
    platform_problems = list(problems)
    problems = options.misplaced()
    requested = gather(problems, lambda: backends.parse_builder(options.builder))
    builder_name, builder_from = setting(
        options.buildx_builder, "--buildx-builder", env, BUILDX_BUILDER_ENV, ""
    )
    if builder_name and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", builder_name):
        problems.append(
            f"{builder_from}: {builder_name!r} is not a builder name"
            " (allowed: letters, digits, '_', '.', '-'; see `docker buildx ls`)"
        )
    if builder_name and options.builder == backends.ENGINE:
        problems.append(f"{builder_from}: applies to --builder buildx or auto only")
    registry, registry_from = setting(
        options.registry, "--registry", env, registry_env or "", default_registry
    )
    problems += filter(None, [refs.repository_problem(registry, registry_from)])
    repo, commit = commit_and_repo(options, env, problems)
    key = gather(problems, lambda: key_of(repo)) if repo is not None else None
    UserError.collect([*problems, *platform_problems])
    assert repo is not None and commit is not None and key is not None and requested
    backend, docker, note = backends.choose(requested, options.docker, dry_run=options.dry_run)
    return cls(
        repo=repo,
        registry=registry,
        commit=commit,
        key=key,
        backend=backend,
        docker=docker,
        push=options.push,
        builder_name=builder_name,
        choice_note=note,
        registry_from="--registry" if registry_from == "default" else registry_from,
        **extra,
    )
