"""`nox -s ready` in real containers: the sample's ROCm image, built by build-image.

The image is built once per module with `build-image --platform rocm --builder
engine --no-push` under a test-only registry name and commit, and removed at
the end; every container carries the test label (`--label`) and the tier
label, and none may be left behind.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.conftest import REGISTRY, ROOT, SAMPLE, TEST_LABEL, run_cli, sample_with_wheelhouse
from tests.tiers_fixture import fixture_repo

if TYPE_CHECKING:
    from ci.tiers.plan import Job, Options

pytestmark = pytest.mark.docker

IMAGE_REGISTRY = f"{REGISTRY}/omni-ci-tiers-test/rocm"
COMMIT = f"tiers-{os.getpid()}"
IMAGE = f"{IMAGE_REGISTRY}:{COMMIT}"


def tier_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"BUILDKITE_COMMIT": COMMIT, "ROCM_CI_IMAGE_REGISTRY": IMAGE_REGISTRY})
    for name in ("BUILDKITE", "CI"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def sample_image(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[str]:
    """The sample's ROCm image, built from a copy with the session's wheelhouse."""
    from tests.conftest import engine_client

    docker = engine_client()
    if docker is None:
        pytest.skip("no Docker engine answers")
    sample = sample_with_wheelhouse(
        tmp_path_factory.mktemp("tiers-sample"), request.getfixturevalue("session_wheelhouse")
    )
    built = run_cli(
        "build-image",
        "--platform",
        "rocm",
        "--repo",
        str(sample),
        "--builder",
        "engine",
        "--no-push",
        env=tier_env(),
        timeout=900,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    yield IMAGE
    subprocess.run([docker, "rmi", "-f", IMAGE], capture_output=True)


def nox_tier(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["nox", "-s", "ready", "--", *args],
        cwd=cwd,
        env=tier_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )


def leftovers(docker: str) -> list[str]:
    return subprocess.run(
        [docker, "ps", "-aq", "--filter", "label=vllm-omni-ci.tier"],
        capture_output=True,
        text=True,
    ).stdout.split()


def test_ready_tier_of_the_sample_in_containers(
    sample_image: str, tmp_path: Path, docker_cli: str, docker_cleanup: None
) -> None:
    results = tmp_path / "results"
    done = nox_tier(
        "--platform",
        "rocm",
        "--repo",
        "examples/omni-sample",
        "--label",
        TEST_LABEL,
        "--results",
        str(results),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    summary = [line for line in done.stderr.splitlines() if "[rocm]" in line]
    by_step = {line.split("[rocm] ", 1)[1].split("  ")[0]: line for line in summary}
    for shard in ("1/2", "2/2"):
        assert by_step[f"Simple · Model Executor Test · Shard {shard}"].startswith("passed")
    for label in ("Simple · Omni Processor Test", "Simple · Diffusion Test", "Simple · Other Test"):
        assert by_step[label].startswith("passed"), by_step[label]
    assert by_step["Simple · Advanced CPU Test (quarantined)"].startswith("soft failure")
    assert "exit 1" in by_step["Simple · Advanced CPU Test (quarantined)"]
    assert by_step["Engine · Two-GPU Test"].startswith("needs mi300_2")
    assert f"container {sample_image}" in done.stderr

    # Both shards ran in the image, each with its own BUILDKITE_PARALLEL_JOB.
    for shard in (1, 2):
        log = (
            results / "rocm" / f"01-simple-model-executor-test-shard-shard{shard}.log"
        ).read_text()
        assert "--- Native in-pod ROCm CI" in log
        assert "no-GPU pre-flight" in log
        assert f"shard={shard - 1}/2" in log  # the sample's conftest header (pytest -sv)
        assert re.search(r"\b[34] passed, [45] deselected", log), log[-500:]

    root = ET.parse(results / "junit-ready.xml").getroot()
    suites = {s.get("name", "").removeprefix("ready tier (rocm)"): s for s in root}
    assert len(suites) == 7  # a suite per job that ran pytest, one for the GPU step
    (gpu,) = suites[""]
    assert gpu.get("name") == "Engine · Two-GPU Test" and gpu.find("skipped") is not None
    (soft,) = suites[": Simple · Advanced CPU Test (quarantined)"].iter("failure")
    assert soft.get("type") == "soft_fail" and "deliberate failure" in (soft.text or "")
    shard = suites[": Simple · Model Executor Test · Shard 2/2"]
    assert shard.get("failures") == "0" and float(shard.get("time") or 0) > 0
    cases = [c.get("classname") for s in suites.values() for c in s.iter("testcase")]
    assert cases.count("tests.model_executor.test_embedding") == 8  # each test once, by shard
    assert leftovers(docker_cli) == []


def test_failing_blocking_step_exits_non_zero(
    sample_image: str, tmp_path: Path, docker_cli: str, docker_cleanup: None
) -> None:
    repo = fixture_repo(tmp_path / "target")
    results = tmp_path / "results"
    done = nox_tier(
        "--platform",
        "rocm",
        "--repo",
        str(repo),
        "--image",
        sample_image,
        "--label",
        TEST_LABEL,
        "--results",
        str(results),
        "-j",
        "1",  # the failure ends before the next job would start
    )
    assert done.returncode == 1, done.stderr[-4000:]
    lines = done.stderr.splitlines()
    assert any(line.startswith("failed") and "Blocking failure" in line for line in lines)
    assert any(line.startswith("not run") and "After the failure" in line for line in lines)
    assert any(line.startswith("needs mi300_4") for line in lines)
    for shard in (0, 1):
        log = (results / "rocm" / f"01-env-shard-shard{shard + 1}.log").read_text()
        assert (
            f"tier-env job={shard} count=2 file=from-file step=from-step gpus=0 "
            f"pwd=/app/vllm-omni tmpdir=/tmp/vllm-omni-native-{shard}/tmp"
        ) in log
    junit = ET.parse(results / "junit-ready.xml").getroot()
    suite = next(s for s in junit if s.get("name") == "ready tier (rocm): Blocking failure")
    (failure,) = suite.iter("failure")  # the sample's deliberately failing test, from pytest
    assert "deliberate failure" in (failure.get("message") or "")
    # The same suite from inside a container: the JUnit folder is mounted at its own path.
    assert [c.get("classname") for c in suite] == ["tests.e2e.test_advanced"]
    assert leftovers(docker_cli) == []


def test_missing_image_fails_closed_with_a_build_hint(tmp_path: Path) -> None:
    env = tier_env()
    env["BUILDKITE_COMMIT"] = "no-such-commit"
    done = subprocess.run(
        ["nox", "-s", "ready", "--", "--platform", "rocm", "--repo", "examples/omni-sample"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # The tier's input error is the session's (`session.error`: nox says "aborted", exits 1).
    assert done.returncode == 1
    assert f"Session ready aborted: image {IMAGE_REGISTRY}:no-such-commit (rocm) is not" in (
        done.stderr
    )
    assert "vllm-omni-ci build-image --platform rocm" in done.stderr


def test_default_platforms_are_those_with_a_local_image(
    sample_image: str, tmp_path: Path, docker_cleanup: None
) -> None:
    done = nox_tier(
        "--repo",
        "examples/omni-sample",
        "--step",
        "Omni Processor",
        "--label",
        TEST_LABEL,
        "--results",
        str(tmp_path / "results"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ready tier (rocm) — " in done.stderr  # cuda/npu/xpu images are absent
    assert re.search(r"passed +\[rocm\] Simple · Omni Processor Test +exit 0", done.stderr)

    env = tier_env()
    env["BUILDKITE_COMMIT"] = "no-such-commit"
    none = subprocess.run(
        ["nox", "-s", "ready", "--", "--repo", "examples/omni-sample"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert none.returncode == 1  # the session's error: nox says "aborted", exits 1
    assert "aborted: no CI image for the ready tier is present locally" in none.stderr
    for platform in ("rocm", "cuda", "npu", "xpu"):
        assert (
            f"  {platform}: vllm-omni-ci build-image --platform {platform} --repo " in none.stderr
        )


def _container_ids(docker: str, label: str, *filters: str) -> list[str]:
    more = [arg for f in filters for arg in ("--filter", f)]
    return subprocess.run(
        [docker, "ps", "-aq", "--filter", f"label={label}", *more], capture_output=True, text=True
    ).stdout.split()


def sigterm_once_running(argv: list[str], docker: str, containers: int) -> None:
    """Start the nox tier `argv`, SIGTERM it once `containers` of its jobs' containers run
    (their commands are the `sleep 300` jobs), not before: it ends as an interrupted
    session, and no tier container is left."""
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=tier_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while len(_container_ids(docker, "vllm-omni-ci.tier=ready", "status=running")) < containers:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]  # nox ends an interrupted session so
    assert "Session ready interrupted" in err
    assert _container_ids(docker, "vllm-omni-ci.tier=ready") == []


def sleepers(options: Options, count: int, timeout: float) -> list[Job]:
    """`count` CPU-runnable ROCm jobs that sleep 300 s, timed out after `timeout` s."""
    import dataclasses

    from ci.platforms import Platform
    from ci.tiers.model import Tier, TierStep
    from ci.tiers.plan import plan_step

    jobs = []
    for position in range(1, count + 1):
        step = TierStep(
            file="", label=f"Sleeper {position}", platform=Platform.ROCM, tier=Tier.READY,
            commands=("sleep 300", "pytest -q tests -m 'core_model and cpu'"),
            hardware="mi300_1", runs_on_cpu=True,
            raw={"agent_pool": "mi300_1", "grade": "Blocking", "commands": ["sleep 300"]},
        )  # fmt: skip
        (job,) = plan_step(step, position, options)
        assert job.command is not None
        command = dataclasses.replace(job.command, timeout=timeout, grace=2)
        jobs.append(dataclasses.replace(job, command=command))
    return jobs


def test_timeout_ends_the_job_and_removes_its_container(
    sample_image: str, tmp_path: Path, docker_cli: str, docker_cleanup: None
) -> None:
    from ci.tiers.execute import JobOutcome, run_job
    from ci.tiers.plan import Options

    options = Options(
        repo=str(SAMPLE), commit=COMMIT, results=str(tmp_path), docker=docker_cli,
        run_id="timeout", image=sample_image, label=(TEST_LABEL,), stream=False,
    )  # fmt: skip
    (job,) = sleepers(options, 1, timeout=5)
    result = run_job(job, options)
    assert result.timed_out and result.code in (124, 137)
    assert result.outcome is JobOutcome.FAILED
    assert _container_ids(docker_cli, "vllm-omni-ci.tier.run=timeout") == []


def test_sigterm_removes_the_running_container(
    sample_image: str, tmp_path: Path, docker_cli: str, docker_cleanup: None
) -> None:
    repo = fixture_repo(tmp_path / "target")
    path = repo / ".buildkite/amd/test-amd-ready.yml"
    path.write_text(
        path.read_text().replace(
            "- \"pytest -q tests/e2e -m 'advanced_model and cpu' --run-level advanced_model\"",
            "- \"sleep 300; pytest -q tests/e2e -m 'advanced_model and cpu'\"",
        )
    )
    assert "sleep 300" in path.read_text()
    argv = ["nox", "-s", "ready", "--", "--platform", "rocm", "--repo", str(repo)]
    argv += ["--image", sample_image, "--label", TEST_LABEL, "--step", "Blocking failure"]
    argv += ["--results", str(tmp_path / "results")]
    sigterm_once_running(argv, docker_cli, 1)


def test_cuda_ready_tier_runs_fail_fast_in_a_container(
    sample_image: str, tmp_path: Path, docker_cli: str, docker_cleanup: None
) -> None:
    """cuda: Buildkite's `bash -e` job shell in the checkout, the preset prologue first;
    --cpu-only: the GPU steps are `needs <preset>` whatever this host has."""
    results = tmp_path / "results"
    done = nox_tier(
        "--cpu-only",
        "--platform",
        "cuda",
        "--repo",
        "examples/omni-sample",
        "--image",
        sample_image,
        "--label",
        TEST_LABEL,
        "--results",
        str(results),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "[cuda]" in line]
    assert [line.split("  ")[0].strip() for line in lines] == [
        "passed",
        "passed",
        "passed",
        "needs l4_1",
        "needs h100_1",
    ]
    log = (results / "cuda" / "01-simple-model-executor-test.log").read_text()
    assert log.startswith('--- CUDA tests\nCommands:if [ -n "${VLLM_CI_HF_TOKEN:-}" ]')
    assert "rootdir: /workspace" in log
    assert leftovers(docker_cli) == []


def test_parallel_jobs_timed_out_or_signalled_leave_no_container(
    sample_image: str, tmp_path: Path, docker_cli: str, docker_cleanup: None
) -> None:
    """-j 2: two containers time out side by side, and both are removed; a SIGTERM while
    two run ends both and removes both (nox: exit 130)."""
    from ci.tiers.execute import JobOutcome, run_jobs
    from ci.tiers.plan import Options

    options = Options(
        repo=str(SAMPLE), commit=COMMIT, results=str(tmp_path), docker=docker_cli,
        run_id="timeouts", image=sample_image, label=(TEST_LABEL,), jobs=2, stream=False,
    )  # fmt: skip
    jobs = sleepers(options, 2, timeout=8)
    results = run_jobs(jobs, options)
    assert [(r.outcome, r.timed_out) for r in results] == [(JobOutcome.FAILED, True)] * 2
    assert _container_ids(docker_cli, "vllm-omni-ci.tier.run=timeouts") == []

    repo = fixture_repo(tmp_path / "target")
    path = repo / ".buildkite/amd/test-amd-ready.yml"
    path.write_text(path.read_text().replace('- "pytest -q', '- "sleep 300; pytest -q'))
    argv = ["nox", "-s", "ready", "--", "--platform", "rocm", "--repo", str(repo), "-j", "2"]
    argv += ["--image", sample_image, "--label", TEST_LABEL]
    argv += ["--results", str(tmp_path / "results")]
    sigterm_once_running(argv, docker_cli, 2)
