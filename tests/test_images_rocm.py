"""ROCm CI image: the cache key (spec image-builds.md §1.4), refs, the plan, and every input error.

Expected keys are the spec's vectors (produced by the bash recipe), and the
expected argv is written out literally from build-ci-image.sh (§1.3 step 9) plus
our documented `--builder`, not derived from our own functions.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci.errors import UserError
from ci.images import keyed
from ci.images.cachekey import rocm_inputs, rocm_key, rocm_stream
from ci.images.options import BuildOptions
from ci.platforms import Platform
from tests.conftest import ROOT, SAMPLE, StandIns, run_cli
from tests.inproc import run_task

COMMIT = "0123456789abcdef0123456789abcdef01234567"
BUILDER = "vllm-omni-rocm-builder"
F1_KEY, F2_KEY, F2_TWO_ARCH_KEY = "ca96d1babf13a06a", "e2ba3fc879528fa2", "1098b1305bce59d5"
FIXED = (
    "docker/Dockerfile.rocm",
    "docker/Dockerfile.rocm.dockerignore",
    "pyproject.toml",
    "setup.py",
    "tools/install_torchcodec_rocm.sh",
)
# The stand-in builds "push" to Docker Hub and ECR Public, which this machine
# cannot reach: the registry probe (ci/images/registry.py, tested against local
# stand-in registries in test_images_probe.py) is skipped by its documented knob.
NO_BUILD_ENV = {
    "BUILDKITE_COMMIT": "",
    "ROCM_CI_IMAGE_REGISTRY": "",
    "PYTORCH_ROCM_ARCH": "",
    "VLLM_OMNI_CI_REGISTRY_PROBE": "0",
}


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_f1(root: Path) -> Path:
    for rel, text in zip(FIXED, ("a\n", "b\n", "c\n", "d\n", "e\n"), strict=True):
        write(root, rel, text)
    write(root, "requirements/common.txt", "x\n")
    return root


def make_f2(root: Path) -> Path:
    make_f1(root)
    write(root, "requirements/Rocm.txt", "y\n")
    write(root, "requirements/.hidden.txt", "z\n")
    write(root, "requirements/_b.txt", "w\n")
    write(root, "requirements/sub/n.txt", "q\n")
    (root / "requirements/link.txt").symlink_to("common.txt")
    return root


@pytest.fixture
def f2(tmp_path: Path) -> Path:
    return make_f2(tmp_path / "f2")


def options(repo: Path, **kw: object) -> BuildOptions:
    base: dict[str, object] = {"repo": str(repo), "commit": COMMIT, "dry_run": True}
    return BuildOptions(platform=Platform.ROCM, **{**base, **kw})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- key vectors


def test_f1_vector(tmp_path: Path) -> None:
    repo = make_f1(tmp_path)
    assert len(rocm_stream(repo, "gfx942")) == 723
    assert rocm_key(repo, "gfx942").key == F1_KEY


@pytest.mark.parametrize(("arch", "key"), [("gfx942", F2_KEY), ("gfx942;gfx950", F2_TWO_ARCH_KEY)])
def test_f2_vectors(f2: Path, arch: str, key: str) -> None:
    assert rocm_key(f2, arch).key == key


@pytest.mark.parametrize("env_arch", [None, ""])
def test_f2_unset_or_empty_arch_defaults_to_gfx942(f2: Path, env_arch: str | None) -> None:
    env = {} if env_arch is None else {"PYTORCH_ROCM_ARCH": env_arch}
    job = keyed.prepare(options(f2), env)
    assert (job.arch, job.key.key) == ("gfx942", F2_KEY)


def test_f2_file_order_is_c_byte_order_with_dotfiles_no_symlinks_no_recursion(f2: Path) -> None:
    assert rocm_inputs(f2) == (
        *FIXED,
        "requirements/.hidden.txt",
        "requirements/Rocm.txt",
        "requirements/_b.txt",
        "requirements/common.txt",
    )


def test_stream_layout_is_path_line_then_sha256sum_line(tmp_path: Path) -> None:
    repo = make_f1(tmp_path)
    lines = rocm_stream(repo, "gfx942").decode().splitlines()
    assert lines[0] == "rocm-arch=gfx942"
    assert lines[1] == "path=docker/Dockerfile.rocm"
    # sha256 of "a\n", two spaces, the path: GNU sha256sum text mode.
    assert lines[2] == (
        "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7  docker/Dockerfile.rocm"
    )
    assert len(lines) == 1 + 2 * 6


def test_arch_is_hashed_verbatim_not_trimmed(f2: Path) -> None:
    assert rocm_key(f2, " gfx942").key != F2_KEY


@pytest.mark.parametrize(
    "rel",
    [*FIXED, "requirements/.hidden.txt", "requirements/Rocm.txt", "requirements/common.txt"],
)
def test_key_changes_when_any_input_changes(f2: Path, rel: str) -> None:
    (f2 / rel).write_text((f2 / rel).read_text() + "changed\n")
    assert rocm_key(f2, "gfx942").key != F2_KEY


@pytest.mark.parametrize(
    "rel",
    ["requirements/sub/n.txt", "requirements/notes.md", "omni_sample/model.py", "README.md"],
)
def test_key_ignores_every_other_file(f2: Path, rel: str) -> None:
    write(f2, rel, "anything\n")
    assert rocm_key(f2, "gfx942").key == F2_KEY


def test_new_requirements_file_changes_the_key(f2: Path) -> None:
    write(f2, "requirements/zz.txt", "")
    assert rocm_key(f2, "gfx942").key != F2_KEY


def test_symlinked_fixed_input_is_followed(f2: Path) -> None:
    (f2 / "setup.py").rename(f2 / "real-setup.py")
    (f2 / "setup.py").symlink_to("real-setup.py")
    assert rocm_key(f2, "gfx942").key == F2_KEY


# --------------------------------------------------------------------------- refs, env


def test_refs_from_defaults(f2: Path) -> None:
    job = keyed.prepare(options(f2), {})
    assert job.cache_ref == f"rocm/vllm-omni:rocm-deps-cache-{F2_KEY}"
    assert job.image_ref == f"rocm/vllm-omni:{COMMIT}"


def test_env_precedence_flag_then_env_then_default(f2: Path) -> None:
    env = {"ROCM_CI_IMAGE_REGISTRY": "env.example/omni", "PYTORCH_ROCM_ARCH": "gfx90a"}
    from_env = keyed.prepare(options(f2), env)
    assert (from_env.registry, from_env.arch) == ("env.example/omni", "gfx90a")
    flagged = keyed.prepare(options(f2, registry="flag.example/omni", arch="gfx950"), env)
    assert (flagged.registry, flagged.arch) == ("flag.example/omni", "gfx950")
    empty = keyed.prepare(options(f2), {"ROCM_CI_IMAGE_REGISTRY": "", "PYTORCH_ROCM_ARCH": ""})
    assert (empty.registry, empty.arch) == ("rocm/vllm-omni", "gfx942")


@pytest.mark.parametrize(
    "arch", ["gfx942\n", "gfx90a gfx942", "\tgfx942", "gfx942\x00", "gfx\u200b942"]
)
def test_arch_with_whitespace_or_control_characters_is_an_input_error(f2: Path, arch: str) -> None:
    with pytest.raises(UserError) as caught:
        keyed.prepare(options(f2, arch=arch), {})
    (problem,) = caught.value.problems
    assert problem.startswith(f"--arch: {arch!r} has whitespace or a control character (")
    assert problem.endswith("separated by ';' (e.g. gfx90a;gfx942)")
    assert caught.value.code == 2
    with pytest.raises(UserError) as from_env:
        keyed.prepare(options(f2), {"PYTORCH_ROCM_ARCH": arch})
    assert from_env.value.problems[0].startswith(f"PYTORCH_ROCM_ARCH: {arch!r} has whitespace")


def test_arch_list_with_semicolons_is_kept_verbatim(f2: Path) -> None:
    job = keyed.prepare(options(f2, arch="gfx942;gfx950"), {})
    assert (job.arch, job.key.key) == ("gfx942;gfx950", F2_TWO_ARCH_KEY)


def test_cli_arch_with_a_newline_is_one_error_line(f2: Path, standins: StandIns) -> None:
    standins.add("docker", "exit 0")
    env = standins.env({**os.environ, **NO_BUILD_ENV, "PYTORCH_ROCM_ARCH": "gfx942\ngfx950"})
    done = run_task(
        "build-image", "--platform", "rocm", "--repo", str(f2), "--commit", COMMIT, env=env
    )
    assert done.returncode == 2
    assert done.stderr == (
        "error: PYTORCH_ROCM_ARCH: 'gfx942\\ngfx950' has whitespace or a control character "
        "('\\n'); give the targets without spaces, separated by ';' (e.g. gfx90a;gfx942)\n"
    )
    assert standins.calls() == []


def test_commit_from_buildkite_env(f2: Path) -> None:
    job = keyed.prepare(options(f2, commit=""), {"BUILDKITE_COMMIT": "feedface"})
    assert job.image_ref == "rocm/vllm-omni:feedface"


# --------------------------------------------------------------------------- the plan


def expected_buildx(registry: str, key: str, arch: str = "gfx942") -> list[list[str]]:
    cache = f"{registry}:rocm-deps-cache-{key}"
    return [
        ["docker", "buildx", "inspect", "--builder", BUILDER],
        ["docker", "buildx", "create", "--builder", BUILDER, "--name", BUILDER,
         "--driver", "docker-container"],
        ["docker", "buildx", "inspect", "--builder", BUILDER, "--bootstrap"],
        ["docker", "buildx", "build", "--builder", BUILDER,
         "--push", "--pull", "--progress=plain",
         "--target", "test",
         "--build-arg", f"ARG_PYTORCH_ROCM_ARCH={arch}",
         "--cache-from", f"type=registry,ref={cache}",
         "--cache-to", f"type=registry,ref={cache},mode=max,compression=zstd,ignore-error=true",
         "--file", "docker/Dockerfile.rocm",
         "--tag", f"{registry}:{COMMIT}",
         "."],
    ]  # fmt: skip


def test_auto_dry_run_plans_buildx_with_the_scripts_flags(f2: Path) -> None:
    plan = keyed.prepare(options(f2), {}).plan()
    assert [list(c.argv) for c in plan.commands] == expected_buildx("rocm/vllm-omni", F2_KEY)
    assert all(c.cwd == str(f2) for c in plan.commands)
    build = plan.commands[-1].argv
    assert not any(a.startswith(("BASE_IMAGE=", "USE_NIGHTLY_BUILD=")) for a in build)
    assert all("use" not in c.argv[:3] for c in plan.commands)


def test_every_buildx_command_names_the_builder(f2: Path) -> None:
    plan = keyed.prepare(options(f2), {}).plan()
    for cmd in plan.commands:
        i = cmd.argv.index("--builder")
        assert cmd.argv[1] == "buildx" and cmd.argv[i + 1] == BUILDER


def test_engine_plan(f2: Path) -> None:
    plan = keyed.prepare(options(f2, builder="engine"), {}).plan()
    cache, image = f"rocm/vllm-omni:rocm-deps-cache-{F2_KEY}", f"rocm/vllm-omni:{COMMIT}"
    assert [list(c.argv) for c in plan.commands] == [
        ["docker", "build", "--pull", "--progress=plain", "--target", "test",
         "--build-arg", "ARG_PYTORCH_ROCM_ARCH=gfx942",
         "--build-arg", "BUILDKIT_INLINE_CACHE=1", "--cache-from", cache,
         "--file", "docker/Dockerfile.rocm", "--tag", image, "--tag", cache, "."],
        ["docker", "push", image],
        ["docker", "push", cache],
    ]  # fmt: skip
    assert plan.commands[0].env == {"DOCKER_BUILDKIT": "1"}


def test_no_push_builds_locally_and_exports_no_cache(f2: Path) -> None:
    buildx = keyed.prepare(options(f2, push=False), {}).plan().commands[-1].argv
    assert "--push" not in buildx and "--load" in buildx
    assert "--cache-to" not in buildx
    engine = keyed.prepare(options(f2, push=False, builder="engine"), {}).plan().commands
    assert len(engine) == 1 and engine[0].argv.count("--tag") == 1


@pytest.mark.parametrize("builder", ["buildx", "engine"])
def test_no_push_sends_no_request_off_this_machine(f2: Path, builder: str) -> None:
    """Docker Hub's cache ref is not read and the base is not pulled; a loopback ref is read."""
    hub = keyed.prepare(options(f2, push=False, builder=builder), {}).plan().commands[-1].argv
    assert "--cache-from" not in hub and "--pull" not in hub
    assert not any("rocm-deps-cache" in word for word in hub)
    local = "127.0.0.1:5000/omni-ci/rocm"
    near = keyed.prepare(options(f2, push=False, builder=builder, registry=local), {}).plan()
    argv = near.commands[-1].argv
    assert "--cache-from" in argv and "--pull" not in argv
    assert f"{local}:rocm-deps-cache-{F2_KEY}" in argv[argv.index("--cache-from") + 1]


def test_dry_run_cli_prints_key_refs_and_every_command(f2: Path, standins: StandIns) -> None:
    standins.add("docker", "exit 99")
    standins.add("git", "exit 99")
    # Only the stand-ins and Python on PATH: no docker here can build, as on a bare agent.
    path = f"{standins.bin_dir}{os.pathsep}{Path(sys.executable).parent}"
    done = run_task(
        "build-image", "--platform", "rocm", "--repo", str(f2), "--commit", COMMIT, "--dry-run",
        env={**os.environ, **NO_BUILD_ENV, "PATH": path},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"# cache key: {F2_KEY}\n" in out
    assert f"# cache ref: rocm/vllm-omni:rocm-deps-cache-{F2_KEY}\n" in out
    assert f"# image: rocm/vllm-omni:{COMMIT}\n" in out
    for argv in expected_buildx("rocm/vllm-omni", F2_KEY):
        assert subprocess.list2cmdline(argv) in out
    # Only the read-only client probes the run makes too; nothing that builds or pushes.
    probes = [["version", "--format", "{{.Client.Version}}"], ["--version"], ["build", "--help"],
              ["buildx", "version"]]  # fmt: skip
    assert standins.calls("git") == []
    assert [a for a in standins.argvs("docker") if a not in probes] == []
    assert "# note: the run would stop here: no usable backend" in out


def test_sample_dry_run_without_any_docker_on_path(tmp_path: Path) -> None:
    """The issue's 'done when': the exact plan on a machine with no engine (no docker at all)."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    env = {**os.environ, **NO_BUILD_ENV, "PATH": f"{bare}:{Path(sys.executable).parent}"}
    done = run_task(
        "build-image", "--platform", "rocm", "--repo", "examples/omni-sample", "--dry-run",
        env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    key = rocm_key(SAMPLE, "gfx942").key
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"# image: rocm/vllm-omni:{head}\n" in done.stdout
    assert f"--cache-from type=registry,ref=rocm/vllm-omni:rocm-deps-cache-{key}" in done.stdout


# --------------------------------------------------------------------------- input errors


def problems_of(repo: Path, env: dict[str, str] | None = None, **kw: object) -> list[str]:
    with pytest.raises(UserError) as caught:
        keyed.prepare(options(repo, **kw), env or {})
    assert caught.value.code == 2
    return list(caught.value.problems)


@pytest.mark.parametrize("rel", FIXED)
def test_missing_fixed_input_uses_the_scripts_message(f2: Path, rel: str) -> None:
    (f2 / rel).unlink()
    assert problems_of(f2) == [f"cache-key input does not exist: {rel}"]


def test_fixed_input_that_is_a_directory_does_not_exist(f2: Path) -> None:
    (f2 / "setup.py").unlink()
    (f2 / "setup.py").mkdir()
    assert problems_of(f2) == ["cache-key input does not exist: setup.py"]


def test_missing_requirements_dir_is_an_error(f2: Path) -> None:
    shutil.rmtree(f2 / "requirements")
    assert problems_of(f2) == ["cache-key input does not exist: requirements/"]


@pytest.mark.parametrize("name", ["back\\slash.txt", "new\nline.txt"])
def test_paths_with_backslash_or_newline_are_rejected(f2: Path, name: str) -> None:
    write(f2, f"requirements/{name}", "x\n")
    (problem,) = problems_of(f2)
    assert "backslash or newline" in problem and repr(f"requirements/{name}") in problem


def test_every_problem_is_reported_at_once(f2: Path) -> None:
    (f2 / "setup.py").unlink()
    (f2 / "pyproject.toml").unlink()
    found = problems_of(f2, registry="Not/A Ref", builder="fast", commit="-bad")
    assert found == [
        "--builder: unknown value 'fast': allowed values are auto, buildx, engine",
        "--registry: 'Not/A Ref' is not a valid image repository "
        "(expected [host[:port]/]path, lowercase path components, no tag or digest)",
        "--commit: '-bad' is not a valid image tag "
        "(allowed: letters, digits, '_', '.', '-'; not starting with '.' or '-'; at most 128)",
        "cache-key input does not exist: pyproject.toml",
        "cache-key input does not exist: setup.py",
    ]


def test_bad_registry_from_env_names_the_variable(f2: Path) -> None:
    (problem,) = problems_of(f2, {"ROCM_CI_IMAGE_REGISTRY": "UPPER/case"})
    assert problem.startswith("ROCM_CI_IMAGE_REGISTRY: 'UPPER/case' is not a valid")


@pytest.mark.parametrize(
    "registry", ["rocm/vllm-omni", "127.0.0.1:5000/omni-ci/rocm", "host.example:443/a/b-c_d.e"]
)
def test_valid_registries(f2: Path, registry: str) -> None:
    assert keyed.prepare(options(f2, registry=registry), {}).registry == registry


def test_missing_commit_in_buildkite_exits_2_before_any_command(
    f2: Path, standins: StandIns
) -> None:
    standins.add("docker", "exit 0")
    env = standins.env({**os.environ, **NO_BUILD_ENV, "BUILDKITE": "true"})
    done = run_task("build-image", "--platform", "rocm", "--repo", str(f2), env=env)
    assert (done.returncode, done.stderr, done.stdout) == (
        2,
        "error: BUILDKITE_COMMIT is not set\n",
        "",
    )
    assert standins.calls() == []


def test_cli_input_errors_exit_2_with_one_line_each_and_run_nothing(
    f2: Path, standins: StandIns
) -> None:
    standins.add("docker", "exit 0")
    (f2 / "setup.py").unlink()
    done = run_task(
        "build-image", "--platform", "rocm", "--repo", str(f2), "--commit", COMMIT,
        "--builder", "nope", env=standins.env({**os.environ, **NO_BUILD_ENV}),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: --builder: unknown value 'nope': allowed values are auto, buildx, engine",
        "error: cache-key input does not exist: setup.py",
    ]
    assert standins.calls() == []


# An unprivileged user is needed: root reads any file regardless of its mode.
UNPRIVILEGED = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
AS_CLI = """
import sys
from ci.errors import TaskError
from ci.images import keyed
from ci.images.options import BuildOptions
from ci.platforms import Platform
try:
    keyed.build(BuildOptions(platform=Platform.ROCM, repo=sys.argv[1], commit="abc", dry_run=True))
except TaskError as exc:
    sys.stderr.write("".join(f"error: {p}\\n" for p in exc.problems))
    sys.exit(exc.code)
"""


@pytest.fixture
def world_readable_f2() -> Iterator[Path]:
    """F2 in a directory the unprivileged user can traverse (pytest's tmp_path is 0700).

    Beside it, `lib/ci` is a copy of our package: the clone itself may lie in a folder
    that user cannot enter (CI's folder is not ours to choose), so PYTHONPATH points there.
    """
    top = Path(tempfile.mkdtemp(prefix="vllm-omni-ci-rocm-key-"))
    top.chmod(0o755)
    shutil.copytree(ROOT / "ci", top / "lib" / "ci", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in (top / "lib", *(top / "lib").rglob("*")):
        folder.chmod(0o755 if folder.is_dir() else 0o644)
    try:
        yield make_f2(top / "repo")
    finally:
        shutil.rmtree(top)


@pytest.mark.process  # runs as another user (setpriv): a process of its own
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root+setpriv")
@pytest.mark.parametrize("rel", ["pyproject.toml", "requirements/_b.txt"])
def test_unreadable_input_is_an_error_not_a_silently_wrong_key(
    world_readable_f2: Path, rel: str
) -> None:
    repo = world_readable_f2
    run = [*UNPRIVILEGED, "/usr/bin/python3", "-c", AS_CLI, str(repo)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo.parent / "lib"), "HOME": "/tmp"}
    readable = subprocess.run(run, env=env, capture_output=True, text=True)
    assert readable.returncode == 0, readable.stderr
    assert f"# cache key: {F2_KEY}" in readable.stdout
    (repo / rel).chmod(0o200)
    denied = subprocess.run(run, env=env, capture_output=True, text=True)
    assert (denied.returncode, denied.stdout) == (2, "")
    assert denied.stderr == f"error: cache-key input is not readable: {rel}\n"


@pytest.mark.process  # runs as another user (setpriv): a process of its own
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root+setpriv")
def test_unlistable_requirements_dir_is_an_error(world_readable_f2: Path) -> None:
    repo = world_readable_f2
    (repo / "requirements").chmod(0o311)  # traversable, not listable
    run = [*UNPRIVILEGED, "/usr/bin/python3", "-c", AS_CLI, str(repo)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo.parent / "lib"), "HOME": "/tmp"}
    denied = subprocess.run(run, env=env, capture_output=True, text=True)
    assert denied.returncode == 2
    assert (
        denied.stderr
        == "error: cache-key input is not readable: requirements/: Permission denied\n"
    )


@pytest.mark.parametrize(
    ("shim", "platform"),
    [("scripts/amd/build-ci-image.sh", "rocm"), ("scripts/cuda/build-ci-image.sh", "cuda")],
)
@pytest.mark.process  # the drop-in shim against the console script
def test_shim_is_a_drop_in_for_the_task(f2: Path, shim: str, platform: str) -> None:
    write(f2, "docker/Dockerfile.ci", "f\n")
    env = {**os.environ, **NO_BUILD_ENV}
    args = ("--repo", str(f2), "--commit", COMMIT, "--dry-run")
    via_shim = subprocess.run(
        ["bash", str(ROOT / shim), *args], env=env, capture_output=True, text=True, cwd=f2
    )
    direct = run_cli("build-image", "--platform", platform, *args, env=env)
    assert via_shim.returncode == 0, via_shim.stderr
    assert via_shim.stdout == direct.stdout and "# plan: " in direct.stdout
    failing = subprocess.run(
        ["bash", str(ROOT / shim), "--repo", str(f2), "--builder", "nope", "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert failing.returncode == 2


# The script's recipe (spec §1.4) in bash, run with the real find/sort/sha256sum.
BASH_RECIPE = r"""
L=(docker/Dockerfile.rocm docker/Dockerfile.rocm.dockerignore pyproject.toml setup.py
   tools/install_torchcodec_rocm.sh)
while IFS= read -r f; do L+=("$f"); done < <(
  find requirements -maxdepth 1 -type f -name '*.txt' | LC_ALL=C sort)
{ printf 'rocm-arch=%s\n' "$ARCH"
  for p in "${L[@]}"; do printf 'path=%s\n' "$p"; sha256sum "$p"; done
} | sha256sum | cut -c1-16
"""


def bash_key(repo: Path, arch: str) -> str:
    done = subprocess.run(
        ["bash", "-c", BASH_RECIPE],
        cwd=repo,
        env={"PATH": os.environ["PATH"], "ARCH": arch, "LC_ALL": "C.UTF-8"},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.parametrize("arch", ["gfx942", "gfx942;gfx950", "gfx90a gfx942 ", "gfx\u00e9"])
def test_key_equals_the_bash_recipe_on_the_sample(arch: str) -> None:
    assert rocm_key(SAMPLE, arch).key == bash_key(SAMPLE, arch)


def test_key_equals_the_bash_recipe_on_awkward_names(f2: Path) -> None:
    for name in ("with space.txt", "ünïcödé.txt", "-dash.txt", "[x].txt", ".txt", "Z.txt"):
        write(f2, f"requirements/{name}", f"{name}\n")
    (f2 / "requirements/dir.txt").mkdir()
    assert rocm_key(f2, "gfx942").key == bash_key(f2, "gfx942")
