"""ROCm and CUDA images end to end: real buildx, the engine's BuildKit, the real registry.

Cold build and push; wipe this test's refs and the whole build cache; the warm
build imports every deps step from the registry cache ref; change one
requirements file and the key changes, the old key's cache is neither consulted
nor touched, and the deps RUN steps after it run again.

The ROCm buildx scenario's cold build also serves the README's main job: a
`--no-push` build, warm from that build's local cache, sends nothing off the
machine and runs exactly the commands its `--dry-run` printed.

buildx runs the spec's exact argv against the plugin `sandbox up` installs,
on the engine's own `docker`-driver builder (named with --buildx-builder: the
docker-container driver needs an image that cannot be pulled here). The engine
backend (`DOCKER_BUILDKIT=1 docker build`, inline cache) keeps its own run.
"""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ci.images import progress
from ci.images.cachekey import cuda_key, rocm_key
from ci.sandbox.parts import builder_name
from ci.sandbox.registryapi import manifest_digest
from tests.conftest import REGISTRY, run_cli, sample_with_wheelhouse


def registry_digest(ref: str) -> str | None:
    """The manifest digest of REGISTRY/name:tag, or None when the registry has no such tag."""
    name, tag = ref.removeprefix(f"{REGISTRY}/").rsplit(":", 1)
    return manifest_digest(REGISTRY, name, tag)


def registry_delete(ref: str) -> None:
    digest = registry_digest(ref)
    if digest is None:
        return
    name = ref.removeprefix(f"{REGISTRY}/").rsplit(":", 1)[0]
    request = urllib.request.Request(
        f"http://{REGISTRY}/v2/{name}/manifests/{digest}", method="DELETE"
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


@pytest.fixture
def sample_copy(tmp_path: Path) -> Path:
    """The sample with a wheelhouse (its `test` stage needs one), in a dir we may edit."""
    return sample_with_wheelhouse(tmp_path)


def wipe(docker: str, refs: list[str]) -> None:
    """Remove these refs locally, then prune the whole build cache: a fresh agent's view.

    Always both: an image's layers and the build-cache records are kept apart,
    and a record left behind would make a step CACHED without the registry.
    """
    for ref in refs:
        subprocess.run([docker, "rmi", "-f", ref], capture_output=True)
    subprocess.run([docker, "builder", "prune", "-af"], check=True, capture_output=True)


@pytest.fixture
def refs(docker_cli: str) -> Iterator[list[str]]:
    """Image refs this test makes; removed locally and from the registry afterwards."""
    made: list[str] = []
    yield made
    wipe(docker_cli, made)
    for ref in made:
        registry_delete(ref)


@dataclass(frozen=True)
class Scenario:
    """One platform on one backend: how to call build-image, and what it names its refs."""

    platform: str
    backend: str

    def registry(self, run_id: str) -> str:
        return f"{REGISTRY}/omni-ci-test/{self.platform}-{self.backend}-{run_id}"

    def key(self, repo: Path, arch: str) -> str:
        return rocm_key(repo, arch).key if self.platform == "rocm" else cuda_key(repo).key

    def cache_ref(self, registry: str, key: str) -> str:
        prefix = "rocm-deps-cache" if self.platform == "rocm" else "deps-cache"
        return f"{registry}:{prefix}-{key}"

    def argv(self, repo: Path, registry: str, arch: str, commit: str, docker: str) -> list[str]:
        argv = ["build-image", "--platform", self.platform, "--repo", str(repo)]
        argv += ["--commit", commit, "--registry", registry, "--builder", self.backend]
        if self.platform == "rocm":
            argv += ["--arch", arch]
        if self.backend == "buildx":
            # The docker-container driver's image cannot be pulled here: use the engine's
            # own docker-driver builder (what `sandbox up` checks), by name.
            argv += ["--buildx-builder", builder_name(docker)]
        return argv


def build_env() -> dict[str, str]:
    """Our environment without what would pick the client, commit, registry, arch or builder:
    the test's options decide them."""
    drop = ("VLLM_OMNI_CI_DOCKER", "VLLM_OMNI_CI_BUILDX_BUILDER")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "BUILDKITE_COMMIT": "", "ROCM_CI_IMAGE_REGISTRY": "", "PYTORCH_ROCM_ARCH": ""}


def build(
    scenario: Scenario, repo: Path, registry: str, arch: str, commit: str, docker: str, *extra: str
) -> tuple[str, list[progress.BuildVertex]]:
    env = build_env()
    done = run_cli(
        *scenario.argv(repo, registry, arch, commit, docker), *extra, env=env, timeout=900
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout, progress.parse(done.stderr)


def import_step(steps: list[progress.BuildVertex], cache_ref: str) -> progress.BuildVertex:
    (found,) = [s for s in steps if s.name == f"importing cache manifest from {cache_ref}"]
    return found


SCENARIOS = [Scenario("rocm", "buildx"), Scenario("cuda", "buildx"), Scenario("rocm", "engine")]
NO_PUSH_SCENARIO = SCENARIOS[0]  # the README's main job: ROCm, buildx found by --builder auto


@pytest.mark.docker
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: f"{s.platform}-{s.backend}")
def test_registry_cache_cold_warm_and_invalidated(
    scenario: Scenario, sample_copy: Path, refs: list[str], docker_cli: str
) -> None:
    run_id = uuid.uuid4().hex[:10]
    registry = scenario.registry(run_id)
    # A unique arch reaches every ROCm deps RUN step (ENV PYTORCH_ROCM_ARCH), and a unique
    # registry repo gives each run its own cache ref. Every local record is pruned before
    # the warm build, so a CACHED step can only come from that registry ref.
    arch = f"gfx942;e2e-{run_id}"
    key = scenario.key(sample_copy, arch)
    cache_ref, image_ref = scenario.cache_ref(registry, key), f"{registry}:e2e-{key}"
    refs += [image_ref, cache_ref]

    # 1. Cold: nothing to import yet; image and cache ref are pushed.
    out, cold = build(scenario, sample_copy, registry, arch, f"e2e-{key}", docker_cli)
    if scenario.platform == "rocm":
        assert out == f"ROCm dependency cache: {cache_ref}\nROCm CI image: {image_ref}\n"
    else:
        assert f"Building image tag: {image_ref}\n" in out
    assert import_step(cold, cache_ref).status == "ERROR"  # a miss is logged, not fatal
    cold_runs = [s for s in progress.stage_steps(cold, "deps") if s.instruction == "RUN"]
    assert cold_runs and [s.status for s in cold_runs] == ["DONE"] * len(cold_runs)
    assert registry_digest(image_ref) and registry_digest(cache_ref)
    if scenario == NO_PUSH_SCENARIO:
        no_push_run_is_its_dry_run(sample_copy, arch, docker_cli)

    # 2. Wipe every local trace: this test's images and the whole build cache.
    wipe(docker_cli, [image_ref, cache_ref])
    for ref in (image_ref, cache_ref):
        gone = subprocess.run([docker_cli, "image", "inspect", ref], capture_output=True)
        assert gone.returncode != 0

    # 3. Warm: the cache manifest comes from the registry and every deps step is CACHED.
    _, warm = build(scenario, sample_copy, registry, arch, f"e2e-{key}", docker_cli)
    assert import_step(warm, cache_ref).status == "DONE"
    deps = progress.stage_steps(warm, "deps")
    assert len(deps) >= 3
    assert [(s.name, s.status) for s in deps] == [(s.name, "CACHED") for s in deps]

    # 4. One requirements file changes: new key, and the deps RUN steps after it run again.
    # Wiped first, as a fresh agent sees it: only the registry holds a cache, and the old
    # key's ref is still there.
    cache_digest = registry_digest(cache_ref)
    wipe(docker_cli, [image_ref, cache_ref])
    with (sample_copy / "requirements" / "common.txt").open("a") as fh:
        fh.write("# bump\n")
    new_key = scenario.key(sample_copy, arch)
    assert new_key != key
    new_cache = scenario.cache_ref(registry, new_key)
    refs += [f"{registry}:e2e-{new_key}", new_cache]
    _, changed = build(scenario, sample_copy, registry, arch, f"e2e-{new_key}", docker_cli)
    assert import_step(changed, new_cache).status == "ERROR"
    imported = [s.name for s in changed if s.name.startswith("importing cache manifest")]
    assert imported == [f"importing cache manifest from {new_cache}"]  # never the old key's
    assert registry_digest(cache_ref) == cache_digest  # the old key's ref is untouched
    steps = progress.stage_steps(changed, "deps")
    after = [s for s in steps if s.index and s.index > _requirements_index(steps)]
    runs = [s for s in after if s.instruction == "RUN"]
    assert runs and [(s.name, s.status) for s in runs] == [(s.name, "DONE") for s in runs]
    assert registry_digest(new_cache)  # the new key's cache was exported


def _requirements_index(steps: list[progress.BuildVertex]) -> int:
    (copy,) = [s for s in steps if s.name.startswith("COPY requirements/")]
    assert copy.index is not None
    return copy.index


def test_progress_parser_reads_cached_done_and_error() -> None:
    text = "\n".join(
        [
            "#1 [internal] load build definition from Dockerfile.rocm",
            "#1 DONE 0.1s",
            "#4 importing cache manifest from r:rocm-deps-cache-0123",
            "#4 ERROR: r:rocm-deps-cache-0123: not found",
            "#5 [deps  1/3] FROM base@sha256:00",
            "#5 DONE 0.0s",
            "#6 [deps  2/3] RUN make",
            "#6 0.443 building",
            "#6 DONE 15.0s",
            "#7 [deps  3/3] COPY a b",
            "#7 CACHED",
            "#8 [test 1/1] COPY . .",
            "#8 CACHED",
        ]
    )
    steps = progress.parse(text)
    assert [(s.vertex, s.status) for s in steps] == [
        (1, "DONE"),
        (4, "ERROR"),
        (5, "DONE"),
        (6, "DONE"),
        (7, "CACHED"),
        (8, "CACHED"),
    ]
    deps = progress.stage_steps(steps, "deps")
    assert [(s.index, s.instruction, s.seconds) for s in deps] == [
        (2, "RUN", 15.0),
        (3, "COPY", None),
    ]
    assert steps[1].detail == "r:rocm-deps-cache-0123: not found"


def plan_lines(stdout: str) -> list[str]:
    """The command lines of a dry-run plan (`   (cd … && …)`)."""
    return [ln.strip() for ln in stdout.splitlines() if ln.startswith("   ")]


def echoed_lines(stderr: str) -> list[str]:
    """The command lines a run echoed (`$ …`)."""
    return [ln[2:].strip() for ln in stderr.splitlines() if ln.startswith("$ ")]


def no_push_run_is_its_dry_run(repo: Path, arch: str, docker: str) -> None:
    """The README's main job (`--no-push`, `--builder auto`): with the default Docker Hub
    registry no request leaves here, and every command the run echoes was planned.

    Called after a cold build of the same arch, so its deps steps come from the local cache.
    """
    env = build_env()
    commit = f"e2e-nopush-{uuid.uuid4().hex[:8]}"
    argv = ["build-image", "--platform", "rocm", "--repo", str(repo), "--commit", commit]
    argv += ["--arch", arch, "--buildx-builder", builder_name(docker), "--no-push"]
    planned = run_cli(*argv, "--dry-run", env=env)
    assert planned.returncode == 0, planned.stderr
    assert "# backend: buildx (builder " in planned.stdout  # auto found buildx here
    try:
        ran = run_cli(*argv, env=env, timeout=900)
        assert ran.returncode == 0, ran.stderr[-4000:]
    finally:
        subprocess.run([docker, "rmi", "-f", f"rocm/vllm-omni:{commit}"], capture_output=True)
    assert "registry-1.docker.io" not in ran.stderr
    assert "importing cache manifest" not in ran.stderr
    echoed = echoed_lines(ran.stderr)
    plan = plan_lines(planned.stdout)
    assert echoed and all(line in plan for line in echoed), (echoed, plan)
    # The builder exists, so of the plan only `create` is not run.
    assert [ln for ln in plan if ln not in echoed] == [ln for ln in plan if " buildx create " in ln]
