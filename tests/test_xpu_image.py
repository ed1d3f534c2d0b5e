"""`build-image --platform xpu`: spec image-builds.md §3 (base tiers, export args, CI image).

Planners are checked as data. The tiers run for real: the local registry
stands in for the upstream repository, a recording wrapper in front of the real
docker client records every argv, and a `git` stand-in provides the vLLM
"clone" (a tiny tree whose vllm-openai target is built for real).
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import textwrap
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ci.images import xpu
from tests.conftest import (
    BASE_IMAGE,
    REGISTRY,
    SAMPLE,
    TEST_LABEL,
    StandIns,
    run_cli,
    sample_with_wheelhouse,
)

UPSTREAM_REPO = f"{REGISTRY}/omni-ci-test/vllm-openai-xpu"
BASE_LABEL = "vllm-omni-ci.xpu-base"

# --------------------------------------------------------------------------- planners


def make(**kw: str) -> xpu.XpuBuild:
    fields = {"repo": "/repo", "commit": "c0ffee", "vllm_version": "v0.29.0", **kw}
    return xpu.XpuBuild(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("compression", "export", "expected"),
    [
        (
            "zstd",
            True,
            (
                "--output",
                "type=image,name=img:1,compression=zstd,compression-level=3,force-compression=true",
            ),
        ),
        (
            "gzip",
            True,
            (
                "--output",
                "type=image,name=img:1,compression=gzip,compression-level=3,force-compression=true",
            ),
        ),
        ("uncompressed", True, ("--output", "type=image,name=img:1,compression=uncompressed")),
        ("zstd", False, ("-t", "img:1")),
    ],
)
def test_output_args(compression: str, export: bool, expected: tuple[str, ...]) -> None:
    assert make(compression=compression).output_args("img:1", export) == expected


def test_names_follow_the_script() -> None:
    build = make()
    assert build.upstream == "vllm/vllm-openai-xpu:v0.29.0"
    assert build.fallback_base == "xpu/vllm-omni-ci-base:v0.29.0"
    assert make(vllm_base="my/base:1").fallback_base == "my/base:1"
    assert build.image == "xpu/vllm-omni-ci:c0ffee"
    assert build.base_for(xpu.BaseTier.PULLED) == build.upstream
    assert build.base_for(xpu.BaseTier.LOCAL_UPSTREAM) == build.upstream
    assert build.base_for(xpu.BaseTier.LOCAL_BASE) == build.fallback_base
    assert build.base_for(xpu.BaseTier.SOURCE) == build.fallback_base


def test_image_and_source_build_argv() -> None:
    build = make()
    image = build.image_build("b:1", export=False)
    assert image.argv == (
        *("docker", "build", "-t", "xpu/vllm-omni-ci:c0ffee"),
        *("--build-arg", "VLLM_BASE=b:1", "--build-arg", "VLLM_VERSION=v0.29.0"),
        *("-f", "docker/Dockerfile.xpu", "."),
    )
    assert image.cwd == "/repo"
    assert image.env == {"DOCKER_BUILDKIT": "1"}
    source = build.source_build("/t/src", export=True)
    assert source.argv == (
        "docker",
        "build",
        "--output",
        "type=image,name=xpu/vllm-omni-ci-base:v0.29.0,compression=zstd,"
        "compression-level=3,force-compression=true",
        *("--target", "vllm-openai", "-f", "/t/src/docker/Dockerfile.xpu", "/t/src"),
    )
    clone = build.clone("/t/src")
    assert clone.argv == (
        *("git", "clone", "--depth", "1", "--branch", "v0.29.0", "--"),
        *("https://github.com/vllm-project/vllm", "/t/src"),
    )


def test_fallback_plan_lists_every_tier_in_order() -> None:
    text = make().fallback_plan("no engine answers (x)").render()
    positions = [text.index(f"# tier {n}:") for n in (1, 2, 3, 4)]
    assert positions == sorted(positions)
    lines = [line.strip() for line in text.splitlines() if not line.startswith(("#", "1", "2"))]
    assert lines[0] == "docker pull vllm/vllm-openai-xpu:v0.29.0"
    assert lines[1].startswith("git clone --depth 1 --branch v0.29.0")


@pytest.mark.parametrize("tier", list(xpu.BaseTier))
def test_tier_plan_runs_only_what_the_tier_needs(tier: xpu.BaseTier) -> None:
    plan = make().tier_plan(tier, "because", export=False)
    programs = [c.argv[:2] for c in plan.commands]
    expected = {
        xpu.BaseTier.PULLED: [("docker", "pull"), ("docker", "build")],
        xpu.BaseTier.LOCAL_UPSTREAM: [("docker", "build")],
        xpu.BaseTier.LOCAL_BASE: [("docker", "build")],
        xpu.BaseTier.SOURCE: [("git", "clone"), ("docker", "build"), ("docker", "build")],
    }[tier]
    assert programs == expected
    assert f"VLLM_BASE={make().base_for(tier)}" in plan.commands[-1].argv
    assert dict(plan.facts)["tier"].startswith(f"{int(tier)}: ")


# --------------------------------------------------------------------------- input errors


def fixture_repo(root: Path) -> Path:
    """A checkout with a tiny XPU Dockerfile (for the cases that build nothing for real)."""
    repo = root / "omni"
    (repo / "docker").mkdir(parents=True)
    (repo / "docker" / "Dockerfile.xpu").write_text(
        textwrap.dedent(
            """\
            ARG VLLM_BASE_IMAGE=vllm/vllm-openai-xpu
            ARG VLLM_VERSION=v0.0.0
            ARG VLLM_BASE=${VLLM_BASE_IMAGE}:${VLLM_VERSION}
            FROM ${VLLM_BASE} AS vllm-omni
            ARG VLLM_VERSION
            WORKDIR /workspace/vllm-omni
            COPY . .
            RUN echo "${VLLM_VERSION}" > /workspace/vllm-version
            """
        )
    )
    return repo


@pytest.fixture(scope="module")
def sample_repo(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """The sample (its real docker/Dockerfile.xpu) with the session's wheelhouse, in a tmp dir.

    Falls back to the tiny fixture while the sample has no Dockerfile.xpu.
    """
    root = tmp_path_factory.mktemp("xpu-sample")
    if not (SAMPLE / "docker" / "Dockerfile.xpu").is_file():
        return fixture_repo(root)
    return sample_with_wheelhouse(root, request.getfixturevalue("session_wheelhouse"))


def clean_env(base: dict[str, str]) -> dict[str, str]:
    drop = ("VLLM_VERSION", "VLLM_BASE", "EXPORT_COMPRESSION", "BUILDKITE", "BUILDKITE_COMMIT")
    return {k: v for k, v in base.items() if k not in drop}


@pytest.mark.parametrize(
    ("args", "extra_env", "message"),
    [
        ((), {}, "error: VLLM_VERSION must be set"),
        (("--vllm-version", "v1"), {"BUILDKITE": "true"}, "error: BUILDKITE_COMMIT must be set"),
        (
            ("--vllm-version", "v1", "--commit", "c", "--upstream-repo", "Bad Repo"),
            {},
            "error: --upstream-repo: 'Bad Repo' is not a valid image repository",
        ),
        (
            ("--vllm-version", "v 1", "--commit", "c"),
            {},
            "error: VLLM_VERSION: 'v 1' is not a valid image tag",
        ),
        (
            ("--vllm-version", "v1", "--commit", "c"),
            {"VLLM_BASE": "Bad Ref!"},
            "error: VLLM_BASE: 'Bad Ref!' is not a valid image reference",
        ),
        (
            ("--vllm-version", "v1", "--commit", "c", "--dry-run"),
            {"EXPORT_COMPRESSION": "rar"},
            "error: EXPORT_COMPRESSION: 'rar': allowed values are zstd, gzip, estargz, "
            "uncompressed",
        ),
    ],
)
def test_input_errors_exit_2_before_anything_runs(
    args: tuple[str, ...],
    extra_env: dict[str, str],
    message: str,
    tmp_path: Path,
    standins: StandIns,
) -> None:
    standins.add("docker")
    repo = fixture_repo(tmp_path)
    env = {**clean_env(standins.env()), **extra_env}
    done = run_cli("build-image", "--platform", "xpu", "--repo", str(repo), *args, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(message), done.stderr
    assert standins.calls() == []


def test_missing_dockerfile_is_an_input_error(tmp_path: Path, standins: StandIns) -> None:
    standins.add("docker")
    done = run_cli(
        "build-image", "--platform", "intel", "--repo", str(tmp_path), "--commit", "c",
        "--vllm-version", "v1", env=clean_env(standins.env()),
    )  # fmt: skip
    assert done.returncode == 2
    assert "docker/Dockerfile.xpu does not exist" in done.stderr, done.stderr
    assert standins.calls() == []


# --------------------------------------------------------------------------- export args (stand-in)

# A docker that says yes to everything doctor asks, including --output type=image.
EXPORTING_DOCKER = """\
case "$1" in
  version) echo 27.0.0 ;;
  info) echo '{"ServerVersion": "27.0.0", "Driver": "overlayfs"}' ;;
  buildx) exit 1 ;;
  build) [ "$2" = "--help" ] || cat >/dev/null ;;
esac
exit 0
"""


@pytest.mark.parametrize(
    ("compression", "output"),
    [
        ("", "compression=zstd,compression-level=3,force-compression=true"),
        ("uncompressed", "compression=uncompressed"),
    ],
)
def test_export_args_when_the_engine_can_export(
    compression: str, output: str, tmp_path: Path, standins: StandIns
) -> None:
    docker = standins.add("docker", EXPORTING_DOCKER)
    repo = fixture_repo(tmp_path)
    env = clean_env(standins.env())
    env["EXPORT_COMPRESSION"] = compression
    done = run_cli(
        "build-image", "--platform", "xpu", "--repo", str(repo), "--commit", "abc",
        "--vllm-version", "v0.29.0", "--docker", str(docker), env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "xpu/vllm-omni-ci:abc\n"
    calls = [a for a in standins.argvs("docker") if a[0] in ("pull", "build") and a[1] != "--help"]
    calls = [a for a in calls if "--label" not in a]  # doctor's own export probe
    assert calls == [
        ["pull", "vllm/vllm-openai-xpu:v0.29.0"],
        [
            "build",
            "--output",
            f"type=image,name=xpu/vllm-omni-ci:abc,{output}",
            *("--build-arg", "VLLM_BASE=vllm/vllm-openai-xpu:v0.29.0"),
            *("--build-arg", "VLLM_VERSION=v0.29.0", "-f", "docker/Dockerfile.xpu", "."),
        ],
    ]
    assert "tier 1 (pulled the upstream image)" in done.stderr, done.stderr


def test_a_named_client_without_buildkit_is_an_error_not_swapped(
    tmp_path: Path, standins: StandIns
) -> None:
    """`--docker` names the client; one that cannot BuildKit stops the build (exit 2)."""
    docker = standins.add(
        "docker",
        """\
        case "$1" in
          version) echo 20.10.0 ;;
          build) [ "$2" = "--help" ] && exit 1 ;;
          buildx) exit 1 ;;
        esac
        exit 0
        """,
    )
    repo = fixture_repo(tmp_path)
    env = {**clean_env(standins.env()), "DOCKER_HOST": f"unix://{tmp_path}/no.sock"}
    done = run_cli(
        "build-image", "--platform", "xpu", "--repo", str(repo), "--commit", "c",
        "--vllm-version", "v0.29.0", "--docker", str(docker), env=env,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(
        "error: no usable backend: no docker client with `DOCKER_BUILDKIT=1 docker build`"
    ), done.stderr
    assert [
        a for a in standins.argvs("docker") if a[0] in ("pull", "build") and a[1:] != ["--help"]
    ] == []


# --------------------------------------------------------------------------- real engine


@dataclass
class Names:
    token: str

    def upstream_version(self, case: str) -> str:
        return f"v-{self.token}-{case}"

    def upstream(self, case: str) -> str:
        return f"{UPSTREAM_REPO}:{self.upstream_version(case)}"

    def local_base(self, case: str) -> str:
        return f"omni-ci-test/xpu-base:{self.token}-{case}"

    def commit(self, case: str) -> str:
        return f"{self.token}-{case}"


def sh(docker: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [docker, *args], input=stdin, capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return done.stdout


def build_base(docker: str, tag: str, which: str) -> None:
    """A tiny base image: the offline base plus a label naming where it stands in for."""
    dockerfile = f"FROM {BASE_IMAGE}\nLABEL {TEST_LABEL} {BASE_LABEL}={which}\n"
    subprocess.run(
        [docker, "build", "-q", "-t", tag, "-"],
        input=dockerfile,
        text=True,
        check=True,
        capture_output=True,
        env={"DOCKER_BUILDKIT": "1", "PATH": "/usr/bin:/bin"},
    )


def image_label(docker: str, ref: str) -> str:
    out = sh(docker, "image", "inspect", "--format", "{{json .Config.Labels}}", ref)
    return str((json.loads(out) or {}).get(BASE_LABEL, ""))


def delete_from_registry(ref: str) -> None:
    repo, tag = ref[len(REGISTRY) + 1 :].rsplit(":", 1)
    accept = "application/vnd.docker.distribution.manifest.v2+json"
    head = urllib.request.Request(
        f"http://{REGISTRY}/v2/{repo}/manifests/{tag}", method="HEAD", headers={"Accept": accept}
    )
    try:
        with urllib.request.urlopen(head, timeout=10) as resp:
            digest = resp.headers["Docker-Content-Digest"]
        delete = urllib.request.Request(
            f"http://{REGISTRY}/v2/{repo}/manifests/{digest}", method="DELETE"
        )
        urllib.request.urlopen(delete, timeout=10).close()
    except OSError:
        pass


@pytest.fixture(scope="module")
def names() -> Iterator[Names]:
    """Unique names for this run, and removal of every tag and registry entry it made."""
    from tests.conftest import engine_client

    made = Names(secrets.token_hex(4))
    yield made
    docker = engine_client()
    if docker is None:
        return
    refs = sh(docker, "images", "--format", "{{.Repository}}:{{.Tag}}").split()
    mine = [r for r in refs if made.token in r]
    if mine:
        subprocess.run([docker, "rmi", "-f", *mine], capture_output=True, check=False)
    delete_from_registry(made.upstream("pulled"))


@pytest.fixture
def recording_docker(standins: StandIns, docker_cli: str) -> Path:
    """`docker` that records its argv, then runs the real BuildKit-capable client."""
    return standins.add("docker", f'exec {docker_cli} "$@"')


def git_standin(standins: StandIns, which: str = "source") -> None:
    """`git clone` writes a tiny vLLM tree (its Dockerfile.xpu has a vllm-openai target)."""
    dockerfile = (
        f"FROM {BASE_IMAGE} AS vllm-base\\n"
        f"FROM vllm-base AS vllm-openai\\n"
        f"LABEL {TEST_LABEL} {BASE_LABEL}={which}\\n"
    )
    standins.add(
        "git",
        f"""\
        if [ "$1" = clone ]; then
          dest="${{@: -1}}"
          mkdir -p "$dest/docker"
          printf '{dockerfile}' > "$dest/docker/Dockerfile.xpu"
          exit 0
        fi
        exec /usr/bin/git "$@"
        """,
    )


def run_build(
    repo: Path, names: Names, case: str, docker: Path, standins: StandIns, **env: str
) -> subprocess.CompletedProcess[str]:
    full = {**clean_env(standins.env()), **env}
    return run_cli(
        "build-image", "--platform", "xpu", "--repo", str(repo), "--commit", names.commit(case),
        "--vllm-version", names.upstream_version(case), "--upstream-repo", UPSTREAM_REPO,
        "--docker", str(docker), env=full, timeout=900,
    )  # fmt: skip


def docker_calls(standins: StandIns, verb: str) -> list[list[str]]:
    return [a for a in standins.argvs("docker") if a[:1] == [verb] and "--help" not in a]


@pytest.mark.docker
def test_tier1_upstream_in_the_registry_is_pulled(
    names: Names, recording_docker: Path, standins: StandIns, docker_cli: str, sample_repo: Path
) -> None:
    upstream = names.upstream("pulled")
    build_base(docker_cli, upstream, "upstream")
    sh(docker_cli, "push", upstream)
    sh(docker_cli, "rmi", upstream)  # so only a real pull can bring it back
    git_standin(standins)
    done = run_build(sample_repo, names, "pulled", recording_docker, standins)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"xpu/vllm-omni-ci:{names.commit('pulled')}\n"
    assert docker_calls(standins, "pull") == [["pull", upstream]]
    assert "tier 1 (pulled the upstream image)" in done.stderr, done.stderr
    assert image_label(docker_cli, done.stdout.strip()) == "upstream"
    if sample_repo.name == "omni-sample":  # the sample records the VLLM_VERSION build arg
        env = sh(
            docker_cli, "image", "inspect", "--format", "{{json .Config.Env}}", done.stdout.strip()
        )
        assert f"VLLM_OMNI_SAMPLE_VLLM_VERSION={names.upstream_version('pulled')}" in json.loads(
            env
        )
    assert all(a[0] != "clone" for a in standins.argvs("git"))


@pytest.mark.docker
def test_tier2_local_copy_when_the_pull_fails(
    names: Names, recording_docker: Path, standins: StandIns, docker_cli: str, sample_repo: Path
) -> None:
    upstream = names.upstream("local")  # tagged here, never pushed: the pull fails
    build_base(docker_cli, upstream, "upstream-local")
    git_standin(standins)
    done = run_build(sample_repo, names, "local", recording_docker, standins)
    assert done.returncode == 0, done.stderr
    assert docker_calls(standins, "pull") == [["pull", upstream]]
    assert f"WARNING: could not pull {upstream}; using local copy" in done.stderr, done.stderr
    assert "tier 2 (local copy of the upstream image)" in done.stderr
    assert "why: pull failed (docker pull exit 1" in done.stderr, done.stderr
    # The pull's own error, streamed to the log (the wording is the engine's).
    assert re.search(r"manifest unknown|not found", done.stderr), done.stderr
    assert image_label(docker_cli, done.stdout.strip()) == "upstream-local"
    build = docker_calls(standins, "build")[-1]
    assert f"VLLM_BASE={upstream}" in build


@pytest.mark.docker
def test_tier3_vllm_base_found_locally(
    names: Names, recording_docker: Path, standins: StandIns, docker_cli: str, sample_repo: Path
) -> None:
    base = names.local_base("base")
    build_base(docker_cli, base, "vllm-base")
    git_standin(standins)
    done = run_build(sample_repo, names, "base", recording_docker, standins, VLLM_BASE=base)
    assert done.returncode == 0, done.stderr
    upstream = names.upstream("base")
    assert f"WARNING: {upstream} unavailable remotely and locally" in done.stderr, done.stderr
    assert "tier 3 (VLLM_BASE found locally)" in done.stderr
    assert image_label(docker_cli, done.stdout.strip()) == "vllm-base"
    assert all(a[0] != "clone" for a in standins.argvs("git"))


@pytest.mark.docker
def test_tier4_source_build_when_nothing_exists(
    names: Names, recording_docker: Path, standins: StandIns, docker_cli: str, sample_repo: Path
) -> None:
    base = names.local_base("source")
    git_standin(standins, "source")
    done = run_build(sample_repo, names, "source", recording_docker, standins, VLLM_BASE=base)
    assert done.returncode == 0, done.stderr
    version = names.upstream_version("source")
    clones = [a for a in standins.argvs("git") if a[0] == "clone"]
    assert len(clones) == 1
    src = clones[0][-1]
    assert clones[0] == [
        *("clone", "--depth", "1", "--branch", version, "--"),
        *("https://github.com/vllm-project/vllm", src),
    ]
    assert not Path(src).exists(), "the temp clone is removed"
    builds = docker_calls(standins, "build")
    builds = [b for b in builds if "--label" not in b]  # doctor's probe
    # The sandbox's engine has the containerd image store, so it exports with the
    # script's own `--output type=image,...` (XpuBuild.output_args), not the plain `-t` fallback.
    image = f"xpu/vllm-omni-ci:{names.commit('source')}"
    assert builds[0] == [
        *("build", *make().output_args(base, True), "--target"),
        *("vllm-openai", "-f", f"{src}/docker/Dockerfile.xpu", src),
    ]
    assert builds[1] == [
        *("build", *make().output_args(image, True)),
        *("--build-arg", f"VLLM_BASE={base}", "--build-arg", f"VLLM_VERSION={version}"),
        *("-f", "docker/Dockerfile.xpu", "."),
    ]
    assert f"WARNING: building {base} from vLLM {version} source" in done.stderr, done.stderr
    assert "tier 4 (VLLM_BASE built from vLLM source)" in done.stderr
    assert image_label(docker_cli, done.stdout.strip()) == "source"


@pytest.mark.docker
def test_dry_run_with_an_engine_probes_read_only(
    names: Names, standins: StandIns, docker_cli: str, tmp_path: Path
) -> None:
    base = names.local_base("dry")
    build_base(docker_cli, base, "dry")
    docker = standins.add("docker", f'exec {docker_cli} "$@"')
    git_standin(standins)
    env = {**clean_env(standins.env()), "VLLM_BASE": base}
    done = run_cli(
        "build-image", "--platform", "xpu", "--repo", str(fixture_repo(tmp_path)),
        "--commit", "dry", "--vllm-version", names.upstream_version("dry"),
        "--upstream-repo", UPSTREAM_REPO, "--docker", str(docker), "--dry-run", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "# tier: 3: VLLM_BASE found locally" in done.stdout
    assert f"VLLM_BASE={base}" in done.stdout
    # The client a run would use, exporting as the script did (the engine can, here).
    assert f"{docker} build --output type=image,name=xpu/vllm-omni-ci:dry," in done.stdout
    assert "# export: --output type=image (the engine can export)" in done.stdout
    assert "docker pull" not in done.stdout
    # Lookups went through the SDK; the client was only asked about itself.
    assert {a[0] for a in standins.argvs("docker")} <= {"version", "build", "buildx"}
    assert all(a[0] != "build" or a[1:] == ["--help"] for a in standins.argvs("docker"))


def test_dry_run_without_an_engine_prints_the_fallbacks(tmp_path: Path, standins: StandIns) -> None:
    standins.add("docker", "exit 1")
    env = {**clean_env(standins.env()), "DOCKER_HOST": f"unix://{tmp_path}/no.sock"}
    done = run_cli(
        "build-image", "--platform", "xpu", "--repo", str(fixture_repo(tmp_path)),
        "--commit", "c", "--vllm-version", "v0.29.0", "--dry-run", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "ordered fallbacks" in done.stdout
    for n in (1, 2, 3, 4):
        assert f"# tier {n}:" in done.stdout
    assert standins.calls() == []


# --------------------------------------------------------------------------- engine errors


class BrokenEngine(BaseHTTPRequestHandler):
    """Answers version pings; every other request is a 500, as a sick daemon would."""

    def do_GET(self) -> None:
        if self.path.endswith(("/_ping", "/version")):
            body = json.dumps({"ApiVersion": "1.41", "Version": "20.10.0", "MinAPIVersion": "1.12"})
            self.reply(200, body)
        else:
            self.reply(500, json.dumps({"message": "engine exploded"}))

    do_POST = do_GET
    do_HEAD = do_GET

    def reply(self, code: int, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Api-Version", "1.41")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def broken_engine() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BrokenEngine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_engine_error_during_lookup_does_not_start_the_source_build(
    broken_engine: str, tmp_path: Path, standins: StandIns
) -> None:
    """The client's pull fails, then the SDK lookup gets a 500 from the (sick) engine."""
    git_standin(standins)
    docker = standins.add(
        "docker",
        """\
        case "$1" in
          version) echo 20.10.0 ;;
          info) echo "Error response from daemon: engine exploded" >&2; exit 1 ;;
          buildx) exit 1 ;;
          pull) echo "Error response from daemon: engine exploded" >&2; exit 1 ;;
        esac
        exit 0
        """,
    )
    env = {**clean_env(standins.env()), "DOCKER_HOST": broken_engine}
    done = run_cli(
        "build-image", "--platform", "xpu", "--repo", str(fixture_repo(tmp_path)),
        "--commit", "c", "--vllm-version", "v0.29.0", "--docker", str(docker),
        env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert (
        "error: docker engine query failed (look up vllm/vllm-openai-xpu:v0.29.0)" in done.stderr
    ), done.stderr
    assert "engine exploded" in done.stderr
    assert [a for a in standins.argvs("git") if a[0] == "clone"] == []
    assert "WARNING: building" not in done.stderr
    work = [
        a[0] for a in standins.argvs("docker") if a[0] in ("pull", "build") and a[1:] != ["--help"]
    ]
    assert work == ["pull"]
