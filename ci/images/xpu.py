"""XPU CI image: resolve the vLLM XPU base image, then build `xpu/vllm-omni-ci:<commit>`.

Replaces the build half of `.buildkite/intel/scripts/run-xpu-test.sh`. The base
comes from the first tier that works, in the script's order: pull `<upstream>:<version>`;
a local copy of it; `VLLM_BASE` (default `xpu/vllm-omni-ci-base:<version>`) found
locally; else vLLM cloned at the tag and its `vllm-openai` target built as `VLLM_BASE`.
Unlike the script, an engine that cannot answer a lookup is an error (not "missing",
which started the 30-minute source build), and an engine that cannot export
`--output type=image` builds with `docker build -t`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ci import doctor, door, door_docker
from ci.errors import FAILURE, Stop, UserError
from ci.images import backends, deadline, refs
from ci.images.options import BuildOptions, gather
from ci.sandbox.parts import containerd_store
from ci.target import resolve_commit, resolve_repo

if TYPE_CHECKING:
    from docker import DockerClient

T = TypeVar("T")

DEFAULT_UPSTREAM = "vllm/vllm-openai-xpu"
LOCAL_BASE_REPO = "xpu/vllm-omni-ci-base"
VLLM_GIT_URL = "https://github.com/vllm-project/vllm"
DOCKERFILE = "docker/Dockerfile.xpu"
DEFAULT_COMPRESSION = "zstd"
COMPRESSIONS = ("zstd", "gzip", "estargz", "uncompressed")  # BuildKit's exporter accepts these
SOURCE_DIR = "<tmp>/vllm"  # the clone's temporary folder, as a plan shows it


class BaseTier(enum.IntEnum):
    """Where the base image came from, in the script's priority order."""

    PULLED = 1
    LOCAL_UPSTREAM = 2
    LOCAL_BASE = 3
    SOURCE = 4

    def describe(self) -> str:
        return (
            "pulled the upstream image",
            "local copy of the upstream image",
            "VLLM_BASE found locally",
            "VLLM_BASE built from vLLM source",
        )[self - 1]


@dataclass(frozen=True)
class XpuBuild:
    """The resolved inputs of one XPU image build."""

    repo: str
    commit: str
    vllm_version: str
    upstream_repo: str = DEFAULT_UPSTREAM
    vllm_base: str = ""
    compression: str = DEFAULT_COMPRESSION
    docker: str = "docker"

    @property
    def upstream(self) -> str:
        return f"{self.upstream_repo}:{self.vllm_version}"

    @property
    def fallback_base(self) -> str:
        """`VLLM_BASE`, or `xpu/vllm-omni-ci-base:<version>` when unset or empty."""
        return self.vllm_base or f"{LOCAL_BASE_REPO}:{self.vllm_version}"

    @property
    def image(self) -> str:
        return refs.image_ref(refs.XPU_REPOSITORY, self.commit)

    def base_for(self, tier: BaseTier) -> str:
        return self.upstream if tier <= BaseTier.LOCAL_UPSTREAM else self.fallback_base

    def output_args(self, name: str, export: bool) -> tuple[str, ...]:
        """The script's `--output` (export=True), or a plain `-t` for engines that cannot export."""
        if not export:
            return ("-t", name)
        options = f"compression={self.compression}"
        if self.compression != "uncompressed":
            options += ",compression-level=3,force-compression=true"
        return ("--output", f"type=image,name={name},{options}")

    def pull(self) -> door.Command:
        return door.Command(
            (self.docker, "pull", self.upstream), description=f"pull {self.upstream} (tier 1)"
        )

    def clone(self, dest: str) -> door.Command:
        return door.Command(
            (
                "git",
                "clone",
                "--depth",
                "1",
                "--branch",
                self.vllm_version,
                "--",
                VLLM_GIT_URL,
                dest,
            ),
            description=f"clone vLLM {self.vllm_version} (tier 4)",
        )

    def source_build(self, src: str, export: bool) -> door.Command:
        return door.Command(
            (
                *(self.docker, "build", *self.output_args(self.fallback_base, export)),
                *("--target", "vllm-openai", "-f", f"{src}/{DOCKERFILE}", src),
            ),
            description=f"build {self.fallback_base} from vLLM {self.vllm_version} source (tier 4)",
            env={"DOCKER_BUILDKIT": "1"},
        )

    def image_build(self, base: str, export: bool) -> door.Command:
        return door.Command(
            (
                *(self.docker, "build", *self.output_args(self.image, export)),
                *("--build-arg", f"VLLM_BASE={base}"),
                *("--build-arg", f"VLLM_VERSION={self.vllm_version}", "-f", DOCKERFILE, "."),
            ),
            description=f"build {self.image} on {base}",
            env={"DOCKER_BUILDKIT": "1"},
            cwd=self.repo,
        )

    def commands(self, tiers: set[BaseTier], base: str, export: bool) -> tuple[door.Command, ...]:
        """Tier 1's pull and tier 4's source build when among `tiers`, then the image on `base`."""
        found = [self.pull()] if BaseTier.PULLED in tiers else []
        if BaseTier.SOURCE in tiers:
            found += [self.clone(SOURCE_DIR), self.source_build(SOURCE_DIR, export)]
        return (*found, self.image_build(base, export))

    def tier_plan(self, tier: BaseTier, reason: str, export: bool) -> door.Plan:
        """What runs once the tier is known (the dry-run with an engine)."""
        how = (
            "--output type=image (the engine can export)"
            if export
            else "plain docker build -t (the engine cannot do --output type=image)"
        )
        facts = (
            ("tier", f"{int(tier)}: {tier.describe()} ({reason})"),
            ("base", self.base_for(tier)),
            ("image", self.image),
            ("export", how),
        )
        return door.Plan(self.commands({tier}, self.base_for(tier), export), facts, "XPU CI image")

    def fallback_plan(self, why: str) -> door.Plan:
        """Without an engine to ask: every tier in order, each used only if the one before fails."""
        up, base = self.upstream, self.fallback_base
        facts = (
            ("engine", why),
            ("tier 1", f"pull {up}; on success the base is {up}"),
            ("tier 2", f"else a local copy of {up}"),
            ("tier 3", f"else {base} if it exists locally"),
            ("tier 4", f"else clone vLLM {self.vllm_version} and build {base}"),
            ("base", f"{up} (tiers 1-2) or {base} (tiers 3-4)"),
            ("image", self.image),
            (
                "export",
                "--output type=image as shown if the engine can export (containerd image store);"
                f" else a plain docker build -t {self.image}",
            ),
        )
        return door.Plan(
            self.commands(set(BaseTier), up, export=True),
            facts,
            "XPU CI image (no engine answered: ordered fallbacks)",
        )


def resolve(options: BuildOptions, env: Mapping[str, str]) -> XpuBuild:
    """Options, then the script's env vars; every input problem reported at once (exit 2)."""
    problems = options.misplaced()
    version = options.vllm_version or env.get("VLLM_VERSION", "")
    problems += [] if version else ["VLLM_VERSION must be set"]
    repo = gather(problems, lambda: resolve_repo(options.repo or None))
    commit = None
    if repo is not None:
        need = "BUILDKITE_COMMIT must be set"
        commit = gather(problems, lambda: resolve_commit(repo, options.commit, env, message=need))
        if not (repo / DOCKERFILE).is_file():
            problems.append(f"--repo: {repo / DOCKERFILE} does not exist")
    build = XpuBuild(
        repo=str(repo),
        commit=commit or "",
        vllm_version=version,
        upstream_repo=options.upstream_repo or DEFAULT_UPSTREAM,
        vllm_base=env.get("VLLM_BASE", ""),
        compression=env.get("EXPORT_COMPRESSION", "") or DEFAULT_COMPRESSION,
        docker=options.docker or "docker",
    )
    problems += filter(
        None,
        [
            version and refs.tag_problem(version, "VLLM_VERSION"),
            commit and refs.tag_problem(commit, "--commit"),
            refs.repository_problem(build.upstream_repo, "--upstream-repo"),
            build.vllm_base and refs.reference_problem(build.vllm_base, "VLLM_BASE"),
        ],
    )
    if build.compression not in COMPRESSIONS:
        problems.append(
            f"EXPORT_COMPRESSION: {build.compression!r}: allowed values are"
            f" {', '.join(COMPRESSIONS)}"
        )
    UserError.collect(problems)
    return build


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def _query(failed: str, what: str, fn: Callable[[], T]) -> T:
    """A read-only engine call (`what`). An engine that cannot answer is an error (exit 1),
    never read as "image missing"."""
    try:
        return door_docker.ask(what, fn)
    except Exception as exc:  # APIError, connection errors: the engine did not answer
        message = f"error: docker engine query failed ({failed}): {_last_line(exc)}"
        raise Stop(FAILURE, message) from None


def engine_client() -> DockerClient:
    """A docker SDK client (DOCKER_HOST etc. as the CLI reads them)."""
    import docker

    return _query("connect", "connect to the engine", lambda: docker.from_env(timeout=30))


def image_exists(client: DockerClient, ref: str) -> bool:
    """Whether `ref` is in the engine's image store; any answer but found/not found raises."""
    import docker

    def found() -> bool:
        try:
            return bool(client.images.get(ref))
        except docker.errors.ImageNotFound:
            return False

    return _query(f"look up {ref}", f"look up image {ref}", found)


def choose_tier(
    build: XpuBuild,
    upstream: tuple[bool, str],
    exists: Callable[[str], bool],
    note: Callable[[str], None] = lambda _: None,
) -> tuple[BaseTier, str]:
    """The tiers after tier 1's `upstream` (usable, why not); tier 4's build is the caller's."""
    up, base = build.upstream, build.fallback_base
    ok, why = upstream
    if ok:
        return BaseTier.PULLED, why
    if exists(up):
        note(f"WARNING: could not pull {up}; using local copy")
        return BaseTier.LOCAL_UPSTREAM, f"{why}; local copy present"
    note(f"WARNING: {up} unavailable remotely and locally")
    if exists(base):
        return BaseTier.LOCAL_BASE, f"{up} unavailable; {base} present"
    note(f"WARNING: building {base} from vLLM {build.vllm_version} source")
    return BaseTier.SOURCE, f"{why}; no local copy, {base} not local"


def no_engine_reason(exc: BaseException) -> str:
    """One readable line: where the engine was looked for and the OS-level reason."""
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    cause: BaseException | None = exc
    while cause is not None:  # requests wraps urllib3 wraps the OSError
        if isinstance(cause, OSError) and cause.strerror:
            return f"no engine answers at {host} ({cause.strerror})"
        args = [a for a in getattr(cause, "args", ()) if isinstance(a, BaseException)]
        cause = args[-1] if args else (cause.__cause__ or cause.__context__)
    return f"no engine answers at {host} ({_last_line(exc)})"


def dry_run(build: XpuBuild, client_path: str = "") -> None:
    """Read-only: with an engine, the tier it would pick and the commands; else the fallbacks."""
    import docker

    try:
        client = door_docker.ask("connect to the engine", lambda: docker.from_env(timeout=10))
        door_docker.ask("ping the engine", client.ping, quiet=True)
    except Exception as exc:
        door.execute(build.fallback_plan(no_engine_reason(exc)), dry_run=True)
        return
    up = build.upstream
    try:
        ask = f"ask the registry for {up} (no pull)"  # read-only tier 1: nothing is pulled
        door_docker.ask(ask, lambda: client.images.get_registry_data(up))
        upstream = True, f"{up}: the registry has it"
    except Exception as exc:
        upstream = False, f"{up} not pullable ({_last_line(exc)})"
    tier, reason = choose_tier(build, upstream, lambda ref: image_exists(client, ref))
    # The client a real run would use (client queries only: no engine-side probe build).
    chosen = doctor.probe(client_path or None, engine=False).buildkit_client()
    if chosen:
        build = dataclasses.replace(build, docker=chosen)
    # Read-only guess: only the containerd image store exports type=image.
    info = _query("info", "engine info (its image store)", client.info)
    export = containerd_store(info)
    door.execute(build.tier_plan(tier, reason, export), dry_run=True)


def build(options: BuildOptions) -> None:
    job = resolve(options, os.environ)
    if options.dry_run:
        dry_run(job, options.docker)
        return
    report = doctor.probe(options.docker or None, engine=True)
    job = dataclasses.replace(job, docker=backends.engine_client(report, options.docker))
    export = report.output_image
    with door.buildkite_group(f"XPU base image for vLLM {job.vllm_version}"):
        client = functools.cache(engine_client)  # connected on first use: tier 1 needs none
        # Streamed, not captured: the upstream image is ~37 GB and the log shows progress.
        pulled = deadline.step(job.pull())
        upstream = pulled.ok, f"docker pull {job.upstream} succeeded"
        if not pulled.ok:
            why = f"docker pull exit {pulled.code}, its error is in the log above"
            door.note(f"pull of {job.upstream} failed ({why})")
            upstream = False, f"pull failed ({why})"
        tier, reason = choose_tier(job, upstream, lambda r: image_exists(client(), r), door.note)
        door.note(f"XPU base: tier {int(tier)} ({tier.describe()}): {job.base_for(tier)}")
        door.note(f"why: {reason}")
        if tier == BaseTier.SOURCE:  # vLLM cloned at the tag into a temp dir, always removed
            with tempfile.TemporaryDirectory(
                prefix="vllm-omni-ci-vllm-src-", ignore_cleanup_errors=True
            ) as tmp:
                deadline.step(job.clone(tmp), check=True)
                deadline.step(job.source_build(tmp, export), check=True)
    if not export:
        door.note(
            "the engine cannot build with --output type=image (doctor); "
            f"building with a plain `docker build -t {job.image}` instead"
        )
    with door.buildkite_group(f"XPU CI image {job.image}"):
        deadline.step(job.image_build(job.base_for(tier), export), check=True)
    print(job.image, flush=True)
