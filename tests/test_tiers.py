"""Tier model, CPU rule, planner and reports (no Docker).

The step counts of the real corpus are the issue's numbers and are also
recounted here by an independent walk of the parsed YAML, so an extractor bug
cannot hide behind a matching count.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci.errors import Failure, UserError
from ci.images.cachekey import missing_inputs
from ci.images.refs import ci_image
from ci.pipeline.mirror import HF_EXPORT
from ci.platforms import Platform
from ci.tiers import report
from ci.tiers.execute import JobOutcome, JobResult, outcome_of
from ci.tiers.model import Tier, TierStep, load_tier
from ci.tiers.plan import CONTAINER_LABEL, Options, plan_step, plan_tier, shard_label
from ci.tiers.rules import SoftFail, cpu_runnable, marker_expressions, soft_fail_of
from ci.tiers.session import parse_args
from tests.conftest import ROOT, SAMPLE, SHARED, StandIns, need_shared
from tests.corpus import make_corpus
from tests.gitrepo import GitRepo, copy_tracked
from tests.inproc import run_task

CORPUS = SHARED / "vllm-omni"


def run(tier: str, words: list[str]) -> int:
    """`vllm-omni-ci tier TIER WORDS...` in this process: the task's grammar, then the session."""
    from ci.cli import parse_line
    from ci.tiers import session

    (call,) = parse_line(["tier", tier, *words]).calls
    arguments = call.task.arguments(call.values)
    return session.run(**{**arguments, "label": arguments["label"] or ()})


def corpus() -> Path:
    """The vLLM-Omni checkout in ../shared (the calling test fails in one line without it)."""
    return need_shared(CORPUS)


COUNTS = [
    ("rocm", "ready", "amd/test-amd-ready.yml", 22),
    ("rocm", "merge", "amd/test-amd-merge.yml", 22),
    ("rocm", "nightly", "amd/test-amd-nightly.yml", 9),
    ("cuda", "ready", "cuda/test-ready.yml", 31),
    ("cuda", "merge", "cuda/test-merge.yml", 20),
    ("cuda", "nightly", "cuda/test-nightly.yml", 55),
    ("cuda", "weekly", "cuda/test-weekly.yml", 48),
    ("npu", "ready", "npu/test-npu-ready.yml", 9),
    ("npu", "nightly", "npu/test-npu-nightly.yml", 15),
]

LABELS = {
    ("rocm", "ready"): [
        "Simple · Model Executor Test · Shard %N/%t",
        "Diffusion · Offloader Test",
        "CosyVoice3-TTS E2E Smoke (SDPA)",
    ],
    ("rocm", "merge"): [
        "Simple · Model Executor Test · Shard %N/%t",
        "Diffusion Sequence Parallelism Test (Need 4 GPUs) · Shard 2/2",
        "Qwen3-TTS Base E2E Test",
    ],
    ("rocm", "nightly"): ["Qwen3-Omni Function Expansion", "Simple · Pi0.5 CPU Test"],
    ("cuda", "ready"): ["Simple · Model Executor Test", "Distributed Test"],
    ("cuda", "merge"): ["TTS · Qwen3-TTS Base Test"],
    ("cuda", "nightly"): [":email: Nightly Collection & Email"],
    ("cuda", "weekly"): ["Simple · CPU Coverage Test", "Diffusion · Bagel · H100 · Single-GPU"],
    ("npu", "ready"): ["Platforms Test", "Diffusion NPU layer tests - 310P"],
    ("npu", "nightly"): [":full_moon: Diffusion X2V · Wan 2.2 Perf Test"],
}


def independent_leaves(items: list[Any]) -> list[dict[str, Any]]:
    """Command steps by a separate walk: groups recurse, anything with command(s) counts."""
    found: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if "group" in item:
            found += independent_leaves(item.get("steps") or [])
        elif item.get("command") or item.get("commands"):
            found.append(item)
    return found


def raw_commands(item: dict[str, Any]) -> list[str]:
    value = item["command"] if "command" in item else item["commands"]
    values = value if isinstance(value, list) else [value]
    return [str(v).strip() for v in values if v is not None and str(v).strip()]


@pytest.mark.parametrize(("platform", "tier", "rel", "count"), COUNTS)
def test_corpus_tier_steps_match_independent_count_and_commands(
    platform: str, tier: str, rel: str, count: int
) -> None:
    document = yaml.safe_load((corpus() / ".buildkite" / rel).read_text())
    leaves = independent_leaves(document["steps"])
    assert len(leaves) == count

    steps = load_tier(corpus(), Tier(tier), Platform(platform))
    assert len(steps) == count
    assert [s.label for s in steps] == [leaf.get("label") for leaf in leaves]
    for step, leaf in zip(steps, leaves, strict=True):
        assert list(step.commands) == raw_commands(leaf), step.label  # byte for byte
        assert step.file == f".buildkite/{rel}"
        for shell, written in zip(step.shell_commands, step.commands, strict=True):
            assert shell == written.replace("$$", "$")
        assert dict(document.get("env") or {}).keys() <= step.env.keys()
    labels = {s.label for s in steps}
    for label in LABELS[(platform, tier)]:
        assert label in labels


def test_corpus_amd_details_carried_over() -> None:
    steps = {s.label: s for s in load_tier(corpus(), Tier.READY, Platform.ROCM)}
    shards = steps["Simple · Model Executor Test · Shard %N/%t"]
    assert shards.parallelism == 3 and shards.runs_on_cpu and shards.blocking
    assert shards.hardware == "mi300_1" and shards.timeout_minutes == 90
    smoke = steps["CosyVoice3-TTS E2E Smoke (SDPA)"]
    assert not smoke.runs_on_cpu and smoke.need == "needs mi300_1"
    cpu = [s.label for s in steps.values() if s.runs_on_cpu]
    assert len(cpu) == 6 and all(label.startswith("Simple") for label in cpu)
    soft = [s for s in steps.values() if not s.blocking]
    assert soft and all(s.grade != "Blocking" for s in soft)
    nightly = load_tier(corpus(), Tier.NIGHTLY, Platform.ROCM)
    assert all(not s.blocking for s in nightly)  # all NonBlocking


def test_corpus_cuda_and_npu_hardware_is_the_upload_preset(tmp_path: Path) -> None:
    repo = make_corpus(tmp_path / "corpus")
    ready = {s.label: s for s in load_tier(repo, Tier.READY, Platform.CUDA)}
    assert ready["Simple · Model Executor Test"].hardware == "l4_1"
    assert ready["Simple · Model Executor Test"].runs_on_cpu
    assert ready["Distributed Test"].need == "needs l4_1"
    nightly = load_tier(repo, Tier.NIGHTLY, Platform.CUDA)
    # Inferred from -m (H100 + cards) like the uploader does; none unresolved.
    assert not [s.label for s in nightly if s.hardware.startswith("unresolved")]
    assert {s.hardware for s in nightly} & {"h100_1", "h100_2"}
    npu = {s.label: s for s in load_tier(repo, Tier.READY, Platform.NPU)}
    assert npu["Platforms Test"].hardware == "a3_npu_2"
    assert npu["Diffusion NPU layer tests - 310P"].hardware == "310p_npu_1"
    assert not any(s.runs_on_cpu for s in npu.values())


def test_corpus_without_marker_registry_reports_unresolved_but_still_loads() -> None:
    nightly = load_tier(corpus(), Tier.NIGHTLY, Platform.CUDA)
    assert len(nightly) == 55
    assert any("missing pytest marker registry" in s.hardware for s in nightly)


@pytest.mark.parametrize(
    ("tier", "platform"),
    [("merge", "npu"), ("weekly", "rocm"), ("weekly", "npu"), ("nightly", "xpu"), ("merge", "xpu")],
)
def test_missing_tier_platform_pair_exits_2(tier: str, platform: str) -> None:
    with pytest.raises(UserError) as caught:
        run(tier, ["--platform", platform, "--repo", str(corpus()), "--list"])
    (problem,) = caught.value.problems
    assert problem.startswith(f"no {tier} tier for {platform} (")
    assert caught.value.code == 2


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string\n", "steps: none\n"])
def test_a_tier_file_without_steps_is_an_error(tmp_path: Path, text: str) -> None:
    """Not an empty tier that "passes" with nothing run."""
    (tmp_path / ".buildkite" / "amd").mkdir(parents=True)
    (tmp_path / ".buildkite" / "amd" / "test-amd-ready.yml").write_text(text)
    with pytest.raises(Failure) as caught:
        load_tier(tmp_path, Tier.READY, Platform.ROCM, {})
    assert caught.value.problems == (
        ".buildkite/amd/test-amd-ready.yml: not a test pipeline (a mapping with a `steps` list)",
    )
    assert caught.value.code == 1


def test_xpu_ready_tier_is_the_runner_table() -> None:
    from ci.runner.xpu import COMMANDS

    (step,) = load_tier(CORPUS, Tier.READY, Platform.XPU)
    assert step.commands == COMMANDS
    assert step.shell_commands == step.commands  # not YAML: no `$$` unescaping
    assert not step.runs_on_cpu and step.need == "needs intel-gpu-omni"
    assert step.blocking and step.timeout_minutes == 60


def test_xpu_ready_tier_reads_the_checkouts_test_list(tmp_path: Path) -> None:
    """The list belongs to vLLM-Omni: the checkout's file wins over the built-in table."""
    from ci.runner.xputests import TESTS_FILE
    from ci.tiers.model import source_of

    (tmp_path / TESTS_FILE).parent.mkdir(parents=True)
    (tmp_path / TESTS_FILE).write_text("# ours\npip install tblib==3.1.0\npytest -m 'cpu'\n")
    (step,) = load_tier(tmp_path, Tier.READY, Platform.XPU)
    assert step.commands == ("pip install tblib==3.1.0", "pytest -m 'cpu'")
    assert step.file == TESTS_FILE == source_of(tmp_path, Tier.READY, Platform.XPU)
    (tmp_path / TESTS_FILE).write_text("\n# none\n")
    with pytest.raises(Failure) as caught:
        load_tier(tmp_path, Tier.READY, Platform.XPU)
    assert caught.value.problems[0].startswith(f"{tmp_path / TESTS_FILE}: no test commands")


# --------------------------------------------------------------------------- CPU rule


@pytest.mark.parametrize(
    ("commands", "expected"),
    [
        (["pytest -sv tests -m 'core_model and cpu'"], True),
        (['pytest tests -m "cpu"'], True),
        (["pytest tests -m cpu"], True),
        (["pytest -m 'core_model and cpu and not (cards_2 or cards_4)' x"], True),
        (["python3 -m pytest tests -m 'core_model and cpu'"], True),
        (["pytest a -m 'core_model and cpu'", "pytest b -m 'core_model and cuda'"], False),
        (["pytest tests -m 'core_model and not cpu'"], False),
        (["pytest tests -m 'core_model and cuda'"], False),
        (["pytest tests/foo_cpu_test.py -m 'core_model and cpus'"], False),
        (["timeout 10m pytest -s -v tests/model_executor/x.py"], False),  # no -m at all
        (["python -m pytest tests"], False),
    ],
)
def test_cpu_runnable_rule(commands: list[str], expected: bool) -> None:
    assert cpu_runnable(commands) is expected


def test_marker_expressions_skip_python_module_switch() -> None:
    assert marker_expressions(["python3 -m pytest t -m 'a and cpu'"]) == ["a and cpu"]


def test_soft_fail_values() -> None:
    assert soft_fail_of(True).covers(1) and not soft_fail_of(True).covers(0)
    assert soft_fail_of(None).blocking and soft_fail_of(False).blocking
    listed = soft_fail_of([{"exit_status": 5}, {"exit_status": "3"}])
    assert listed.covers(5) and listed.covers(3) and not listed.covers(1)
    assert soft_fail_of([{"exit_status": "*"}]).every


# --------------------------------------------------------------------------- planner


def sample_options(tmp_path: Path, **kw: Any) -> Options:
    """The options as the session completes them, for the sample at commit abc123."""
    defaults: dict[str, Any] = {
        "repo": str(SAMPLE),
        "commit": "abc123",
        "results": str(tmp_path / "results"),
        "environ": {},
        "run_id": "t1",
    }
    defaults.update(kw)
    return Options(**defaults)


def test_sample_ready_plan_shards_skips_and_soft_fail(tmp_path: Path) -> None:
    steps = load_tier(SAMPLE, Tier.READY, Platform.ROCM)
    jobs = plan_tier(steps, sample_options(tmp_path, label=("vllm-omni-ci.test=1",)))
    names = [(j.name, j.shard) for j in jobs]
    assert ("Simple · Model Executor Test · Shard 1/2", 0) in names
    assert ("Simple · Model Executor Test · Shard 2/2", 1) in names
    shard = next(j for j in jobs if j.shard == 1)
    assert shard.env["BUILDKITE_PARALLEL_JOB"] == "1"
    assert shard.env["BUILDKITE_PARALLEL_JOB_COUNT"] == "2"
    assert shard.env["VLLM_CI_EXPECTED_GPU_COUNT"] == "0"  # the no-GPU pre-flight
    assert shard.env["VLLM_CI_DOCKER_DISABLED"] == "1"
    assert shard.env["VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE"] == "0"
    assert 'export VLLM_WORKER_MULTIPROC_METHOD="spawn"' in shard.program  # file env
    # The AMD template's TEST_COMMANDS, `$$` unescaped, inside the ROCm program.
    assert '--num-shards="$BUILDKITE_PARALLEL_JOB_COUNT"' in shard.program
    assert "cd /app/vllm-omni" in shard.program
    assert "Native in-pod ROCm CI" in shard.program
    gpu = next(j for j in jobs if j.name == "Engine · Two-GPU Test")
    assert not gpu.runs and gpu.reason == "needs mi300_2: no rocm devices here"
    soft = next(j for j in jobs if "quarantined" in j.name)
    assert soft.runs and not soft.step.blocking
    assert soft.command is not None and soft.command.timeout == 20 * 60


def test_container_argv_mounts_repo_labels_and_passes_env_by_name(tmp_path: Path) -> None:
    steps = load_tier(SAMPLE, Tier.READY, Platform.ROCM)
    options = sample_options(
        tmp_path,
        inventory=gpus(Platform.ROCM, "AMD Instinct MI300X"),
        label=("vllm-omni-ci.test=1",),
        stream=False,
    )
    (job,) = plan_step(steps[1], 2, options)
    assert job.command is not None
    docker = list(job.command.argv)  # the job's own argv: the door writes its log
    assert docker[:5] == ["docker", "run", "--rm", "--name", job.container]
    assert job.container == "vllm-omni-ci-tier-ready-rocm-t1-2"
    assert f"{CONTAINER_LABEL}=ready" in docker and "vllm-omni-ci.test=1" in docker
    assert docker[docker.index("-v") + 1] == f"{SAMPLE}:/app/vllm-omni"
    assert docker[docker.index("-w") + 1] == "/app/vllm-omni"
    # A CPU job gets no device, whatever the host has, and is shown none inside.
    assert not {"--device", "--gpus"} & set(docker) and not job.devices
    assert job.env["HIP_VISIBLE_DEVICES"] == job.env["CUDA_VISIBLE_DEVICES"] == ""
    assert docker[-3:] == [ci_image(Platform.ROCM, "abc123", {}), "-c", job.program]
    passed = [docker[i + 1] for i, a in enumerate(docker) if a == "-e"]
    assert set(passed) == {*job.env, "HOME=/tmp"}  # HOME: writable by the invoking user
    assert all("=" not in name for name in passed if name != "HOME=/tmp")  # values never in argv
    assert docker[docker.index("--user") + 1] == f"{os.getuid()}:{os.getgid()}"
    assert job.log == tmp_path / "results" / "rocm" / "02-simple-omni-processor-test.log"


def test_force_runs_gpu_step_on_the_devices_there_are(tmp_path: Path) -> None:
    """Forced: the cards it asks for, else every device there is (VLLM_CI_EXPECTED_GPU_COUNT
    still the step's own), else none: a CPU job with the no-GPU pre-flight."""
    steps = load_tier(SAMPLE, Tier.READY, Platform.ROCM)
    gpu = next(s for s in steps if s.hardware == "mi300_2")
    (without,) = plan_step(gpu, 6, sample_options(tmp_path, force=True, native=True))
    assert without.runs and without.env["VLLM_CI_EXPECTED_GPU_COUNT"] == "0"
    assert (without.devices, without.env["HIP_VISIBLE_DEVICES"]) == ((), "")
    for names, devices in ((["AMD Instinct MI300X"] * 4, (0, 1)), (["AMD MI250"], (0,))):
        options = sample_options(
            tmp_path, force=True, native=True, inventory=gpus(Platform.ROCM, *names)
        )
        (forced,) = plan_step(gpu, 6, options)
        assert forced.devices == devices
        assert forced.env["HIP_VISIBLE_DEVICES"] == ",".join(map(str, devices))
        assert forced.env["VLLM_CI_EXPECTED_GPU_COUNT"] == "2"


def test_native_plan_runs_bash_in_the_repo(tmp_path: Path) -> None:
    steps = load_tier(SAMPLE, Tier.READY, Platform.ROCM)
    options = sample_options(tmp_path, environ={"HOME": "/home/u"}, native=True)
    (job,) = plan_step(steps[1], 2, options)
    assert job.command is not None and job.command.cwd == str(SAMPLE)
    assert job.command.argv == ("bash", "-c", job.program)  # the door writes its log
    assert f"cd {SAMPLE}" in job.program and not job.container
    assert job.env["HF_HOME"] == "/home/u/.cache/huggingface"


def test_cuda_step_runs_fail_fast_in_the_checkout(tmp_path: Path) -> None:
    steps = load_tier(SAMPLE, Tier.READY, Platform.CUDA)
    jobs = plan_tier(steps, sample_options(tmp_path, step="Simple · Diffusion"))
    (job,) = jobs
    assert job.step.hardware == "l4_1" and job.runs
    assert '"${BASH:-/bin/bash}" -e -c' in job.program
    # The upload's CUDA preset prologue runs first, `$$` unescaped.
    assert job.step.prologue == (HF_EXPORT,)
    assert job.step.job_commands[0] == HF_EXPORT.replace("$$", "$")
    assert 'export HF_TOKEN="${VLLM_CI_HF_TOKEN}"; fi\npytest -sv tests/diffusion' in job.program
    assert job.env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert job.command is not None
    docker = list(job.command.argv)
    assert docker[docker.index("-w") + 1] == "/workspace"
    skipped = plan_tier(steps, sample_options(tmp_path, step="Engine"))
    assert [j.reason for j in skipped] == ["needs l4_1: no cuda devices here"]


def test_shard_label_placeholders() -> None:
    assert shard_label("T · Shard %N/%t", 0, 3) == "T · Shard 1/3"
    assert shard_label("T %n", 2, 3) == "T 2"
    assert shard_label("T %N", None, 1) == "T %N"


def test_parse_args_rejects_bad_input() -> None:
    with pytest.raises(UserError) as caught:
        parse_args(platform="tpu", native=True, image="x", label=["y"])
    text = "\n".join(caught.value.problems)
    assert "unknown platform 'tpu'" in text
    assert "--image" in text and "--label: 'y'" in text
    with pytest.raises(UserError):
        run("ready", ["--bogus"])


def test_help_states_the_cpu_rule_the_hardware_and_the_ifs() -> None:
    text = " ".join(run_task("tier", "--help").stdout.split())
    assert text.startswith("Usage: vllm-omni-ci tier [OPTIONS] NAME ")
    assert "every -m in it has a positive `cpu` term" in text
    assert "reported as `needs <hardware>: <why>` and does not run unless --force" in text
    assert "agent_pool (rocm) or the preset the upload resolves (cuda, npu)" in text
    assert "its `_<n>` is the card count" in text
    assert "--exact-sku run a GPU step only on devices whose name has its SKU" in text
    assert "--cpu-only run no GPU step without --force" in text
    assert "evaluated as for a PR carrying the tier's label" in text
    assert "--step STEP only steps whose label contains this text" in text


# --------------------------------------------------------------------------- reports


def results_for(tmp_path: Path) -> list[JobResult]:
    steps = load_tier(SAMPLE, Tier.READY, Platform.ROCM)
    jobs = plan_tier(steps, sample_options(tmp_path))
    out = []
    for job in jobs:
        if not job.runs:
            out.append(JobResult(job, JobOutcome.SKIPPED, note=job.reason))
            continue
        code = 1 if "quarantined" in job.name else 0
        out.append(JobResult(job, outcome_of(job, code), code, 1.5))
    return out


def test_outcomes_and_junit(tmp_path: Path) -> None:
    results = results_for(tmp_path)
    assert [r.outcome for r in results].count(JobOutcome.SOFT) == 1
    path = report.write_junit(results, "ready tier", tmp_path / "junit.xml")
    root = ET.parse(path).getroot()
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 7 and suite.get("tests") == "7"
    names = [c.get("name") for c in cases]
    assert "Simple · Model Executor Test · Shard 2/2" in names
    gpu = cases[names.index("Engine · Two-GPU Test")]
    skipped = gpu.find("skipped").get("message")  # type: ignore[union-attr]
    assert skipped == "needs mi300_2: no rocm devices here"
    soft = next(c for c in cases if "quarantined" in (c.get("name") or ""))
    assert soft.find("failure").get("type") == "soft_fail"  # type: ignore[union-attr]
    assert cases[0].get("classname") == "ready.rocm.Simple Test"


def test_plain_lines_and_markdown(tmp_path: Path) -> None:
    results = results_for(tmp_path)
    lines = report.plain_lines(results)
    assert lines[-1].startswith("needs mi300_2")
    assert any(line.startswith("soft failure") and "exit 1" in line for line in lines)
    text = report.markdown(results, "ready")
    assert "| step | shard | result | exit | duration | log |" in text
    assert report.annotation_style(results) == "warning"
    assert "5 passed, 0 failed, 1 soft failures, 1 not runnable here" in text


def test_soft_fail_on_listed_exit_only() -> None:
    step = TierStep(
        file="",
        label="x",
        commands=("true",),
        platform=Platform.CUDA,
        tier=Tier.READY,
        soft_fail=SoftFail(statuses=frozenset({5})),
    )
    from ci.tiers.plan import Job

    job = Job(step, 1, "x")
    assert outcome_of(job, 5) is JobOutcome.SOFT and outcome_of(job, 1) is JobOutcome.FAILED


# --------------------------------------------------------------------------- session


def test_list_prints_steps_and_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("ready", ["--platform", "amd", "--repo", str(SAMPLE), "--list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# ready tier for rocm: .buildkite/amd/test-amd-ready.yml")
    assert "hardware: mi300_2 — needs mi300_2: no rocm devices here" in out
    assert "grade: NonBlocking (soft_fail)" in out
    assert "parallelism 2, timeout 20m" in out
    assert "$ pytest -sv tests/e2e -m 'advanced_model and cpu' --run-level advanced_model" in out


def test_nox_lists_the_tier_sessions_with_tags() -> None:
    if shutil.which("nox") is None:
        pytest.skip("nox is not installed")
    listed = subprocess.run(
        ["nox", "-l"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    for tier in ("ready", "merge", "nightly", "weekly"):
        assert f"- {tier} [{tier},tiers] -> Run the {tier} tier" in listed
    tagged = subprocess.run(
        ["nox", "-l", "-t", "nightly"], cwd=ROOT, capture_output=True, text=True, timeout=120
    ).stdout
    assert "* nightly [nightly,tiers] ->" in tagged and "- ready [ready,tiers] ->" in tagged


def test_native_fixture_tier_real_bash_and_pytest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """--native: the rendered ROCm program runs here with the host's pytest, shard by shard."""
    from tests.tiers_fixture import fixture_repo

    repo = fixture_repo(tmp_path / "target")
    monkeypatch.setenv("BUILDKITE_COMMIT", "fixture")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("BUILDKITE", raising=False)
    results = tmp_path / "results"
    base = ["--platform", "rocm", "--repo", str(repo), "--native", "--results", str(results)]
    base += ["-j", "1"]  # one at a time: the failure comes before the next job starts
    assert run("ready", base) == 1
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(("passed", "failed", "not run"))]
    assert any(line.startswith("failed") and "Blocking failure" in line for line in lines)
    assert any(line.startswith("not run") and "After the failure" in line for line in lines)
    assert "needs mi300_4" in err
    for shard in (0, 1):
        log = (results / "rocm" / f"01-env-shard-shard{shard + 1}.log").read_text()
        assert f"tier-env job={shard} count=2 file=from-file step=from-step gpus=0" in log
        assert f"pwd={repo} tmpdir=/tmp/vllm-omni-native-{shard}/tmp" in log
        assert "4 passed, 4 deselected" in log  # the sample's 8 tests, split by the shard flags

    assert run("ready", [*base, "--keep-going"]) == 1
    err = capfd.readouterr().err
    assert any(
        line.startswith("passed") and "After the failure" in line for line in err.splitlines()
    )
    root = ET.parse(results / "junit-ready.xml").getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == [
        "ready tier (rocm): Env · Shard 1/2",  # a suite per job with pytest's tests
        "ready tier (rocm): Env · Shard 2/2",
        "ready tier (rocm): Blocking failure",
        "ready tier (rocm): After the failure",
        "ready tier (rocm)",  # the jobs without: one testcase each
    ]
    assert [c.get("name") for c in suites["ready tier (rocm)"]] == ["Needs GPUs"]
    shards = [suites[f"ready tier (rocm): Env · Shard {n}/2"] for n in (1, 2)]
    assert [s.get("tests") for s in shards] == ["4", "4"]  # the sample's 8, split
    (failed,) = suites["ready tier (rocm): Blocking failure"]
    assert failed.get("name") == "test_advanced_cpu_caption_is_deliberately_wrong"
    assert "deliberate failure" in (failed.find("failure").get("message") or "")  # type: ignore[union-attr]


def test_buildkite_groups_artifacts_and_annotation_through_the_agent(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    standins: Any,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Under Buildkite: one `--- ` group per job, printed whole when it ends (the job
    shell's own header demoted), `^^^ +++` after a failure, the logs and JUnit uploaded
    from the results folder, and the table as an annotation linking them."""
    from tests.tiers_fixture import fixture_repo

    repo = fixture_repo(tmp_path / "target")
    note = tmp_path / "annotation.md"
    standins.add("buildkite-agent", f'if [ "$1" = annotate ]; then cat > {note}; fi')
    monkeypatch.setenv("PATH", standins.env()["PATH"])
    monkeypatch.setenv("BUILDKITE", "true")
    monkeypatch.setenv("BUILDKITE_COMMIT", "fixture")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    results = tmp_path / "results"
    args = ["--platform", "rocm", "--repo", str(repo), "--native", "--results", str(results)]
    assert run("ready", [*args, "--step", "Env", "-j", "2"]) == 0
    err = capfd.readouterr().err.splitlines()
    groups = [line for line in err if line.startswith("--- ")]
    assert sorted(groups[:2]) == [
        "--- Env · Shard 1/2 — natively",
        "--- Env · Shard 2/2 — natively",
    ]
    assert err.count(" --- Native in-pod ROCm CI") == 2  # inside each job's group, demoted
    for shard in (1, 2):  # each group whole: its header, its log, its line, in that order
        start = err.index(f"--- Env · Shard {shard}/2 — natively")
        passed = f"[ready/rocm] Env · Shard {shard}/2: passed in "
        end = next(i for i, line in enumerate(err) if line.startswith(passed))
        assert f"tier-env job={shard - 1} count=2" in "\n".join(err[start:end])
        assert not any(line.startswith("--- ") for line in err[start + 1 : end])
    assert "^^^ +++" not in err

    assert run("ready", [*args, "--step", "Blocking failure"]) == 1
    err = capfd.readouterr().err.splitlines()
    assert "--- Blocking failure — natively" in err
    failed = "[ready/rocm] Blocking failure: failed (exit 1) in "
    ended = next(i for i, line in enumerate(err) if line.startswith(failed))
    assert err[ended + 1] == "^^^ +++"
    assert "--- ready tier summary" in err
    upload = ["artifact", "upload", "rocm/*.log;junit-*.xml"]
    uploads = [c for c in standins.calls("buildkite-agent") if c["argv"] == upload]
    assert [c["cwd"] for c in uploads] == [str(results)] * 2  # the links' paths are these
    assert standins.argvs("buildkite-agent") == [
        upload,
        ["annotate", "--style", "success", "--context", "vllm-omni-ci-ready"],
        upload,
        ["annotate", "--style", "error", "--context", "vllm-omni-ci-ready"],
    ]
    text = note.read_text()
    log = "rocm/02-blocking-failure.log"
    assert "| [rocm] Blocking failure |  | failed | 1 |" in text
    assert f"| [{log}](artifact://{log}) |" in text
    assert "JUnit: [junit-ready.xml](artifact://junit-ready.xml)" in text
    assert "0 passed, 1 failed, 0 soft failures, 0 not runnable here" in text


def test_a_misspelt_tier_gets_a_guess_without_naming_the_flag() -> None:
    """`tier redy`: the positional form is named as `tier:`, with a did-you-mean (issue 35)."""
    done = run_task("tier", "redy", "--repo", str(SAMPLE), "--list")
    assert (done.returncode, done.stderr) == (
        2,
        "error: tier: unknown tier 'redy'; did you mean 'ready'? (ready, merge, nightly, weekly)\n",
    )


def test_a_missing_tier_says_which_platforms_have_it() -> None:
    """The line `tier` prints names the platforms with the tier, as the README promises."""
    repo = str(need_shared(CORPUS))
    done = run_task("tier", "weekly", "--platform", "rocm", "--repo", repo, "--list")
    assert (done.returncode, done.stderr) == (2, "error: no weekly tier for rocm (cuda only)\n")


def test_the_build_hint_says_what_a_pipelines_only_checkout_lacks(
    tmp_path: Path, standins: StandIns
) -> None:
    """`tier` once told a checkout without requirements/ to run a `build-image` that then
    failed on "cache-key input does not exist: requirements/" (issue 35): the hint now says
    what the build needs from the repo."""
    repo = GitRepo.create(tmp_path / "pipelines-only", origin=False)
    ready = ".buildkite/amd/test-amd-ready.yml"
    repo.write(ready, (SAMPLE / ready).read_text())
    repo.commit("the pipelines alone")
    standins.add("docker", 'case "$1" in version) echo 27.0;; *) exit 1;; esac')
    env = standins.env({k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE")})
    env.pop("VLLM_OMNI_CI_DOCKER", None)
    done = run_task("tier", "ready", "--platform", "rocm", "--repo", str(repo.path), env=env)
    assert done.returncode == 2, done.stderr
    command = f"vllm-omni-ci build-image --platform rocm --repo {repo.path.resolve()}"
    assert command in done.stderr
    assert (
        f"(but {repo.path.resolve()} lacks what it builds from: docker/Dockerfile.rocm,"
        " docker/Dockerfile.rocm.dockerignore, pyproject.toml, setup.py,"
        " tools/install_torchcodec_rocm.sh, requirements/; give --repo a whole vLLM-Omni checkout)"
    ) in done.stderr
    # The sample has them: the command alone.
    assert missing_inputs(SAMPLE, Platform.ROCM) == missing_inputs(SAMPLE, Platform.CUDA) == []


def test_tier_task_lists_and_fails_closed() -> None:
    listed = run_task("tier", "ready", "--platform", "amd", "--repo", str(SAMPLE), "--list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("# ready tier for rocm: .buildkite/amd/test-amd-ready.yml")
    missing_pair = run_task("tier", "weekly", "--platform", "amd", "--repo", str(SAMPLE))
    assert (missing_pair.returncode, missing_pair.stderr) == (
        2,
        "error: no weekly tier for rocm (no platform has one)\n",
    )
    bad = run_task("tier", "bogus")
    assert (bad.returncode, bad.stderr) == (
        2,
        "error: tier: unknown tier 'bogus' (ready, merge, nightly, weekly)\n",
    )
    empty = run_task("tier", "ready", "--repo", "", "--results=")
    assert (empty.returncode, empty.stderr) == (
        2,
        "error: tier: --repo: an empty path; give one, or leave --repo out\n"
        "error: tier: --results: an empty path; give one, or leave --results out\n",
    )

    bad_docker = run_task(
        "tier", "ready", "--repo", str(SAMPLE),
        env={**os.environ, "VLLM_OMNI_CI_DOCKER": str(SAMPLE)},
    )  # fmt: skip
    assert (bad_docker.returncode, bad_docker.stderr) == (
        2,
        f"error: VLLM_OMNI_CI_DOCKER: {SAMPLE} is not an executable docker client\n",
    )  # was "no CI image for the ready tier is present locally"
    unknown = run_task("tier", "ready", "--nonsense")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith(
        "error: tier: unknown option '--nonsense'; options: --cpu-only, --exact-sku, --force,"
    )
    assert unknown.stderr.endswith(" (see `vllm-omni-ci tier --help`)\n")
    old_form = run_task("tier", "ready", "--", "--platform", "rocm")
    assert (old_form.returncode, old_form.stderr) == (
        2,
        "error: tier: takes no words after `--`; its options go before (see `vllm-omni-ci tier"
        " --help`)\n",
    )


RETRY_TIER = """\
steps:
  - label: "Retried"
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    retry:
      automatic:
        - exit_status: 134
          limit: 1
    commands:
      - "test -f {marker} || {{ touch {marker}; exit 134; }}"
      - "pytest -q tests/diffusion -m 'core_model and cpu'"
  - label: "Retried once only"
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    retry:
      automatic:
        - exit_status: 134
          limit: 1
    commands:
      - "pytest -q tests/diffusion -m 'core_model and cpu'; exit 134"
"""


def test_retry_automatic_reruns_on_the_listed_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from tests.tiers_fixture import fixture_repo

    repo = fixture_repo(tmp_path / "target")
    marker = tmp_path / "attempted"
    (repo / ".buildkite/amd/test-amd-ready.yml").write_text(RETRY_TIER.format(marker=marker))
    steps = load_tier(repo, Tier.READY, Platform.ROCM)
    assert [(r.status, r.limit) for r in steps[0].retries] == [(134, 1)]
    monkeypatch.setenv("BUILDKITE_COMMIT", "fixture")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("BUILDKITE", raising=False)
    args = ["--platform", "rocm", "--repo", str(repo), "--native", "--keep-going"]
    assert run("ready", [*args, "--results", str(tmp_path / "r")]) == 1
    lines = capfd.readouterr().err.splitlines()
    assert any(line.startswith("passed (retried 1x)") and "Retried" in line for line in lines)
    assert any(
        line.startswith("failed (retried 1x)") and "Retried once only  exit 134" in line
        for line in lines
    )


def test_retries_of_forms() -> None:
    from ci.tiers.rules import Retry, retries_of

    assert retries_of({"automatic": True}) == (Retry(None, 2),)
    assert retries_of({"automatic": {"exit_status": "*"}}) == (Retry(None, 2),)
    assert retries_of({"automatic": [{"signal_reason": "agent_stop", "limit": 1}]}) == ()
    assert retries_of({"automatic": [{"exit_status": -1, "limit": 1}]}) == (Retry(-1, 1),)
    assert retries_of(None) == () and retries_of({"manual": {"allowed": False}}) == ()
    assert Retry(134, 1).matches(134) and not Retry(134, 1).matches(1)
    assert not Retry(None, 2).matches(0)


# --------------------------------------------------------------------------- if / depends_on


def test_corpus_ifs_are_evaluated_as_for_a_pr_with_the_tier_label() -> None:
    """Group and step `if`s: true by the tier's PR label, else opened by the build env."""
    env = {"BUILDKITE_BRANCH": "feature"}
    weekly = {s.label: s for s in load_tier(corpus(), Tier.WEEKLY, Platform.CUDA, env)}
    coverage = weekly["Simple · CPU Coverage Test"]
    assert coverage.if_false == 'build.env("WEEKLY") == "1"'
    assert coverage.skip_reason == 'if false here: build.env("WEEKLY") == "1"'
    reliability = weekly["Reliability Test · qwen3-omni"]
    assert reliability.conditions and reliability.if_false == ""  # label weekly-test
    sweep = [s for s in weekly.values() if s.if_false == 'build.env("NON_CRITICAL") == "1"']
    assert sweep and all(s.conditions == ('build.env("NON_CRITICAL") == "1"',) for s in sweep)
    assert len([s for s in weekly.values() if s.if_false]) == len(sweep) + 1

    opened = load_tier(
        corpus(), Tier.WEEKLY, Platform.CUDA, {**env, "WEEKLY": "1", "NON_CRITICAL": "1"}
    )
    assert not [s.label for s in opened if s.if_false]

    nightly = {s.label: s for s in load_tier(corpus(), Tier.NIGHTLY, Platform.CUDA, env)}
    email = nightly[":email: Nightly Collection & Email"]
    assert email.if_false.startswith('build.env("NIGHTLY") == "1" && ')
    assert len(email.depends_on) == 8 and all(not d.allow_failure for d in email.depends_on)
    assert [s.label for s in nightly.values() if s.if_false] == [email.label]
    npu = load_tier(corpus(), Tier.NIGHTLY, Platform.NPU, env)
    assert all(s.conditions and not s.if_false for s in npu)  # label nightly-test


def test_first_false_reads_ifexpr_and_treats_unknown_as_true() -> None:
    from ci.pipeline.ifexpr import Context
    from ci.tiers.model import first_false, local_context

    ctx = local_context(corpus(), Tier.MERGE, {"BUILDKITE_BRANCH": "pr", "NIGHTLY": "1"})
    assert ctx == Context.of("pr", ["merge-test"], {"BUILDKITE_BRANCH": "pr", "NIGHTLY": "1"})
    opaque = "build.message =~ /skip/"
    assert first_false((opaque, 'build.env("NIGHTLY") == "1"'), ctx) == ""
    assert first_false(('build.pull_request.labels includes "ready"',), ctx) == (
        'build.pull_request.labels includes "ready"'
    )
    assert first_false(('build.branch == "main"', "false"), ctx) == 'build.branch == "main"'


def test_if_false_step_is_reported_and_not_run_even_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"BUILDKITE_BRANCH": "feature"}
    steps = load_tier(corpus(), Tier.WEEKLY, Platform.CUDA, env)
    (job,) = plan_tier(steps, sample_options(tmp_path, force=True, step="CPU Coverage"))
    assert not job.runs and job.reason == 'if false here: build.env("WEEKLY") == "1"'

    assert run("weekly", ["--platform", "cuda", "--repo", str(corpus()), "--list"]) == 0
    out = capsys.readouterr().out
    assert 'hardware: l4_1 — if false here: build.env("WEEKLY") == "1"' in out
    assert '     if: build.env("WEEKLY") == "1"\n' in out


DEPENDS_TIER = """\
steps:
  - label: "Fails"
    key: fails
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands:
      - "pytest -q tests/e2e -m 'advanced_model and cpu' --run-level advanced_model"
  - label: "Waits for the failure"
    depends_on: fails
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands:
      - "pytest -q tests/diffusion -m 'core_model and cpu'"
  - label: "Allows the failure"
    depends_on:
      - step: fails
        allow_failure: true
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands:
      - "pytest -q tests/diffusion -m 'core_model and cpu'"
  - group: "GPU"
    key: gpu-group
    steps:
      - label: "Needs GPUs"
        agent_pool: mi300_4
        mirror_hardwares: [amdproduction]
        grade: Blocking
        commands:
          - "pytest -q tests/engine -m 'core_model and rocm and cards_4'"
  - label: "Waits for the GPU group"
    depends_on: [gpu-group, amd-build]
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands:
      - "pytest -q tests/diffusion -m 'core_model and cpu'"
  - label: "Waits for the image build only"
    depends_on: amd-build
    if: build.pull_request.labels includes "ready"
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands:
      - "pytest -q tests/diffusion -m 'core_model and cpu'"
  - label: "Gated off"
    if: build.env("NIGHTLY") == "1"
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands:
      - "pytest -q tests/diffusion -m 'core_model and cpu'"
"""


def test_depends_on_inside_the_tier_is_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A dependency must pass (or soft-fail, or be allowed to fail); build-step keys are met."""
    from tests.tiers_fixture import fixture_repo

    repo = fixture_repo(tmp_path / "target")
    (repo / ".buildkite/amd/test-amd-ready.yml").write_text(DEPENDS_TIER)
    for name, value in {"BUILDKITE_COMMIT": "fixture", "BUILDKITE_BRANCH": "feature"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("BUILDKITE", raising=False)
    monkeypatch.delenv("NIGHTLY", raising=False)
    args = ["--platform", "rocm", "--repo", str(repo), "--native", "--keep-going"]
    assert run("ready", [*args, "--results", str(tmp_path / "r")]) == 1
    summary = {
        line.split("[rocm] ", 1)[1].split("  ")[0]: line.split("  [rocm]")[0].strip()
        for line in capfd.readouterr().err.splitlines()
        if "  [rocm] " in line
    }
    assert summary == {
        "Fails": "failed",
        "Waits for the failure": "not run: depends on fails (Fails failed)",
        "Allows the failure": "passed",
        "Needs GPUs": "needs mi300_4: no rocm devices here",
        "Waits for the GPU group": (
            "not run: depends on gpu-group"
            " (Needs GPUs did not run here: needs mi300_4: no rocm devices here)"
        ),
        "Waits for the image build only": "passed",
        "Gated off": 'if false here: build.env("NIGHTLY") == "1"',
    }


LEAVES_A_SLEEP_TIER = """\
steps:
  - label: "Leaves a sleep"
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands:
      - "sleep 400 & echo $$! > {pid_file}; echo started-and-left-a-sleep"
      - "pytest -q tests/diffusion -m 'core_model and cpu'"
"""


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "log-only"])
def test_a_job_ends_when_its_command_ends_and_its_leftovers_are_ended(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    streamed: bool,
) -> None:
    """A process the job's command left running holds the job's output open: the tier waited
    for it (the log's tee read until it closed). The job ends with its command, what it left
    running is ended and listed, and its log holds what the command printed."""
    import threading

    import psutil

    from tests.tiers_fixture import fixture_repo

    repo = fixture_repo(tmp_path / "target")
    pid_file = tmp_path / "sleep.pid"
    tier = LEAVES_A_SLEEP_TIER.format(pid_file=pid_file)
    (repo / ".buildkite/amd/test-amd-ready.yml").write_text(tier)
    monkeypatch.setenv("BUILDKITE_COMMIT", "fixture")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("BUILDKITE", raising=False)
    results = tmp_path / "results"
    args = ["--platform", "rocm", "--repo", str(repo), "--native", "--results", str(results)]
    args += ["-j", "1" if streamed else "2"]  # more than one at a time: the log only
    codes: list[int] = []
    tier_run = threading.Thread(target=lambda: codes.append(run("ready", args)), daemon=True)
    tier_run.start()
    tier_run.join(30)
    sleeper = int(pid_file.read_text()) if pid_file.is_file() else 0
    try:
        assert not tier_run.is_alive(), "the tier waited for what its job left running"
    finally:
        if tier_run.is_alive() and sleeper:
            os.kill(sleeper, 9)
            tier_run.join(30)
    assert codes == [0]
    err = capfd.readouterr().err
    (line,) = [line for line in err.splitlines() if "  [rocm] Leaves a sleep" in line]
    assert line.startswith("passed")
    log = (results / "rocm" / "01-leaves-a-sleep.log").read_text()
    assert "started-and-left-a-sleep" in log and " passed in " in log
    assert ("started-and-left-a-sleep" in err) is streamed
    assert "Leaves a sleep: ended 1 process(es) the job left running:" in log
    assert f"pid={sleeper} " in log and "cmd=sleep 400" in log
    assert sleeper
    with contextlib.suppress(psutil.NoSuchProcess):
        assert psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE


def test_listing_shows_dependencies_inside_the_tier_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.tiers_fixture import fixture_repo

    repo = fixture_repo(tmp_path / "target")
    (repo / ".buildkite/amd/test-amd-ready.yml").write_text(DEPENDS_TIER)
    assert run("ready", ["--platform", "rocm", "--repo", str(repo), "--list"]) == 0
    out = capsys.readouterr().out
    assert "     depends on: fails\n" in out
    assert "     depends on: fails (failure allowed)\n" in out
    assert "     depends on: gpu-group\n" in out  # amd-build is the image, not a tier step
    assert "amd-build" not in out


# --------------------------------------------------------------------------- host and table


def test_rich_table_has_the_columns_and_one_row_per_job(tmp_path: Path) -> None:
    from rich.console import Console

    results = results_for(tmp_path)
    console = Console(record=True, width=250, color_system=None)
    console.print(
        report.table(results, "ready tier (rocm)", width=250, folder=tmp_path / "results")
    )
    text = console.export_text()
    header = next(line for line in text.splitlines() if "step" in line and "duration" in line)
    assert all(c in header for c in ("step", "shard", "result", "exit", "duration", "log"))
    assert header.index("step") < header.index("shard") < header.index("result")
    assert header.index("exit") < header.index("duration") < header.index("log")
    # One platform: the title names it, so the rows carry no `[rocm]` prefix.
    rows = [line for line in text.splitlines() if line.startswith("│ ")]
    assert len(rows) == len(results) == 7 and "[rocm]" not in text.split("┏", 1)[1]
    assert "2/2" in rows[1] and "passed" in rows[1] and "1.5s" in rows[1]
    assert "rocm/01-simple-model-executor-test-shard-shard2.log" in rows[1]  # under the folder
    assert "soft failure" in rows[5] and " 1 " in rows[5]
    assert "needs mi300_2" in rows[6]
    assert f"logs in {tmp_path / 'results'}/" in text


@pytest.mark.parametrize("platform", ["rocm", "cuda", "npu", "xpu"])
def test_image_ref_is_the_tag_build_image_gives(platform: str) -> None:
    """Container mode looks for exactly the image `build-image --repo` would make."""
    env = {
        "BUILDKITE_COMMIT": "abc123",
        "VLLM_VERSION": "0.1.0",
        "ROCM_CI_IMAGE_REGISTRY": "127.0.0.1:5000/tiers/rocm",
        "IMAGE_REGISTRY": "127.0.0.1:5000/tiers",
    }
    ref = ci_image(Platform(platform), "abc123", env)
    built = run_task(
        "build-image", "--platform", platform, "--repo", str(SAMPLE), "--no-push", "--dry-run",
        env=env,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert ref in built.stdout, (ref, built.stdout[-2000:])


# --------------------------------------------------------------------------- devices here


def gpus(platform: Platform, *names: str) -> Any:
    from ci.devices import Device, Inventory

    return Inventory(tuple(Device(platform, i, name, 81559) for i, name in enumerate(names)))


def cuda_gpu_jobs(tmp_path: Path, **kw: Any) -> dict[str, Any]:
    """The sample's two CUDA GPU steps (l4_1, h100_1), planned with `kw`: label -> job."""
    steps = [s for s in load_tier(SAMPLE, Tier.READY, Platform.CUDA) if not s.runs_on_cpu]
    return {j.name: j for j in plan_tier(steps, sample_options(tmp_path, **kw))}


def test_gpu_steps_run_where_the_host_has_their_platform_and_cards(tmp_path: Path) -> None:
    jobs = cuda_gpu_jobs(tmp_path, inventory=gpus(Platform.CUDA, "NVIDIA H200"), stream=False)
    engine, e2e = jobs["Engine · Single-GPU Test"], jobs["E2E · Sample Model Test"]
    assert engine.runs and e2e.runs
    assert (engine.where, e2e.where) == ("l4_1 on NVIDIA H200", "h100_1 on NVIDIA H200")
    assert (e2e.devices, e2e.env["VLLM_CI_EXPECTED_GPU_COUNT"]) == ((0,), "1")
    assert e2e.command is not None
    docker = list(e2e.command.argv)
    assert docker[docker.index("--gpus") + 1] == '"device=0"'  # that device, not `all`
    assert "CUDA_VISIBLE_DEVICES" not in e2e.env  # in the container it is device 0 anyway

    native = cuda_gpu_jobs(tmp_path, inventory=gpus(Platform.CUDA, "NVIDIA H200"), native=True)
    env = native["E2E · Sample Model Test"].env
    assert (env["CUDA_VISIBLE_DEVICES"], env["VLLM_CI_EXPECTED_GPU_COUNT"]) == ("0", "1")

    exact = cuda_gpu_jobs(tmp_path, inventory=gpus(Platform.CUDA, "NVIDIA H100 80GB HBM3"))
    assert exact["E2E · Sample Model Test"].where == "h100_1 on NVIDIA H100 80GB HBM3"


def test_exact_sku_too_few_cards_no_devices_and_cpu_only_say_why(tmp_path: Path) -> None:
    h200 = gpus(Platform.CUDA, "NVIDIA H200")
    reasons = {n: j.reason for n, j in cuda_gpu_jobs(tmp_path, inventory=h200).items()}
    assert reasons == {"Engine · Single-GPU Test": "", "E2E · Sample Model Test": ""}
    exact = cuda_gpu_jobs(tmp_path, inventory=h200, exact_sku=True)
    assert exact["E2E · Sample Model Test"].reason == (
        "needs h100_1: this host has 1 x NVIDIA H200 (--exact-sku)"
    )
    mixed = gpus(Platform.CUDA, "NVIDIA L4", "NVIDIA H100 80GB HBM3")
    picked = cuda_gpu_jobs(tmp_path, inventory=mixed, exact_sku=True)["E2E · Sample Model Test"]
    assert (picked.devices, picked.where) == ((1,), "h100_1 on NVIDIA H100 80GB HBM3")
    nothing = cuda_gpu_jobs(tmp_path, inventory=gpus(Platform.ROCM, "AMD Instinct MI300X"))
    assert nothing["Engine · Single-GPU Test"].reason == "needs l4_1: no cuda devices here"
    cpu_only = cuda_gpu_jobs(tmp_path, inventory=h200, cpu_only=True)
    assert [j.reason for j in cpu_only.values()] == ["needs l4_1", "needs h100_1"]
    forced = cuda_gpu_jobs(tmp_path, inventory=h200, cpu_only=True, force=True)
    assert all(j.runs and not j.devices for j in forced.values())  # today's --force

    steps = load_tier(SAMPLE, Tier.READY, Platform.ROCM)
    two = next(s for s in steps if s.hardware == "mi300_2")
    assert (two.cards, two.sku) == (2, "MI300")
    (few,) = plan_step(
        two, 7, sample_options(tmp_path, inventory=gpus(Platform.ROCM, "AMD MI300X"))
    )
    assert few.reason == "needs mi300_2: this host has 1 x AMD MI300X"
    (forced_few,) = plan_step(
        two, 7, sample_options(tmp_path, inventory=gpus(Platform.ROCM, "AMD MI300X"), force=True)
    )
    assert forced_few.runs and forced_few.env["VLLM_CI_EXPECTED_GPU_COUNT"] == "2"
    assert (forced_few.devices, forced_few.where) == (
        (0,),
        "mi300_2 on AMD MI300X (--force: 1 of 2)",
    )


def test_rocm_job_gets_its_cards_natively_and_in_a_container(tmp_path: Path) -> None:
    steps = load_tier(SAMPLE, Tier.READY, Platform.ROCM)
    two = next(s for s in steps if s.hardware == "mi300_2")
    mi300 = gpus(Platform.ROCM, *["AMD Instinct MI300X"] * 4)
    (native,) = plan_step(two, 7, sample_options(tmp_path, inventory=mi300, native=True))
    assert native.env["HIP_VISIBLE_DEVICES"] == "0,1"
    assert native.env["VLLM_CI_EXPECTED_GPU_COUNT"] == "2"
    (boxed,) = plan_step(two, 7, sample_options(tmp_path, inventory=mi300))
    assert boxed.command is not None and "HIP_VISIBLE_DEVICES" not in boxed.env
    docker = list(boxed.command.argv)
    assert "HIP_VISIBLE_DEVICES=0,1" in docker and "/dev/kfd" in docker
    assert boxed.env["HF_HOME"] == "/tmp/.cache/huggingface"  # the container user's to create
    assert (boxed.where, boxed.devices) == ("mi300_2 on AMD Instinct MI300X", (0, 1))


def test_tier_list_and_native_run_with_a_gpu_here(
    tmp_path: Path,
    standins: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A fake nvidia-smi: the sample's CUDA GPU steps run natively without --force."""
    standins.add("nvidia-smi", "echo '0, NVIDIA H200, 143771'")
    repo = tmp_path / "sample"
    copy_tracked(SAMPLE, repo)
    monkeypatch.setenv("PATH", standins.env()["PATH"])
    monkeypatch.setenv("BUILDKITE_COMMIT", "gpu-host")
    monkeypatch.delenv("BUILDKITE", raising=False)
    args = ["--platform", "cuda", "--repo", str(repo), "--native"]
    assert run("ready", [*args, "--list"]) == 0
    out = capfd.readouterr().out
    assert "hardware: l4_1 — runs here (l4_1 on NVIDIA H200)" in out
    assert "hardware: h100_1 — runs here (h100_1 on NVIDIA H200)" in out
    assert run("ready", [*args, "--results", str(tmp_path / "r")]) == 0
    err = capfd.readouterr().err
    assert "5 of 5 jobs run here" in err
    # What a job ran on is a column of its own: the step column stays aligned.
    summary = [line for line in err.splitlines() if line.startswith("passed ")]
    assert len(summary) == 5 and len({line.index("  [cuda] ") for line in summary}) == 1
    assert "passed          l4_1 on NVIDIA H200    [cuda] Engine · Single-GPU Test  exit 0" in err
    assert "passed          h100_1 on NVIDIA H200  [cuda] E2E · Sample Model Test  exit 0" in err
    assert ["--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"] in (
        standins.argvs("nvidia-smi")
    )
    assert run("ready", [*args, "--cpu-only", "--list"]) == 0
    assert "hardware: h100_1 — needs h100_1\n" in capfd.readouterr().out


# ------------------------------------------- issue 32 items 12, 24: refused before a job runs

CYCLE_TIER = """\
steps:
  - label: "Waits for B"
    key: a
    depends_on: b
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands: ["true"]
  - label: "Waits for A"
    key: b
    depends_on: [a, amd-build]
    agent_pool: mi300_1
    mirror_hardwares: [amdproduction]
    grade: Blocking
    commands: ["true"]
"""


def test_a_depends_on_cycle_stops_the_tier_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both blocking steps were "not run" (each waits for the other) and the tier exited 0."""
    from tests.tiers_fixture import fixture_repo

    repo = fixture_repo(tmp_path / "target")
    (repo / ".buildkite/amd/test-amd-ready.yml").write_text(CYCLE_TIER)
    monkeypatch.setenv("BUILDKITE_COMMIT", "fixture")
    results = tmp_path / "results"
    with pytest.raises(Failure) as caught:
        run(
            "ready",
            ["--platform", "rocm", "--repo", str(repo), "--native", "--results", str(results)],
        )
    assert caught.value.problems == (
        ".buildkite/amd/test-amd-ready.yml: depends_on cycle: a → b → a "
        "(steps 'Waits for B' (key 'a'), 'Waits for A' (key 'b')); none of them can start",
    )
    assert caught.value.code == 1
    assert not results.exists()  # refused before the first write


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("    key: a\n    depends_on: a\n", "step 'Waits for B' (key 'a'): depends_on 'a', itself"),
        ("    key: b\n", "step 'Waits for A' (key 'b'): key 'b' is already the key of"),
        ("    if: build.branch ==\n", "step 'Waits for B': `if` does not parse"),
        ("    parallelism: 1000000000\n", "step 'Waits for B': `parallelism` must be a whole"),
        ("    parallelism: 0\n", "step 'Waits for B': `parallelism` must be a whole"),
        # A 400-digit timeout was an OverflowError (minutes to seconds) when planned.
        ("    timeout_in_minutes: 1" + "0" * 400 + "\n", "step 'Waits for B': `timeout_in_"),
        # A failing job was rerun `limit` times.
        (
            "    retry:\n      automatic:\n        - exit_status: 1\n          limit: 1000000000\n",
            "step 'Waits for B': `retry.automatic` `limit` must be a whole number of retries",
        ),
    ],
)
def test_what_the_uploader_or_buildkite_refuses_is_refused_by_the_tier(
    tmp_path: Path, extra: str, problem: str
) -> None:
    """`parallelism: 1000000000` passed, and `tier --native --force` planned 10**9 jobs
    until it ran out of memory."""
    (tmp_path / ".buildkite" / "amd").mkdir(parents=True)
    first, second = CYCLE_TIER.split('  - label: "Waits for A"\n')
    first = first.replace("    key: a\n    depends_on: b\n", "")
    text = first + extra + '  - label: "Waits for A"\n' + second.replace("[a, amd-build]", "x")
    (tmp_path / ".buildkite" / "amd" / "test-amd-ready.yml").write_text(text)
    with pytest.raises(Failure) as caught:
        load_tier(tmp_path, Tier.READY, Platform.ROCM, {})
    (line,) = caught.value.problems
    assert line.startswith(f".buildkite/amd/test-amd-ready.yml: {problem}"), line
    assert caught.value.code == 1
