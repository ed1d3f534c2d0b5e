"""Publish the per-arch release images from ECR staging to Docker Hub.

Replaces `.buildkite/release/scripts/publish-release-images.sh`: the same
tags, the same docker commands in the same order, the same manifest
sequence (`rm`, failure tolerated; `create`; `push`), the CUDA build's ECR
login (the password on stdin, never printed). All of it is door commands (the
login's two tied by `ci.images.steps.SecretPipe`), so the dry-run prints the
plan that runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ci import door
from ci.errors import FAILURE, UserError
from ci.images.keyed import ecr_login
from ci.images.refs import TAG
from ci.images.steps import Step, plan_commands, run_steps

DOCKERHUB_REPO = "vllm/vllm-omni"
ECR_REGISTRY = "public.ecr.aws/q9t5s3a7"
ECR_REPO = f"{ECR_REGISTRY}/vllm-omni-release-repo"
MODES = ("release", "nightly")
DEFAULT_MODE = "release"
ARCHES = ("x86_64", "aarch64")
VERSION_PLACEHOLDER = "<release-version>"
TAG_CHARS = " (allowed: letters, digits, '_', '.', '-'; at most 128 with its prefix)"


@dataclass(frozen=True)
class Publication:
    """What one run publishes: the mode, the source commit and the tags."""

    mode: str
    commit: str
    primary_tags: tuple[str, ...]
    extra_tags: tuple[str, ...] = ()

    def source(self, arch: str) -> str:
        return f"{ECR_REPO}:{self.commit}-{arch}"


def publication(mode: str, commit: str, version: str) -> Publication:
    """The tags of the script's `case "$MODE"` (version: release mode only)."""
    problems = []
    if not TAG.fullmatch(f"nightly-{commit}") or not commit:
        problems.append(f"--commit: {commit!r} cannot be part of an image tag{TAG_CHARS}")
    if mode == "release" and version != VERSION_PLACEHOLDER and not TAG.fullmatch(f"v{version}"):
        problems.append(f"release-version: {version!r} cannot be part of an image tag{TAG_CHARS}")
    UserError.collect(problems)
    if mode == "release":
        return Publication(mode, commit, ("latest", f"v{version}"))
    return Publication(mode, commit, ("nightly",), (f"nightly-{commit}",))


def _docker(*args: str, description: str, **policy: Any) -> door.Command:
    return door.Command(("docker", *args), description=description, **policy)


def _manifest(tag: str, arch_base: str) -> tuple[door.Command, ...]:
    ref = f"{DOCKERHUB_REPO}:{tag}"
    parts = [f"{DOCKERHUB_REPO}:{arch_base}-{arch}" for arch in ARCHES]
    return (
        _docker(
            *("manifest", "rm", ref),
            description=f"drop the local manifest list {ref}",
            tolerate="(ignored: exit {code})",  # `docker manifest rm … || true`
        ),
        _docker("manifest", "create", ref, *parts, description=f"create manifest {ref}"),
        _docker("manifest", "push", ref, description=f"push manifest {ref}"),
    )


def published(plan: door.Plan) -> list[str]:
    """Every Docker Hub ref the plan writes, in order: what its pushes push."""
    return [c.argv[-1] for c in plan.commands if "push" in c.argv[1:3]]


def sequence(pub: Publication) -> list[Step]:
    """The script's steps, in order: the ECR login, then one docker command each."""
    out: list[Step] = [ecr_login("docker", ECR_REGISTRY)]
    out += [_docker("pull", pub.source(arch), description=f"pull {arch}") for arch in ARCHES]
    for tag in pub.primary_tags:
        refs = [(arch, f"{DOCKERHUB_REPO}:{tag}-{arch}") for arch in ARCHES]
        out += [
            _docker("tag", pub.source(a), ref, description=f"tag {a} as {ref}") for a, ref in refs
        ]
        out += [_docker("push", ref, description=f"push {ref}") for _, ref in refs]
        out += _manifest(tag, tag)
    for tag in pub.extra_tags:
        out += _manifest(tag, pub.primary_tags[0])
    return out


def plan(pub: Publication, facts: tuple[tuple[str, str], ...] = ()) -> door.Plan:
    """The script's command sequence, in order (what `sequence` runs)."""
    return door.Plan(
        commands=plan_commands(sequence(pub)),
        facts=(
            ("mode", pub.mode),
            ("commit", pub.commit),
            ("primary tags", " ".join(pub.primary_tags)),
            *((("extra manifests", " ".join(pub.extra_tags)),) if pub.extra_tags else ()),
            *facts,
        ),
        title=f"publish {pub.mode} images to {DOCKERHUB_REPO}",
    )


def release_version(given: str) -> str:
    """The `release-version` build meta-data with one leading `v` stripped."""
    value = given.strip()
    if not value:
        found = door.run(
            door.Command(
                ("buildkite-agent", "meta-data", "get", "release-version", "--default", ""),
                description="read the release version",
            ),
            output="capture",
        )
        value = found.stdout.strip() if found.ok else ""
    value = value[1:] if value.startswith("v") else value
    if not value:
        raise door.CommandFailed(FAILURE, "ERROR: release-version metadata not set")
    return value


def publish(
    mode: str,
    *,
    commit: str = "",
    version: str = "",
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
) -> None:
    source = os.environ if env is None else env
    given, mode = mode, (mode or DEFAULT_MODE).strip()
    if mode not in MODES:
        raise UserError(
            f"--mode: unknown mode {given!r}: allowed values are release, nightly "
            "(usage: release.publish-images [--mode release|nightly])"
        )
    commit = commit or source.get("BUILDKITE_COMMIT", "")
    if not commit:
        raise UserError("BUILDKITE_COMMIT is not set (or pass --commit)")
    facts: tuple[tuple[str, str], ...] = ()
    if mode == "release" and dry_run and not version:
        version = VERSION_PLACEHOLDER
        facts = (("release-version", "read at run time: buildkite-agent meta-data get …"),)
    elif mode == "release":
        version = release_version(version)
    pub = publication(mode, commit, version)
    the_plan = plan(pub, facts)
    if dry_run:
        door.execute(the_plan, dry_run=True)
        return
    extra = [f"  Extra manifests: {' '.join(pub.extra_tags)}"] if pub.extra_tags else []
    head = [f"Publishing {pub.mode} images to {DOCKERHUB_REPO}", f"  Commit: {pub.commit}"]
    head += [f"  Primary tags: {' '.join(pub.primary_tags)}", *extra]
    door.note("\n".join(["=" * 40, *head, "=" * 40]))
    run_steps(sequence(pub))
    door.note(f"\nSuccessfully published {pub.mode} images")
    print(*published(the_plan), sep="\n")
