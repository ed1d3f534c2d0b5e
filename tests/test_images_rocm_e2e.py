"""ROCm image end to end: the real engine and the real registry at 127.0.0.1:5000.

Cold build and push; wipe this test's refs and the builder cache; warm build
imports every deps step from the registry cache ref; change one requirements
file and the key changes, the old key's cache is not consulted, and the heavy
deps RUN steps run again.

Engine backend: this machine has no buildx plugin (see `vllm-omni-ci doctor`).
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci.images import progress
from ci.images.cachekey import rocm_key
from tests.conftest import REGISTRY, run_cli, sample_with_wheelhouse

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.index.v1+json",
    ]
)


def registry_digest(ref: str) -> str | None:
    """The manifest digest of REGISTRY/name:tag, or None when the registry has no such tag."""
    name, tag = ref.removeprefix(f"{REGISTRY}/").rsplit(":", 1)
    request = urllib.request.Request(
        f"http://{REGISTRY}/v2/{name}/manifests/{tag}",
        method="HEAD",
        headers={"Accept": MANIFEST_TYPES},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return str(resp.headers["Docker-Content-Digest"])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


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
    """Remove these refs locally, then prune the builder cache.

    Always both: on Docker 20.10, removing an image leaves build-cache records
    whose layers are gone, and the next build that consults them logs
    `ERROR: not found` for the step and exports a broken inline cache.
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


def build(
    repo: Path, registry: str, arch: str, commit: str, *extra: str
) -> tuple[str, list[progress.Step]]:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_OMNI_CI_DOCKER"}
    env.update(BUILDKITE_COMMIT="", ROCM_CI_IMAGE_REGISTRY="", PYTORCH_ROCM_ARCH="")
    started = time.monotonic()
    done = run_cli(
        "build-image", "--platform", "rocm", "--repo", str(repo), "--commit", commit,
        "--registry", registry, "--arch", arch, "--builder", "engine", *extra, env=env, timeout=900,
    )  # fmt: skip
    print(f"build {commit} {' '.join(extra)}: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout, progress.parse(done.stderr)


def import_step(steps: list[progress.Step], cache_ref: str) -> progress.Step:
    (found,) = [s for s in steps if s.name == f"importing cache manifest from {cache_ref}"]
    return found


@pytest.mark.docker
def test_registry_cache_cold_warm_and_invalidated(
    sample_copy: Path, refs: list[str], docker_cli: str
) -> None:
    run_id = uuid.uuid4().hex[:10]
    registry = f"{REGISTRY}/omni-ci-test/rocm-e2e-{run_id}"
    # A unique arch reaches every deps RUN step (ENV PYTORCH_ROCM_ARCH), so no other build
    # on this shared engine can share them: a CACHED RUN can only mean our cache. (COPY
    # steps are keyed by content alone; the wipes prune every local record of them.)
    arch = f"gfx942;e2e-{run_id}"
    key = rocm_key(sample_copy, arch).key
    cache_ref, image_ref = f"{registry}:rocm-deps-cache-{key}", f"{registry}:e2e-{key}"
    refs += [image_ref, cache_ref]

    # 1. Cold: nothing to import yet; image and cache ref are pushed.
    out, cold = build(sample_copy, registry, arch, f"e2e-{key}")
    assert out == f"ROCm dependency cache: {cache_ref}\nROCm CI image: {image_ref}\n"
    assert import_step(cold, cache_ref).status == "ERROR"  # a miss is logged, not fatal
    cold_runs = [s for s in progress.stage_steps(cold, "deps") if s.instruction == "RUN"]
    assert [s.status for s in cold_runs] == ["DONE"] * len(cold_runs)
    assert registry_digest(image_ref) and registry_digest(cache_ref)

    # 2. Wipe: only this test's refs, and the builder cache.
    started = time.monotonic()
    wipe(docker_cli, [image_ref, cache_ref])
    print(f"wipe: {time.monotonic() - started:.1f} s")
    for ref in (image_ref, cache_ref):
        gone = subprocess.run([docker_cli, "image", "inspect", ref], capture_output=True)
        assert gone.returncode != 0

    # 3. Warm: the cache manifest comes from the registry and every deps step is CACHED.
    _, warm = build(sample_copy, registry, arch, f"e2e-{key}")
    assert import_step(warm, cache_ref).status == "DONE"
    deps = progress.stage_steps(warm, "deps")
    assert len(deps) >= 5
    assert [(s.name, s.status) for s in deps] == [(s.name, "CACHED") for s in deps]

    # 4. One requirements file changes: new key, and the heavy deps RUN steps run again.
    # Wiped first, as a fresh agent sees it: only the registry holds a cache, and the old
    # key's ref is still there. (It also sidesteps a Docker 20.10 bug seen in CI: after a
    # build that imported inline cache, a COPY on top of a CACHED step could fail with
    # `failed to prepare …/committed: no such file or directory`.)
    wipe(docker_cli, [image_ref, cache_ref])
    with (sample_copy / "requirements" / "common.txt").open("a") as fh:
        fh.write("# bump\n")
    new_key = rocm_key(sample_copy, arch).key
    assert new_key != key
    new_cache = f"{registry}:rocm-deps-cache-{new_key}"
    refs.append(f"{registry}:e2e-{new_key}")
    out, changed = build(sample_copy, registry, arch, f"e2e-{new_key}", "--no-push")
    assert out.splitlines()[0] == f"ROCm dependency cache: {new_cache}"
    assert import_step(changed, new_cache).status == "ERROR"
    imported = [s.name for s in changed if s.name.startswith("importing cache manifest")]
    assert imported == [f"importing cache manifest from {new_cache}"]  # never the old key's
    assert registry_digest(cache_ref)  # although the old key's cache is still in the registry
    runs = [s for s in progress.stage_steps(changed, "deps") if s.instruction == "RUN"]
    assert len(runs) >= 3
    assert [(s.name, s.status) for s in runs] == [(s.name, "DONE") for s in runs]
    assert registry_digest(f"{registry}:e2e-{new_key}") is None  # --no-push pushed nothing


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
