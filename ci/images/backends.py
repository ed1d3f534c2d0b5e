"""Which backend builds the ROCm and CUDA images (buildx or the engine), with which client.

Both the run and the dry-run ask the docker clients the same read-only
questions (doctor's probes), so `--dry-run` shows what the run would use here.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from ci import doctor
from ci.errors import UserError

if TYPE_CHECKING:
    from ci.doctor import Report

AUTO, BUILDX, ENGINE = "auto", "buildx", "engine"
BUILDERS = (AUTO, BUILDX, ENGINE)
DOCKER = "docker"


def parse_builder(value: str) -> str:
    key = value.strip().lower()
    if key not in BUILDERS:
        raise UserError(
            f"--builder: unknown value {value!r}: allowed values are auto, buildx, engine"
        )
    return key


def choose(requested: str, docker: str, *, dry_run: bool = False) -> tuple[str, str, str]:
    """(backend, docker client, note). Where the run would stop for want of a client,
    the dry-run still prints the production plan (`auto` is buildx), and the note
    says why the run would stop."""
    try:
        report = doctor.probe(docker or None, engine=False)
        if requested in (AUTO, BUILDX) and report.buildx and report.chosen:
            return BUILDX, as_typed(report.chosen), ""
        if requested == BUILDX:
            raise UserError(
                "--builder buildx: `docker buildx` does not work with"
                f" {report.chosen or 'any client'} (use --builder engine or auto)"
            )
        return ENGINE, as_typed(engine_client(report, docker, "a working `docker buildx` or ")), ""
    except UserError as exc:
        if not dry_run or doctor.named_docker(docker):
            raise
        fallback = ENGINE if requested == ENGINE else BUILDX
        return fallback, DOCKER, f"the run would stop here: {exc.problems[0]}"


def as_typed(client: str) -> str:
    """`docker` when PATH's `docker` is this client (as the scripts wrote it), else its path."""
    found = shutil.which(DOCKER)
    return DOCKER if found and os.path.realpath(found) == os.path.realpath(client) else client


def engine_client(report: Report, docker: str, alternatives: str = "") -> str:
    """The client for `DOCKER_BUILDKIT=1 docker build` (ROCm/CUDA engine backend, XPU).

    A client the user named (`--docker`, $VLLM_OMNI_CI_DOCKER) is used as is,
    never swapped for another; otherwise the first able one doctor found.
    """
    if docker or os.environ.get(doctor.DOCKER_ENV):
        named = report.client()
        client = named.path if named and named.buildkit_without_buildx else None
    else:
        client = report.buildkit_client()
    if client is None:
        found = ", ".join(c.path for c in report.clients) or "none on PATH"
        raise UserError(
            f"no usable backend: no docker client with {alternatives}"
            f"`DOCKER_BUILDKIT=1 docker build` (clients: {found}; see `vllm-omni-ci doctor`)"
        )
    return client
