"""`release.publish-images`: the script's tags and command sequence, checked by stand-ins.

`aws`, `docker` (pulls from public ECR, pushes to Docker Hub) and
`buildkite-agent` cannot run here, so recording stand-ins take their place and
check what they receive. The expected sequences are written out literally from
publish-release-images.sh (spec §4.3).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ci.errors import UserError
from ci.images.steps import SecretPipe
from ci.release import publish
from tests.conftest import StandIns, cli_path
from tests.inproc import run_inproc

COMMIT = "4f2a9c0d1e3b5a7c9e1f3a5b7c9d1e3f5a7b9c1d"
ECR = "public.ecr.aws/q9t5s3a7/vllm-omni-release-repo"
HUB = "vllm/vllm-omni"
PASSWORD = "CANARY-ecr-password-5c4b3a291807"


def manifest(tag: str, base: str) -> list[list[str]]:
    return [
        ["manifest", "rm", f"{HUB}:{tag}"],
        ["manifest", "create", f"{HUB}:{tag}", f"{HUB}:{base}-x86_64", f"{HUB}:{base}-aarch64"],
        ["manifest", "push", f"{HUB}:{tag}"],
    ]


def primary(tag: str) -> list[list[str]]:
    return [
        ["tag", f"{ECR}:{COMMIT}-x86_64", f"{HUB}:{tag}-x86_64"],
        ["tag", f"{ECR}:{COMMIT}-aarch64", f"{HUB}:{tag}-aarch64"],
        ["push", f"{HUB}:{tag}-x86_64"],
        ["push", f"{HUB}:{tag}-aarch64"],
        *manifest(tag, tag),
    ]


HEAD = [
    ["login", "--username", "AWS", "--password-stdin", "public.ecr.aws/q9t5s3a7"],
    ["pull", f"{ECR}:{COMMIT}-x86_64"],
    ["pull", f"{ECR}:{COMMIT}-aarch64"],
]
NIGHTLY = [*HEAD, *primary("nightly"), *manifest(f"nightly-{COMMIT}", "nightly")]
RELEASE = [*HEAD, *primary("latest"), *primary("v1.4.2")]

# docker login must get the password on stdin, exactly; everything else just records.
DOCKER = """
if [ "$1" = login ]; then
  IFS= read -r pw
  [ "$pw" = "$EXPECTED_PASSWORD" ] || { echo "wrong password on stdin" >&2; exit 9; }
fi
if [ "$1 $2" = "manifest rm" ]; then echo "No such manifest" >&2; exit 1; fi
"""


def env_for(standins: StandIns, **extra: str) -> dict[str, str]:
    standins.add("aws", f'echo "{PASSWORD}"')
    base = {**os.environ, "BUILDKITE_COMMIT": COMMIT, "EXPECTED_PASSWORD": PASSWORD, **extra}
    return standins.env(base)


def assert_secret_kept(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text


def test_nightly_sequence(standins: StandIns) -> None:
    standins.add("docker", DOCKER)
    done = run_inproc("release.publish-images", "--mode", "nightly", env=env_for(standins))
    assert done.code == 0, done.stderr
    assert standins.argvs("aws") == [["ecr-public", "get-login-password", "--region", "us-east-1"]]
    assert standins.argvs("docker") == NIGHTLY
    assert [c["name"] for c in standins.calls()][:2] == ["aws", "docker"]
    assert done.stdout.splitlines() == [
        f"{HUB}:nightly-x86_64",
        f"{HUB}:nightly-aarch64",
        f"{HUB}:nightly",
        f"{HUB}:nightly-{COMMIT}",
    ]
    assert "Publishing nightly images to vllm/vllm-omni" in done.stderr
    assert f"  Extra manifests: nightly-{COMMIT}" in done.stderr
    assert "Successfully published nightly images" in done.stderr
    assert_secret_kept(done.stdout, done.stderr)


def test_release_is_the_default_mode_and_reads_the_version(standins: StandIns) -> None:
    standins.add("docker", DOCKER)
    standins.add("buildkite-agent", "echo v1.4.2")
    done = run_inproc("release.publish-images", env=env_for(standins))
    assert done.code == 0, done.stderr
    assert standins.argvs("buildkite-agent") == [
        ["meta-data", "get", "release-version", "--default", ""]
    ]
    assert standins.argvs("docker") == RELEASE
    assert f"{HUB}:v1.4.2" in done.stdout.splitlines()
    assert "  Primary tags: latest v1.4.2" in done.stderr
    assert_secret_kept(done.stdout, done.stderr)


def test_release_without_version_metadata_exits_1(standins: StandIns) -> None:
    standins.add("docker", DOCKER)
    standins.add("buildkite-agent", "echo")
    done = run_inproc("release.publish-images", "--mode", "release", env=env_for(standins))
    assert done.code == 1
    assert "ERROR: release-version metadata not set" in done.stderr
    assert standins.argvs("docker") == [] and standins.argvs("aws") == []


def test_bad_mode_exits_2_and_runs_nothing(standins: StandIns) -> None:
    standins.add("docker", DOCKER)
    done = run_inproc("release.publish-images", "--mode", "weekly", env=env_for(standins))
    assert done.code == 2
    assert done.stderr.startswith("error: --mode: unknown mode 'weekly': allowed values are")
    assert standins.calls() == []


def test_failed_push_stops_with_its_code(standins: StandIns) -> None:
    standins.add("docker", DOCKER + '[ "$1" = push ] && exit 5\nexit 0')
    done = run_inproc("release.publish-images", "--mode", "nightly", env=env_for(standins))
    assert done.code == 5
    assert standins.argvs("docker") == NIGHTLY[:6]  # stops at the first push
    assert done.stdout == ""


def test_a_failed_publish_never_prints_the_ecr_password(standins: StandIns, tmp_path: Path) -> None:
    """docker echoes the password it was given: masked, though no variable names it.

    The password is known only once `aws` printed it (no env var holds it here),
    so only `ci.redact.remember` can mask it: in docker's streamed output and
    in the error line of the failed push.
    """
    kept = tmp_path / "login-stdin"
    standins.add("aws", f"echo {PASSWORD}")
    standins.add(
        "docker",
        f"""
        if [ "$1" = login ]; then cat > {kept}; exit 0; fi
        if [ "$1" = push ]; then
          echo "denied: requested access to the resource is denied ($(cat {kept}))" >&2
          echo "token was $(cat {kept})"
          exit 1
        fi
        exit 0
        """,
    )
    base = {k: v for k, v in os.environ.items() if "PASSWORD" not in k.upper()}
    done = run_inproc(
        "release.publish-images", "--mode", "nightly",
        env=standins.env({**base, "BUILDKITE_COMMIT": COMMIT}),
    )  # fmt: skip
    assert done.code == 1
    assert kept.read_text().strip() == PASSWORD  # docker got it, on stdin
    assert standins.argvs("docker")[-1] == ["push", f"{HUB}:nightly-x86_64"]
    assert_secret_kept(done.stdout, done.stderr)
    assert "token was [REDACTED]" in done.stderr.splitlines()
    assert "requested access to the resource is denied ([REDACTED])" in done.stderr


def test_failed_ecr_login_stops_before_pulls(standins: StandIns) -> None:
    standins.add("docker", DOCKER)
    env = env_for(standins, EXPECTED_PASSWORD="something-else")
    done = run_inproc("release.publish-images", "--mode", "nightly", env=env)
    assert done.code == 9
    assert standins.argvs("docker") == HEAD[:1]
    assert_secret_kept(done.stdout, done.stderr)


@pytest.mark.parametrize(("mode", "expected"), [("nightly", NIGHTLY), ("release", RELEASE)])
def test_dry_run_prints_the_whole_sequence_and_runs_nothing(
    standins: StandIns, mode: str, expected: list[list[str]]
) -> None:
    standins.add("docker", DOCKER)
    args = ["--release-version", "v1.4.2"] if mode == "release" else []
    done = run_inproc(
        "release.publish-images", "--mode", mode, "--dry-run", *args, env=env_for(standins)
    )
    assert done.code == 0, done.stderr
    assert standins.calls() == []
    commands = [line.strip() for line in done.stdout.splitlines() if line.startswith("   ")]
    assert commands[0] == "aws ecr-public get-login-password --region us-east-1"
    assert commands[1:] == [
        " ".join(["docker", *argv])
        + ("  # stdin: a secret, not shown" if argv[0] == "login" else "")
        for argv in expected
    ]


def test_release_dry_run_without_version_runs_nothing(standins: StandIns) -> None:
    standins.add("buildkite-agent", "echo v9")
    done = run_inproc("release.publish-images", "--dry-run", env=env_for(standins))
    assert done.code == 0, done.stderr
    assert standins.calls() == []
    assert "# primary tags: latest v<release-version>" in done.stdout


def test_publication_tags() -> None:
    nightly = publish.publication("nightly", "abc", "")
    assert nightly.primary_tags == ("nightly",) and nightly.extra_tags == ("nightly-abc",)
    release = publish.publication("release", "abc", "2.0.0")
    assert release.primary_tags == ("latest", "v2.0.0") and release.extra_tags == ()
    with pytest.raises(UserError) as err:
        publish.publication("release", "abc", "1 0")
    assert err.value.code == 2


def test_steps_mark_only_manifest_rm_as_tolerated() -> None:
    steps = publish.plan(publish.publication("nightly", "abc", "")).commands
    tolerated = [s.argv for s in steps if s.tolerate is not None]
    assert tolerated == [
        ("docker", "manifest", "rm", "vllm/vllm-omni:nightly"),
        ("docker", "manifest", "rm", "vllm/vllm-omni:nightly-abc"),
    ]
    login = publish.sequence(publish.publication("nightly", "abc", ""))[0]
    assert isinstance(login, SecretPipe)  # the password: captured, then docker login's stdin
    assert [c.argv[0] for c in login.commands] == ["aws", "docker"]
    assert steps[:2] == login.commands and steps[1].stdin_secret


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--commit", "a b"),
            "error: --commit: 'a b' cannot be part of an image tag (allowed: letters, digits,"
            " '_', '.', '-'; at most 128 with its prefix)",
        ),
        (
            ("--mode", "release", "--release-version", "1.0 beta"),
            "error: release-version: '1.0 beta' cannot be part of an image tag (allowed: letters,"
            " digits, '_', '.', '-'; at most 128 with its prefix)",
        ),
    ],
)
def test_values_that_cannot_be_tags_exit_2_and_run_nothing(
    standins: StandIns, args: tuple[str, ...], message: str
) -> None:
    standins.add("docker", DOCKER)
    mode = () if "--mode" in args else ("--mode", "nightly")
    done = run_inproc("release.publish-images", *mode, *args, env=env_for(standins))
    assert (done.code, done.stdout, done.stderr) == (2, "", message + "\n")
    assert standins.calls() == []


def test_missing_commit_is_an_input_error(standins: StandIns, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BUILDKITE_COMMIT"}
    done = run_inproc("release.publish-images", "--mode", "nightly", env=standins.env(env))
    assert done.code == 2
    assert "BUILDKITE_COMMIT is not set" in done.stderr


SHIMS = Path(__file__).resolve().parents[1] / "scripts" / "release"


def shim_env(standins: StandIns) -> dict[str, str]:
    env = env_for(standins)  # stand-ins first: the CLI's directory may hold a real aws
    head, _, rest = env["PATH"].partition(os.pathsep)
    env["PATH"] = os.pathsep.join([head, str(Path(cli_path()).parent), rest])
    return env


@pytest.mark.process
@pytest.mark.parametrize(("args", "expected"), [(["nightly"], NIGHTLY), ([], RELEASE)])
def test_publish_shim_keeps_the_old_argument(
    standins: StandIns, args: list[str], expected: list[list[str]]
) -> None:
    standins.add("docker", DOCKER)
    standins.add("buildkite-agent", "echo 1.4.2")
    done = subprocess.run(
        ["bash", str(SHIMS / "publish-release-images.sh"), *args],
        env=shim_env(standins), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert standins.argvs("docker") == expected


@pytest.mark.process
def test_publish_shim_passes_dry_run_through(standins: StandIns) -> None:
    standins.add("docker", DOCKER)
    standins.add("buildkite-agent", "echo 1.4.2")
    done = subprocess.run(
        ["bash", str(SHIMS / "publish-release-images.sh"), "nightly", "--dry-run"],
        env=shim_env(standins), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "docker manifest push" in done.stdout
    assert standins.argvs("docker") == []


@pytest.mark.process
def test_publish_shim_bad_mode_exits_2(standins: StandIns) -> None:
    done = subprocess.run(
        ["bash", str(SHIMS / "publish-release-images.sh"), "weekly"],
        env=shim_env(standins), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert standins.calls() == []


@pytest.mark.process
def test_cleanup_shim_runs_the_task(standins: StandIns) -> None:
    env = {**shim_env(standins), "DOCKERHUB_TOKEN": ""}
    done = subprocess.run(
        ["bash", str(SHIMS / "cleanup-nightly-builds.sh")],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Error: DOCKERHUB_TOKEN environment variable is not set" in done.stderr
