"""ROCm build through a recording stand-in `docker` (the buildx plugin cannot run here).

The stand-in answers doctor's probes and keeps the builder's existence in a
state file, so the real executor's branches run: fresh host, existing builder,
a create lost to a concurrent job, a create that really fails, a failing build,
and `auto` falling back to the engine backend.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import StandIns, run_cli
from tests.test_images_rocm import COMMIT, F2_KEY, NO_BUILD_ENV, expected_buildx, make_f2

BUILDER = "vllm-omni-rocm-builder"
CACHE = f"rocm/vllm-omni:rocm-deps-cache-{F2_KEY}"
IMAGE = f"rocm/vllm-omni:{COMMIT}"


def docker_standin(
    standins: StandIns,
    state: Path,
    *,
    buildx: bool = True,
    buildkit: bool = True,
    create: str = "touch {state}",
    build_exit: int = 0,
    cache_push_exit: int = 0,
) -> None:
    """A `docker` that answers doctor's probes and plays the builder's life cycle."""
    version = "echo 'github.com/docker/buildx v0.99.0 standin'; exit 0" if buildx else "exit 1"
    missing = f'echo "ERROR: no builder {BUILDER} found" >&2; exit 1'
    script = f"""
    state={state}
    case "$1 $2" in
      "version --format") echo 99.0-standin; exit 0 ;;
      "build --help") exit {0 if buildkit else 1} ;;
      "buildx version") {version} ;;
      "buildx inspect") [ -e "$state" ] || {{ {missing}; }}; exit 0 ;;
      "buildx create") {create.format(state=state)} ;;
      "buildx build") echo "#1 [deps 1/2] FROM base" >&2; exit {build_exit} ;;
      "build "*) exit {build_exit} ;;
      "push "*deps-cache-*) exit {cache_push_exit} ;;
      "push "*) exit 0 ;;
    esac
    exit 0
    """
    standins.add("docker", script, env_keys=("DOCKER_BUILDKIT",))


def build_calls(standins: StandIns) -> list[list[str]]:
    """The recorded calls that are part of the build (doctor's probes left out)."""
    probes = (["version", "--format"], ["build", "--help"], ["buildx", "version"])
    return [a for a in standins.argvs("docker") if a[:2] not in [list(p) for p in probes]]


def run_rocm(standins: StandIns, repo: Path, *args: str) -> tuple[int, str, str]:
    env = standins.env({**os.environ, **NO_BUILD_ENV})
    env.pop("VLLM_OMNI_CI_DOCKER", None)
    done = run_cli(
        "build-image", "--platform", "rocm", "--repo", str(repo), "--commit", COMMIT, *args, env=env
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_f2(tmp_path / "repo")


def test_fresh_host_inspects_creates_bootstraps_and_builds(
    standins: StandIns, repo: Path, tmp_path: Path
) -> None:
    docker_standin(standins, tmp_path / "builder")
    code, out, err = run_rocm(standins, repo)
    assert code == 0, err
    assert build_calls(standins) == [argv[1:] for argv in expected_buildx("rocm/vllm-omni", F2_KEY)]
    assert out == f"ROCm dependency cache: {CACHE}\nROCm CI image: {IMAGE}\n"
    assert "#1 [deps 1/2] FROM base" in err  # BuildKit's progress reaches stderr
    assert all(c["cwd"] == str(repo) for c in standins.calls("docker")[-4:])


def test_existing_builder_is_not_created_again(
    standins: StandIns, repo: Path, tmp_path: Path
) -> None:
    state = tmp_path / "builder"
    state.touch()
    docker_standin(standins, state)
    code, _, err = run_rocm(standins, repo)
    assert code == 0, err
    calls = build_calls(standins)
    assert [c[:2] for c in calls] == [
        ["buildx", "inspect"],
        ["buildx", "inspect"],
        ["buildx", "build"],
    ]
    assert calls[1] == ["buildx", "inspect", "--builder", BUILDER, "--bootstrap"]


def test_create_lost_to_a_concurrent_job_is_not_an_error(
    standins: StandIns, repo: Path, tmp_path: Path
) -> None:
    state = tmp_path / "builder"
    # Another job creates the builder between our inspect and our create.
    concurrent = f'touch {state}; echo "ERROR: existing instance for \\"{BUILDER}\\"" >&2; exit 1'
    docker_standin(standins, state, create=concurrent)
    code, _, err = run_rocm(standins, repo)
    assert code == 0, err
    assert [c[:2] for c in build_calls(standins)] == [
        ["buildx", "inspect"],
        ["buildx", "create"],
        ["buildx", "inspect"],
        ["buildx", "inspect"],
        ["buildx", "build"],
    ]
    assert "created concurrently by another job" in err


def test_create_that_really_fails_stops_with_its_exit_code(
    standins: StandIns, repo: Path, tmp_path: Path
) -> None:
    docker_standin(standins, tmp_path / "builder", create="echo 'ERROR: driver broken' >&2; exit 5")
    code, _, err = run_rocm(standins, repo)
    assert code == 5
    assert [c[:2] for c in build_calls(standins)] == [
        ["buildx", "inspect"],
        ["buildx", "create"],
        ["buildx", "inspect"],
    ]
    assert "buildx create --builder vllm-omni-rocm-builder" in err and "exit 5" in err


def test_failing_build_keeps_its_exit_code(standins: StandIns, repo: Path, tmp_path: Path) -> None:
    docker_standin(standins, tmp_path / "builder", build_exit=17)
    code, _, _ = run_rocm(standins, repo)
    assert code == 17


def test_never_runs_buildx_use(standins: StandIns, repo: Path, tmp_path: Path) -> None:
    docker_standin(standins, tmp_path / "builder")
    run_rocm(standins, repo)
    assert not [c for c in standins.argvs("docker") if c[:2] == ["buildx", "use"]]


def test_auto_falls_back_to_engine_when_buildx_does_not_work(
    standins: StandIns, repo: Path, tmp_path: Path
) -> None:
    docker_standin(standins, tmp_path / "builder", buildx=False)
    code, out, err = run_rocm(standins, repo)
    assert code == 0, err
    calls = [c for c in standins.calls("docker") if c["argv"][0] in ("build", "push")]
    calls = [c for c in calls if c["argv"][:2] != ["build", "--help"]]
    assert [c["argv"] for c in calls] == [
        ["build", "--pull", "--progress=plain", "--target", "test",
         "--build-arg", "ARG_PYTORCH_ROCM_ARCH=gfx942",
         "--build-arg", "BUILDKIT_INLINE_CACHE=1", "--cache-from", CACHE,
         "--file", "docker/Dockerfile.rocm", "--tag", IMAGE, "--tag", CACHE, "."],
        ["push", IMAGE],
        ["push", CACHE],
    ]  # fmt: skip
    assert calls[0]["env"] == {"DOCKER_BUILDKIT": "1"}
    assert out == f"ROCm dependency cache: {CACHE}\nROCm CI image: {IMAGE}\n"


def test_builder_buildx_without_buildx_exits_2_before_building(
    standins: StandIns, repo: Path, tmp_path: Path
) -> None:
    docker_standin(standins, tmp_path / "builder", buildx=False)
    code, out, err = run_rocm(standins, repo, "--builder", "buildx")
    assert (code, out) == (2, "")
    assert err.startswith("error: --builder buildx: `docker buildx` does not work with ")
    assert build_calls(standins) == []


def test_no_usable_backend_exits_2(standins: StandIns, repo: Path, tmp_path: Path) -> None:
    docker_standin(standins, tmp_path / "builder", buildx=False, buildkit=False)
    docker = str(standins.bin_dir / "docker")
    code, out, err = run_rocm(standins, repo, "--docker", docker)
    assert (code, out) == (2, "")
    assert err.startswith("error: no usable backend: ")
    assert build_calls(standins) == []


def test_engine_cache_push_failure_is_ignored_like_ignore_error(
    standins: StandIns, repo: Path, tmp_path: Path
) -> None:
    docker_standin(standins, tmp_path / "builder", buildx=False, cache_push_exit=1)
    code, _, err = run_rocm(standins, repo)
    assert code == 0, err
    assert ["push", CACHE] in standins.argvs("docker")
    assert "warning: cache export failed (exit 1); the image is pushed" in err


def test_engine_image_push_failure_fails(standins: StandIns, repo: Path, tmp_path: Path) -> None:
    docker_standin(standins, tmp_path / "builder", buildx=False)
    (standins.bin_dir / "docker").write_text(
        (standins.bin_dir / "docker").read_text().replace('"push "*) exit 0', '"push "*) exit 6')
    )
    code, _, _ = run_rocm(standins, repo)
    assert code == 6
    assert ["push", CACHE] not in standins.argvs("docker")
