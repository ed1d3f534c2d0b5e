"""Where a tier run writes, and what becomes of it when it cannot write (no Docker).

- every run has a folder of its own (`build/tiers/<tier>-<platform>/<run>/`)
  and `latest` points at the newest; `--results DIR` writes into DIR itself;
- a full results disk (a 64 KiB tmpfs) never turns a passing step into a
  failure: the step's own exit status decides, the lost log is a warning;
- a read-only checkout is one `error:` line naming the folder (exit 2);
- an engine that cannot be reached is said as such (exit 1), not as a
  missing image;
- the logs and the JUnit hold no secret of the job's or of our environment.

The mounts need root (the tests run as root, as CI does); elsewhere they skip,
and under CI=true a mount that fails is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SAMPLE
from tests.inproc import run_task
from tests.tiers_fixture import fixture_repo

MARKED_TIER = """\
steps:
  - label: "Marked"
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands:
      - "echo run-mark=$$RUN_MARK"
      - "pytest -q tests/diffusion -m 'core_model and cpu'"
"""

LOUD_TIER = """\
steps:
  - label: "Loud but passing"
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands:
      - "seq -f 'line-%g-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' 2000"
      - "pytest -q tests/diffusion -m 'core_model and cpu'"
  - label: "Runs after it"
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands:
      - "pytest -q tests/diffusion -m 'core_model and cpu'"
"""

SECRET_TIER = """\
steps:
  - label: "Prints secrets"
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    env:
      MY_API_TOKEN: "step-secret-value-42"
    commands:
      - "echo step=$$MY_API_TOKEN outer=$$OUTER_PASSWORD"
      - >-
        pytest -q tests/e2e -m 'advanced_model and cpu' --run-level advanced_model
        --junit-prefix=prefix-$$MY_API_TOKEN
"""


def target(tmp_path: Path, tier: str) -> Path:
    repo = fixture_repo(tmp_path / "target")
    (repo / ".buildkite/amd/test-amd-ready.yml").write_text(tier)
    return repo


def tier_env(tmp_path: Path, **values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE") and k != "CI"}
    env.update({"BUILDKITE_COMMIT": "fixture", "HF_HOME": str(tmp_path / "hf"), **values})
    return env


def native_tier(
    repo: Path, env: dict[str, str], cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return run_task(
        "tier", "ready", "--platform", "rocm", "--repo", str(repo), "--native", *args,
        env=env, cwd=cwd,
    )  # fmt: skip


def mount(*args: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    done = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=60)
    if done.returncode:
        message = f"cannot mount here: {done.stderr.strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs: a job that prints more than that fills it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk))
    yield disk
    subprocess.run(["umount", str(disk)], capture_output=True, timeout=60)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A read-only folder (a tmpfs remounted ro: root ignores file modes)."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder))
    try:
        mount("-o", "remount,ro", str(folder))
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, timeout=60)


# --------------------------------------------------------------------------- 24a


def test_each_run_has_its_own_folder_and_latest_is_the_newest(tmp_path: Path) -> None:
    repo = target(tmp_path, MARKED_TIER)
    runs = []
    for mark in ("first-run", "second-run"):
        done = native_tier(repo, tier_env(tmp_path, RUN_MARK=mark), tmp_path)
        assert done.returncode == 0, done.stderr
        (said,) = re.findall(r"^results: (build/tiers/ready-rocm/\S+)$", done.stderr, re.M)
        runs.append(tmp_path / said)
        assert f"JUnit: {said}/junit-ready.xml" in done.stderr
    first, second = runs
    assert first != second and first.parent == second.parent
    for run, mark in zip(runs, ("first-run", "second-run"), strict=True):
        assert f"run-mark={mark}" in (run / "rocm" / "01-marked.log").read_text()
        (suite,) = ET.parse(run / "junit-ready.xml").getroot().iter("testsuite")
        assert suite.get("name") == "ready tier (rocm): Marked" and suite.get("tests") == "2"
    latest = first.parent / "latest"
    assert latest.is_symlink() and os.readlink(latest) == second.name
    assert sorted(p.name for p in first.parent.iterdir()) == sorted(
        [first.name, second.name, "latest"]
    )


def test_results_dir_is_written_as_given(tmp_path: Path) -> None:
    repo = target(tmp_path, MARKED_TIER)
    given = tmp_path / "given"
    done = native_tier(repo, tier_env(tmp_path, RUN_MARK="x"), tmp_path, "--results", str(given))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in given.iterdir()) == ["junit-ready.xml", "rocm"]
    assert (given / "rocm" / "01-marked.log").is_file()
    assert not (tmp_path / "build").exists()


# --------------------------------------------------------------------------- 26c


def test_a_full_results_disk_does_not_fail_a_passing_step(tmp_path: Path, tiny_disk: Path) -> None:
    repo = target(tmp_path, LOUD_TIER)
    # One job at a time: the output streams to the CI log as it comes.
    done = native_tier(repo, tier_env(tmp_path), tmp_path, "--results", str(tiny_disk), "-j", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = [line for line in done.stderr.splitlines() if "  [rocm] " in line]
    assert summary[0].startswith("passed (log incomplete)") and "Loud but passing" in summary[0]
    assert summary[1].startswith("passed") and "Runs after it" in summary[1]
    log = tiny_disk / "rocm" / "01-loud-but-passing.log"
    assert (
        f"warning: Loud but passing: log not written in full: could not write {log}: "
        "No space left on device"
    ) in done.stderr
    assert "1 passed" not in log.read_text()  # the disk filled up before the end
    assert "line-2000-" in done.stderr  # the stream (CI log) still has all of it
    assert f"warning: JUnit not written: {tiny_disk / 'junit-ready.xml'}" in done.stderr
    assert "Traceback" not in done.stderr


# --------------------------------------------------------------------------- 28b


def test_a_read_only_checkout_is_one_error_line(tmp_path: Path, read_only: Path) -> None:
    repo = target(tmp_path, MARKED_TIER)
    env = tier_env(tmp_path, RUN_MARK="x")
    done = native_tier(repo, env, read_only)
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(
        rf"error: cannot write the tier's results to {re.escape(str(read_only))}"
        r"/build/tiers/ready-rocm/\d{8}T\d{6}-\d+: Read-only file system; "
        r"give --results DIR on a writable disk\n",
        done.stderr,
    ), done.stderr
    elsewhere = native_tier(repo, env, read_only, "--results", str(tmp_path / "results"))
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert (tmp_path / "results" / "junit-ready.xml").is_file()


# --------------------------------------------------------------------------- 29b


@pytest.mark.parametrize("platform", [("--platform", "rocm"), ()], ids=["rocm", "any"])
def test_an_engine_that_cannot_be_reached_is_not_a_missing_image(
    tmp_path: Path, platform: tuple[str, ...]
) -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client on PATH")
    env = tier_env(tmp_path, DOCKER_HOST="unix:///nonexistent.sock", VLLM_OMNI_CI_DOCKER=docker)
    done = run_task("tier", "ready", *platform, "--repo", str(SAMPLE), env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "error: the Docker engine at DOCKER_HOST=unix:///nonexistent.sock cannot be reached ("
    )
    assert "/nonexistent.sock" in line.split("(", 1)[1]  # docker's own words
    assert line.endswith("start it (`vllm-omni-ci sandbox up`, or start Docker), or use --native")
    assert "not present locally" not in done.stderr


# --------------------------------------------------------------------------- 17


def test_logs_and_junit_hold_no_secret(tmp_path: Path) -> None:
    repo = target(tmp_path, SECRET_TIER)
    results = tmp_path / "results"
    env = tier_env(tmp_path, OUTER_PASSWORD="outer-secret-value-99")
    done = native_tier(repo, env, tmp_path, "--results", str(results))
    assert done.returncode == 1, done.stderr
    log = (results / "rocm" / "01-prints-secrets.log").read_text()
    junit = (results / "junit-ready.xml").read_text()
    assert "step=[REDACTED] outer=[REDACTED]" in log
    (case,) = ET.parse(results / "junit-ready.xml").getroot().iter("testcase")  # pytest's
    assert case.get("classname", "").startswith("prefix-[REDACTED].tests.e2e.")
    for secret in ("step-secret-value-42", "outer-secret-value-99"):
        assert secret not in log and secret not in junit
