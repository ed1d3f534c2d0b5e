"""CUDA CI image (spec image-builds.md §4.1): key vectors, the plan, the ECR login, the argv.

The expected argv is the script's, written out literally, plus our documented
`--builder vllm-omni-builder` in place of `docker buildx use`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ci.errors import UserError
from ci.images import keyed
from ci.images.cachekey import cuda_inputs, cuda_key
from ci.images.options import BuildOptions
from ci.platforms import Platform
from tests.conftest import StandIns
from tests.inproc import run_task
from tests.test_images_rocm import COMMIT, NO_BUILD_ENV, make_f1, make_f2, write

REPO = "public.ecr.aws/q9t5s3a7/vllm-ci-test-repo"
BUILDER = "vllm-omni-builder"
F1_KEY, F2_KEY = "f4dce04e0bfc9397", "8282b877285ecf02"
CANARY = "ecr-password-canary-3f9a71"


@pytest.fixture
def f2(tmp_path: Path) -> Path:
    repo = make_f2(tmp_path / "f2")
    write(repo, "docker/Dockerfile.ci", "f\n")
    return repo


def options(repo: Path, **kw: object) -> BuildOptions:
    base: dict[str, object] = {"repo": str(repo), "commit": COMMIT, "dry_run": True}
    return BuildOptions(platform=Platform.CUDA, **{**base, **kw})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- key


def test_f1_vector(tmp_path: Path) -> None:
    repo = make_f1(tmp_path)
    write(repo, "docker/Dockerfile.ci", "f\n")
    assert cuda_key(repo).key == F1_KEY


def test_f2_vector_and_c_byte_order(f2: Path) -> None:
    assert cuda_key(f2).key == F2_KEY
    assert cuda_inputs(f2) == (
        "pyproject.toml",
        "setup.py",
        "requirements/Rocm.txt",
        "requirements/_b.txt",
        "requirements/common.txt",
        "requirements/link.txt",
        "docker/Dockerfile.ci",
    )


def test_key_does_not_depend_on_the_locale(f2: Path) -> None:
    env = {**os.environ, **NO_BUILD_ENV, "LC_ALL": "en_US.UTF-8", "LANG": "en_US.UTF-8"}
    done = run_task(
        "build-image", "--platform", "cuda", "--repo", str(f2), "--commit", COMMIT, "--dry-run",
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"# cache key: deps-cache-{F2_KEY}\n" in done.stdout


def test_symlinked_requirement_is_read_through(f2: Path) -> None:
    (f2 / "requirements/link.txt").unlink()
    write(f2, "requirements/other.txt", "other\n")
    (f2 / "requirements/link.txt").symlink_to("other.txt")
    assert cuda_key(f2).key != F2_KEY


@pytest.mark.parametrize("rel", ["requirements/.hidden.txt", "requirements/sub/n.txt", "README"])
def test_key_ignores_dotfiles_nested_and_other_files(f2: Path, rel: str) -> None:
    write(f2, rel, "changed\n")
    assert cuda_key(f2).key == F2_KEY


@pytest.mark.parametrize(
    "rel", ["pyproject.toml", "setup.py", "requirements/_b.txt", "docker/Dockerfile.ci"]
)
def test_key_changes_with_each_input(f2: Path, rel: str) -> None:
    write(f2, rel, "changed\n")
    assert cuda_key(f2).key != F2_KEY


def test_dangling_symlink_is_an_error(f2: Path) -> None:
    (f2 / "requirements/common.txt").unlink()
    with pytest.raises(UserError) as caught:
        keyed.prepare(options(f2), {})
    # common.txt left the glob; the symlink still matches it and cannot be read through.
    assert caught.value.problems == ("cache-key input does not exist: requirements/link.txt",)


def test_missing_dockerfile_and_requirements(f2: Path) -> None:
    (f2 / "docker/Dockerfile.ci").unlink()
    shutil.rmtree(f2 / "requirements")
    with pytest.raises(UserError) as caught:
        keyed.prepare(options(f2), {})
    assert caught.value.code == 2
    assert caught.value.problems == ("cache-key input does not exist: requirements/",)
    write(f2, "requirements/a.txt", "")
    with pytest.raises(UserError) as caught:
        keyed.prepare(options(f2), {})
    assert caught.value.problems == ("cache-key input does not exist: docker/Dockerfile.ci",)


def test_rocm_only_options_are_rejected(f2: Path) -> None:
    with pytest.raises(UserError) as caught:
        keyed.prepare(options(f2, arch="gfx942", builder="quick"), {})
    assert caught.value.problems == (
        "--arch: applies to --platform rocm only",
        "--builder: unknown value 'quick': allowed values are auto, buildx, engine",
    )


# --------------------------------------------------------------------------- plan


def expected(key: str = F2_KEY, registry: str = REPO) -> list[list[str]]:
    cache = f"{registry}:deps-cache-{key}"
    return [
        ["aws", "ecr-public", "get-login-password", "--region", "us-east-1"],
        ["docker", "login", "--username", "AWS", "--password-stdin", "public.ecr.aws/q9t5s3a7"],
        ["docker", "buildx", "inspect", "--builder", BUILDER],
        ["docker", "buildx", "create", "--builder", BUILDER, "--name", BUILDER,
         "--driver", "docker-container"],
        ["docker", "buildx", "build", "--builder", BUILDER, "--push", "--progress=plain",
         "--cache-from", f"type=registry,ref={cache}",
         "--cache-to", f"type=registry,ref={cache},mode=max,compression=zstd",
         "--file", "docker/Dockerfile.ci",
         "-t", f"{registry}:{COMMIT}",
         "."],
    ]  # fmt: skip


def test_plan_is_the_scripts_sequence(f2: Path) -> None:
    plan = keyed.prepare(options(f2), {}).plan()
    assert [list(c.argv) for c in plan.commands] == expected()
    login = plan.commands[1]
    assert login.stdin_secret and login.line().endswith("  # stdin: a secret, not shown")
    assert ("cache key", f"deps-cache-{F2_KEY}") in plan.facts


def test_engine_plan(f2: Path) -> None:
    plan = keyed.prepare(options(f2, builder="engine"), {}).plan()
    cache, image = f"{REPO}:deps-cache-{F2_KEY}", f"{REPO}:{COMMIT}"
    assert [list(c.argv) for c in plan.commands][2:] == [
        ["docker", "build", "--progress=plain", "--build-arg", "BUILDKIT_INLINE_CACHE=1",
         "--cache-from", cache, "--file", "docker/Dockerfile.ci", "-t", image, "-t", cache, "."],
        ["docker", "push", image],
        ["docker", "push", cache],
    ]  # fmt: skip


def test_no_login_without_push_or_for_another_registry(f2: Path) -> None:
    local = keyed.prepare(options(f2, push=False), {}).plan()
    assert [c.argv[:2] for c in local.commands] == [("docker", "buildx")] * 3
    other = keyed.prepare(options(f2, registry="127.0.0.1:5000/omni/ci"), {}).plan()
    assert [list(c.argv) for c in other.commands] == expected(registry="127.0.0.1:5000/omni/ci")[2:]
    assert ("login", "none") in other.facts


# --------------------------------------------------------------------------- through stand-ins


def cuda_standins(standins: StandIns, tmp_path: Path, aws: str = f"echo {CANARY}") -> Path:
    stdin_file = tmp_path / "login-stdin"
    standins.add("aws", aws)
    standins.add(
        "docker",
        f"""
        case "$1 $2" in
          "version --format") echo 99.0-standin ;;
          "buildx version") echo "github.com/docker/buildx v0.99.0 standin" ;;
          "buildx inspect") exit 1 ;;
          "login --username") cat > {stdin_file} ;;
        esac
        exit 0
        """,
    )
    return stdin_file


def run_cuda(standins: StandIns, repo: Path) -> tuple[int, str, str]:
    env = standins.env({**os.environ, **NO_BUILD_ENV})
    env.pop("VLLM_OMNI_CI_DOCKER", None)
    done = run_task(
        "build-image", "--platform", "cuda", "--repo", str(repo), "--commit", COMMIT, env=env
    )
    return done.returncode, done.stdout, done.stderr


def test_login_password_travels_on_stdin_only(standins: StandIns, f2: Path, tmp_path: Path) -> None:
    stdin_file = cuda_standins(standins, tmp_path)
    code, out, err = run_cuda(standins, f2)
    assert code == 0, err
    assert stdin_file.read_text() == f"{CANARY}\n"
    assert CANARY not in out and CANARY not in err
    assert CANARY not in (tmp_path / "standin-calls.jsonl").read_text()
    assert out == (
        f"BUILDKITE_COMMIT: {COMMIT}\n"
        f"Cache key: deps-cache-{F2_KEY}\n"
        f"Building image tag: {REPO}:{COMMIT}\n"
    )
    calls = [["aws", *a] for a in standins.argvs("aws")] + [
        ["docker", *a]
        for a in standins.argvs("docker")
        if a[:2] not in (["version", "--format"], ["build", "--help"], ["buildx", "version"])
    ]
    assert calls == expected()


def test_the_password_is_masked_in_every_later_line(
    standins: StandIns, f2: Path, tmp_path: Path
) -> None:
    """The build echoes the password docker login got; no variable names it, so only its
    being remembered once `aws` printed it masks it."""
    stdin_file = cuda_standins(standins, tmp_path)
    script = standins.bin_dir / "docker"
    echo = f'"buildx build") echo "login token $(cat {stdin_file})" >&2; exit 4 ;;\n'
    script.write_text(script.read_text().replace('"buildx inspect")', echo + '"buildx inspect")'))
    code, out, err = run_cuda(standins, f2)
    assert code == 4
    assert CANARY not in out and CANARY not in err
    assert "login token [REDACTED]" in err.splitlines()


def test_dry_run_says_the_password_is_piped_and_create_follows_a_failed_inspect(f2: Path) -> None:
    env = {**os.environ, **NO_BUILD_ENV}
    done = run_task(
        "build-image", "--platform", "cuda", "--repo", str(f2), "--commit", COMMIT, "--dry-run",
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    heads = [line for line in done.stdout.splitlines() if line[:1].isdigit()]
    assert heads[:4] == [
        "1. get the ECR Public login password [its output is a secret, not shown]",
        "2. log in to public.ecr.aws/q9t5s3a7 [stdin: the step before's output]",
        f"3. inspect builder {BUILDER} (create it if missing) [a failure is tolerated]",
        f"4. create builder {BUILDER} [only if the step before failed; a failure is forgiven"
        f" if `docker buildx inspect --builder {BUILDER}` then succeeds]",
    ]


def test_failed_password_fetch_stops_before_login_and_build(
    standins: StandIns, f2: Path, tmp_path: Path
) -> None:
    cuda_standins(standins, tmp_path, aws="echo 'Unable to locate credentials' >&2; exit 253")
    code, _, err = run_cuda(standins, f2)
    assert code == 253
    assert "Unable to locate credentials" in err
    assert [
        a for a in standins.argvs("docker") if a[0] in ("login", "buildx") and a[1] != "version"
    ] == []


def test_engine_cache_push_failure_fails_like_the_scripts_cache_export(
    standins: StandIns, f2: Path
) -> None:
    """No `ignore-error` in the CUDA script: a failed cache export fails the job."""
    standins.add(
        "docker",
        """
        case "$1 $2" in
          "version --format") echo 99.0-standin ;;
          "buildx version") exit 1 ;;
          "push "*deps-cache-*) exit 3 ;;
        esac
        exit 0
        """,
    )
    env = standins.env({**os.environ, **NO_BUILD_ENV})
    env.pop("VLLM_OMNI_CI_DOCKER", None)
    done = run_task(
        "build-image", "--platform", "cuda", "--repo", str(f2), "--commit", COMMIT,
        "--registry", "127.0.0.1:5000/omni/cuda", env=env,
    )  # fmt: skip
    assert done.returncode == 3
    pushes = [a for a in standins.argvs("docker") if a[0] == "push"]
    assert pushes == [
        ["push", f"127.0.0.1:5000/omni/cuda:{COMMIT}"],
        ["push", f"127.0.0.1:5000/omni/cuda:deps-cache-{F2_KEY}"],
    ]


def test_key_equals_the_scripts_recipe_under_lc_all_c(f2: Path) -> None:
    """`cat` of the glob under LC_ALL=C, by the real bash, is the recipe we must match."""
    for name in ("with space.txt", "ünïcödé.txt", "-dash.txt", "Z.txt", "a.txt"):
        write(f2, f"requirements/{name}", f"{name}\n")
    recipe = (
        "cat pyproject.toml setup.py requirements/*.txt docker/Dockerfile.ci"
        " | sha256sum | cut -c1-16"
    )
    done = subprocess.run(
        ["bash", "-c", recipe],
        cwd=f2,
        env={"PATH": os.environ["PATH"], "LC_ALL": "C"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert cuda_key(f2).key == done.stdout.strip()
