"""`tier -j N`: jobs side by side, natively (no Docker; the container cases are in
tests/test_tiers_docker.py).

The jobs write what they do to an events file; a job that must overlap another
waits (a bounded while) for that one's start, so the order is read from the file,
never from the clock: `depends_on` is waited for (also for a step later in the
file), `-j` bounds how many run at once, a blocking failure starts no new job while
the running ones finish, a signal or a timeout leaves no process behind, the lines
without a terminal, the JUnit per test, and GPU jobs taking turns on free devices.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci.devices import VISIBLE_ENV, Device, Inventory, hidden
from ci.errors import UserError
from ci.platforms import Platform
from ci.tiers.execute import JobOutcome, on_free_devices, run_jobs
from ci.tiers.model import Tier, TierStep
from ci.tiers.plan import Job, Options, plan_step
from tests.conftest import SAMPLE, StandIns, cli_path
from tests.gitrepo import copy_tracked
from tests.test_runner_signals import end_marked, marked
from tests.test_tiers import run as run_tier
from tests.tiers_fixture import fixture_repo

PYTEST = "pytest -q tests/diffusion -m 'core_model and cpu'"  # makes a step CPU-runnable


def step(label: str, *commands: str, **more: Any) -> dict[str, Any]:
    return {
        "label": label,
        "agent_pool": "mi300_1",
        "mirror_hardwares": ["amdproduction"],
        "grade": "Blocking",
        **more,
        "commands": [*commands, PYTEST],
    }


def events_of(name: str, events: Path, partner: str = "", after: str = "") -> str:
    """Job shell text: `start NAME`, then (bounded) wait for PARTNER's start or for AFTER,
    then `end NAME`, each a line of `events`."""
    wait = ""
    if partner or after:
        word = f"start {partner}" if partner else after
        wait = f"for i in $$(seq 100); do grep -qx '{word}' {events} && break; sleep 0.1; done; "
    return f"echo 'start {name}' >> {events}; {wait}echo 'end {name}' >> {events}"


def repo_with(tmp_path: Path, *steps: dict[str, Any]) -> Path:
    repo = fixture_repo(tmp_path / "target")
    text = yaml.safe_dump({"steps": list(steps)}, sort_keys=False, allow_unicode=True)
    (repo / ".buildkite/amd/test-amd-ready.yml").write_text(text)
    return repo


def tier(repo: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE") and k != "CI"}
    env |= {"BUILDKITE_COMMIT": "fixture", "HF_HOME": str(tmp_path / "hf")}
    argv = [cli_path(), "tier", "ready", "--platform", "rocm", "--repo", str(repo), "--native"]
    argv += ["--results", str(tmp_path / "results"), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def summary(stderr: str) -> dict[str, str]:
    """{step: result} from the summary lines (`RESULT  [rocm] STEP  exit N ...`)."""
    return {
        line.split("  [rocm] ", 1)[1].split("  ")[0]: line.split("  [rocm] ")[0].strip()
        for line in stderr.splitlines()
        if "  [rocm] " in line
    }


def test_depends_on_is_waited_for_and_jobs_bounds_how_many_run(tmp_path: Path) -> None:
    events = tmp_path / "events"
    repo = repo_with(
        tmp_path,
        step("Waits for Second", events_of("waits", events), depends_on="second"),
        step("First", events_of("first", events, partner="second"), key="first"),
        step("Second", events_of("second", events, partner="first"), key="second"),
    )
    done = tier(repo, tmp_path, "-j", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    seen = events.read_text().splitlines()
    assert set(seen[:2]) == {"start first", "start second"}  # side by side
    assert seen.index("start waits") > seen.index("end second")  # a later step, waited for
    lines = done.stderr.splitlines()
    assert "[ready/rocm] First: running natively" in lines
    assert any(line.startswith("[ready/rocm] Waits for Second: passed in ") for line in lines)
    assert set(summary(done.stderr).values()) == {"passed"}

    events.unlink()
    done = tier(repo, tmp_path, "-j", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert events.read_text().splitlines() == [
        "start first", "end first", "start second", "end second", "start waits", "end waits",
    ]  # fmt: skip


def test_a_blocking_failure_starts_no_new_job_and_the_running_ones_finish(
    tmp_path: Path,
) -> None:
    events = tmp_path / "events"
    fail = "pytest -q tests/e2e -m 'advanced_model and cpu' --run-level advanced_model"
    repo = repo_with(
        tmp_path,
        step("Fails", fail, f"echo 'failed' >> {events}"),
        step("Long", f"{events_of('long', events, after='failed')}; sleep 2"),
        step("Third", events_of("third", events)),
    )
    done = tier(repo, tmp_path, "-j", "2")
    assert done.returncode == 1, done.stderr[-3000:]
    assert summary(done.stderr) == {
        "Fails": "failed",
        "Long": "passed",  # it ran when Fails failed: it finished
        "Third": "not run: Fails failed (use --keep-going to run the rest)",
    }
    assert "start third" not in events.read_text()
    lines = done.stderr.splitlines()
    assert any(line.startswith("[ready/rocm] Fails: failed (exit 1) in ") for line in lines)
    assert "[ready/rocm] Third: not run: Fails failed (use --keep-going to run the rest)" in lines
    head = f"== Fails: failed, the last 30 lines of {tmp_path}/results/rocm/01-fails.log"
    tail = lines.index(head)
    assert "FAILED tests/e2e/test_advanced.py" in "\n".join(lines[tail : tail + 31])

    done = tier(repo, tmp_path, "-j", "2", "--keep-going")
    assert summary(done.stderr)["Third"] == "passed"


def test_sigterm_ends_every_running_job_tree(tmp_path: Path) -> None:
    marker = f"{3000 + os.getpid() % 1000}"  # the sleeps' argument: found by it, and only them
    events = tmp_path / "events"
    sleeper = f"echo started >> {events}; sleep {marker}"
    repo = repo_with(tmp_path, step("One", sleeper), step("Two", sleeper))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE") and k != "CI"}
    env |= {"BUILDKITE_COMMIT": "fixture", "HF_HOME": str(tmp_path / "hf")}
    argv = [cli_path(), "tier", "ready", "--platform", "rocm", "--repo", str(repo), "--native"]
    argv += ["--results", str(tmp_path / "results"), "-j", "2"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(marked(f"sleep {marker}")) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
        assert marked(f"sleep {marker}") == []
    finally:
        proc.kill()
        end_marked(f"sleep {marker}")


def native_job(tmp_path: Path, label: str, *commands: str) -> Job:
    """One CPU-runnable job of `commands`, planned to run natively in the fixture repo."""
    if not (tmp_path / "target").exists():
        fixture_repo(tmp_path / "target")
    raw = {"agent_pool": "mi300_1", "grade": "Blocking", "commands": list(commands)}
    made = TierStep(
        file="", label=label, commands=commands, platform=Platform.ROCM, tier=Tier.READY,
        hardware="mi300_1", runs_on_cpu=True, raw=raw, yaml_escaped=False,
    )  # fmt: skip
    options = Options(native=True, repo=str(tmp_path / "target"), results=str(tmp_path / "r"))
    options = dataclasses.replace(options, commit="fixture", environ=dict(os.environ))
    (job,) = plan_step(made, 1, options)
    return job


def test_timed_out_parallel_jobs_leave_no_process(tmp_path: Path) -> None:
    marker = f"{4000 + os.getpid() % 1000}"
    jobs = []
    for n in (1, 2):
        job = native_job(tmp_path, f"Sleeper {n}", f"sleep {marker}", PYTEST)
        assert job.command is not None and job.log is not None
        command = dataclasses.replace(job.command, timeout=3, grace=2)
        log = job.log.with_name(f"sleeper-{n}.log")
        jobs.append(dataclasses.replace(job, command=command, log=log))
    try:
        results = run_jobs(jobs, Options(jobs=2, stream=False))
        assert [(r.outcome, r.timed_out) for r in results] == [(JobOutcome.FAILED, True)] * 2
        assert marked(f"sleep {marker}") == []
    finally:
        end_marked(f"sleep {marker}")


def test_junit_has_a_testcase_per_test_and_a_suite_per_job(tmp_path: Path) -> None:
    own = tmp_path / "own.xml"
    advanced = "pytest -q tests/e2e -m 'advanced_model and cpu' --run-level advanced_model"
    repo = repo_with(
        tmp_path,
        step("Two runs", "pytest -q tests/model_executor -m 'core_model and cpu'"),
        {**step("Own JUnit"), "commands": [f"{PYTEST} --junitxml={own}"]},
        {**step("Quarantined"), "grade": "NonBlocking", "commands": [advanced]},
    )
    done = tier(repo, tmp_path, "-j", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    root = ET.parse(tmp_path / "results" / "junit-ready.xml").getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == [
        "ready tier (rocm): Two runs",
        "ready tier (rocm): Quarantined",
        "ready tier (rocm)",
    ]
    two = suites["ready tier (rocm): Two runs"]
    classes = [c.get("classname") for c in two]
    assert len(classes) == 10 and two.get("tests") == "10"  # 8 of model_executor, 2 of diffusion
    assert classes[0] == "tests.model_executor.test_embedding"  # in the order they ran
    assert classes[-1] == "tests.diffusion.test_caption"
    (soft,) = suites["ready tier (rocm): Quarantined"]
    assert soft.get("name") == "test_advanced_cpu_caption_is_deliberately_wrong"
    assert soft.find("failure").get("type") == "soft_fail"  # type: ignore[union-attr]
    (plain,) = suites["ready tier (rocm)"]  # its pytest wrote its own file, not ours
    assert plain.get("name") == "Own JUnit" and plain.find("failure") is None
    assert own.is_file()


def gpu_step(label: str, platform: Platform, hardware: str, *commands: str) -> TierStep:
    return TierStep(
        file="", label=label, commands=commands, platform=platform, tier=Tier.READY,
        hardware=hardware, raw={"commands": list(commands)}, yaml_escaped=False,
    )  # fmt: skip


def test_gpu_jobs_take_turns_on_free_devices(tmp_path: Path) -> None:
    """Three one-card jobs on two devices: two at a time, never two on one device."""

    events = tmp_path / "events"
    fixture_repo(tmp_path / "target")
    host = Inventory(tuple(Device(Platform.CUDA, i, "NVIDIA H200") for i in (0, 1)))
    options = Options(
        native=True, repo=str(tmp_path / "target"), results=str(tmp_path / "r"), commit="x",
        environ=dict(os.environ), jobs=3, stream=False, inventory=host,
    )  # fmt: skip
    jobs = []
    for n in (1, 2, 3):  # each waits (bounded) until two have started
        text = (
            f"echo start $CUDA_VISIBLE_DEVICES >> {events}; "
            f"for i in $(seq 100); do [ $(grep -c start {events}) -ge 2 ] && break; sleep 0.1;"
            f" done; echo end $CUDA_VISIBLE_DEVICES >> {events}"
        )
        jobs += plan_step(gpu_step(f"Card {n}", Platform.CUDA, "h100_1", text), n, options)
    assert [job.devices for job in jobs] == [(0,)] * 3  # as planned, each on the first

    results = run_jobs(jobs, options)
    assert [r.outcome for r in results] == [JobOutcome.PASSED] * 3
    given = sorted(r.job.devices for r in results)
    assert given == [(0,), (0,), (1,)] or given == [(0,), (1,), (1,)]
    busy: set[str] = set()
    most = 0
    for line in events.read_text().splitlines():
        word, device = line.split()
        if word == "start":
            assert device not in busy, events.read_text()
            busy.add(device)
        else:
            busy.discard(device)
        most = max(most, len(busy))
    assert most == 2


def test_a_job_planned_again_on_free_devices_gets_theirs() -> None:
    """In a container their docker arguments (before the image), natively their visibility
    variable; none free that fit: it waits; a job without devices is as planned."""
    cases = (
        (Platform.CUDA, "h100_1", "NVIDIA H200", ("--gpus", '"device=1"')),
        (Platform.NPU, "a2b3_npu_1", "910B3", ("--device", "/dev/davinci1")),
    )
    for platform, hardware, name, args in cases:
        host = Inventory(tuple(Device(platform, i, name) for i in (0, 1)))
        options = Options(
            repo="/repo", results="/r", commit="c", image="img:1", run_id="x", inventory=host
        )
        (job,) = plan_step(gpu_step("GPU", platform, hardware, "true"), 1, options)
        moved = on_free_devices(job, options, {(platform, 0)})
        assert moved is not None and moved.command is not None and moved.devices == (1,)
        argv = list(moved.command.argv)
        at = argv.index(args[0])
        assert argv[at : at + 2] == list(args) and at < argv.index("img:1")
        assert "CUDA_VISIBLE_DEVICES" not in moved.command.env  # inside, the device is the first
        assert on_free_devices(job, options, {(platform, 0), (platform, 1)}) is None

    host = Inventory(tuple(Device(Platform.ROCM, i, "AMD Instinct MI300X") for i in (0, 1)))
    options = Options(native=True, repo="/repo", results="/r", commit="c", inventory=host)
    (job,) = plan_step(gpu_step("GPU", Platform.ROCM, "mi300_1", "true"), 1, options)
    moved = on_free_devices(job, options, {(Platform.ROCM, 0)})
    assert moved is not None and moved.command is not None
    assert moved.command.env["HIP_VISIBLE_DEVICES"] == moved.env["HIP_VISIBLE_DEVICES"] == "1"
    cpu = dataclasses.replace(job, devices=())
    assert on_free_devices(cpu, options, {(Platform.ROCM, 0), (Platform.ROCM, 1)}) is cpu


def test_a_forced_job_waits_for_every_device_it_was_planned_on() -> None:
    """Forced on fewer devices than it asks for, it takes them all, or waits: never fewer."""
    host = Inventory(tuple(Device(Platform.CUDA, i, "NVIDIA L4") for i in (0, 1)))
    options = Options(native=True, repo="/repo", results="/r", commit="c", inventory=host)
    step = gpu_step("Four", Platform.CUDA, "h100_4", "true")
    (unforced,) = plan_step(step, 1, options)
    assert not unforced.runs and unforced.reason == "needs h100_4: this host has 2 x NVIDIA L4"
    forced = dataclasses.replace(options, force=True)
    (job,) = plan_step(step, 1, forced)
    assert job.devices == (0, 1) and job.env["VLLM_CI_EXPECTED_GPU_COUNT"] == "4"
    assert job.where == "h100_4 on NVIDIA L4 (--force: 2 of 4)"
    assert on_free_devices(job, forced, {(Platform.CUDA, 1)}) is None
    moved = on_free_devices(job, forced, set())
    assert moved is not None and moved.env["CUDA_VISIBLE_DEVICES"] == "0,1"


# --------------------------------------------------------------------------- on a GPU host
# A stand-in nvidia-smi makes this host a GPU host; each step records its environment.

H100 = "NVIDIA H100 80GB HBM3"
CPU_PYTEST = "pytest -q tests/diffusion -m 'core_model and cpu'"


def record(name: str, out: Path, seconds: float = 0) -> str:
    """Job shell text: `start NAME` and `end NAME` lines in out/events, the env in NAME.env."""
    events = out / "events"
    return (
        f"echo 'start {name}' >> {events}; env -0 > {out / name}.env; sleep {seconds}; "
        f"echo 'end {name}' >> {events}"
    )


def recorded_env(out: Path, name: str) -> dict[str, str]:
    items = (out / f"{name}.env").read_text().split("\0")
    return dict(item.split("=", 1) for item in items if "=" in item)


def cuda_repo(tmp_path: Path, out: Path) -> Path:
    """The sample with a CUDA ready tier of a CPU step, an h100_1 and an h100_2 step."""
    repo = tmp_path / "sample"
    copy_tracked(SAMPLE, repo)
    steps = [
        {"label": "CPU", "mirror_hardwares": "l4_1", "commands": [record("cpu", out), CPU_PYTEST]},
        {"label": "One", "mirror_hardwares": "h100_1", "commands": [record("one", out, 1)]},
        {"label": "Two", "mirror_hardwares": "h100_2", "commands": [record("two", out, 1)]},
    ]
    text = yaml.safe_dump({"steps": steps}, sort_keys=False)
    (repo / ".buildkite" / "cuda" / "test-ready.yml").write_text(text)
    out.mkdir()
    return repo


def gpu_host(
    standins: StandIns, monkeypatch: pytest.MonkeyPatch, *names: str, visible: str | None = None
) -> None:
    """nvidia-smi lists `names`; the caller's CUDA_VISIBLE_DEVICES is `visible` (None: unset)."""
    rows = "".join(f"{i}, {name}, 81559\\n" for i, name in enumerate(names))
    standins.add("nvidia-smi", f"printf '{rows}'")
    monkeypatch.setenv("PATH", standins.env()["PATH"])
    monkeypatch.setenv("BUILDKITE_COMMIT", "gpu-host")
    monkeypatch.delenv("BUILDKITE", raising=False)
    for platform_variable in VISIBLE_ENV.values():
        monkeypatch.delenv(platform_variable, raising=False)
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)


def run_cuda(repo: Path, tmp_path: Path, *more: str) -> int:
    args = ["--platform", "cuda", "--repo", str(repo), "--native"]
    return run_tier("ready", [*args, "--results", str(tmp_path / "r"), *more])


def test_forced_steps_take_turns_on_the_devices_and_cpu_jobs_see_none(
    tmp_path: Path, standins: StandIns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One H100: the h100_2 step, forced, waits for the device the h100_1 step holds and
    gets it (CUDA_VISIBLE_DEVICES=0, VLLM_CI_EXPECTED_GPU_COUNT=2); the CPU job beside
    them is shown no device of any platform, though the caller's CUDA_VISIBLE_DEVICES is 0."""
    out = tmp_path / "out"
    repo = cuda_repo(tmp_path, out)
    gpu_host(standins, monkeypatch, H100, visible="0")
    assert run_cuda(repo, tmp_path, "--force", "-j", "3") == 0
    events = (out / "events").read_text().splitlines()
    gpu = [line for line in events if not line.endswith(" cpu")]
    assert gpu in (
        ["start one", "end one", "start two", "end two"],
        ["start two", "end two", "start one", "end one"],
    ), events  # never both on device 0 at once
    one, two, cpu = (recorded_env(out, name) for name in ("one", "two", "cpu"))
    assert (one["CUDA_VISIBLE_DEVICES"], one["VLLM_CI_EXPECTED_GPU_COUNT"]) == ("0", "1")
    assert (two["CUDA_VISIBLE_DEVICES"], two["VLLM_CI_EXPECTED_GPU_COUNT"]) == ("0", "2")
    assert cpu["VLLM_CI_EXPECTED_GPU_COUNT"] == "0"
    assert {name: cpu[name] for name in VISIBLE_ENV.values()} == hidden()
    assert cpu["CUDA_VISIBLE_DEVICES"] == "" and cpu["ZE_AFFINITY_MASK"] == "-1"


def test_the_callers_visible_devices_narrow_the_inventory(
    tmp_path: Path,
    standins: StandIns,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """nvidia-smi lists every GPU whatever CUDA_VISIBLE_DEVICES says: the caller's value
    picks the devices by index; empty is none; a UUID is refused before anything runs."""
    out = tmp_path / "out"
    repo = cuda_repo(tmp_path, out)
    gpu_host(standins, monkeypatch, H100, H100, visible="1")
    assert run_cuda(repo, tmp_path) == 0
    assert recorded_env(out, "one")["CUDA_VISIBLE_DEVICES"] == "1"
    err = capfd.readouterr().err
    assert f"needs h100_2: this host has 1 x {H100} (CUDA_VISIBLE_DEVICES=1)" in err

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert run_cuda(repo, tmp_path) == 0
    err = capfd.readouterr().err
    assert "needs h100_1: no cuda devices here (CUDA_VISIBLE_DEVICES=)" in err

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8932f937")
    (out / "events").unlink()
    with pytest.raises(UserError) as refused:
        run_cuda(repo, tmp_path)
    assert refused.value.code == 2
    assert refused.value.problems[0].startswith(
        "CUDA_VISIBLE_DEVICES: 'GPU-8932f937' is not a device index"
    )
    assert not (out / "events").exists()
