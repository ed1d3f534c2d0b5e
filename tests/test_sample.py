"""The embedded sample (examples/omni-sample): its tests, YAMLs, markers and Dockerfiles.

The sample is the fixture every end-to-end test points `--repo` at, so these
tests pin the properties the other tasks rely on, reading the facts about
vLLM-Omni (markers, YAML shapes) from ../shared at test time.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import BASE_IMAGE, ROOT, SAMPLE, SHARED, need_shared
from tests.inproc import run_inproc

BUILDKITE = SAMPLE / ".buildkite"
DOCKER = SAMPLE / "docker"
SAMPLE_YAMLS = sorted(BUILDKITE.rglob("*.yml"))
REQUIRED_YAMLS = [
    "amd/test-amd-ready.yml",
    "amd/test-amd-merge.yml",
    "amd/test-amd-nightly.yml",
    "cuda/test-ready.yml",
    "cuda/test-merge.yml",
    "cuda/bootstrap-upload-steps.yml",
    "npu/test-npu-ready.yml",
    "npu/bootstrap-upload-steps.yml",
    "intel/pipeline-intel.yml",
    "common/ci_mirror_hardwares.yml",
    "common/ci_source_file_dependencies.yml",
]
KEY_INPUTS_FIXED = ("pyproject.toml", "setup.py", "tools/install_torchcodec_rocm.sh")


def sample_pytest(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run the sample's tests as a user would, in a separate interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def leaf_steps(steps: list[Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for step in steps:
        if isinstance(step, dict) and isinstance(step.get("steps"), list):
            found += leaf_steps(step["steps"])
        elif isinstance(step, dict):
            found.append(step)
    return found


def commands(step: dict[str, Any]) -> list[str]:
    body = step.get("commands", step.get("command", []))
    return [body] if isinstance(body, str) else [str(c) for c in body]


def marker_exprs(step: dict[str, Any]) -> list[str]:
    text = "\n".join(commands(step))
    return [a or b for a, b in re.findall(r"-m\s+(?:'([^']*)'|\"([^\"]*)\")", text)]


def load(rel: str) -> Any:
    return yaml.safe_load((BUILDKITE / rel).read_text())


# --------------------------------------------------------------------------- its tests


def test_core_model_cpu_tests_pass_from_the_project_root() -> None:
    result = sample_pytest("examples/omni-sample/tests", "-m", "core_model and cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    passed = int(re.search(r"(\d+) passed", result.stdout).group(1))  # type: ignore[union-attr]
    assert passed >= 10
    assert "failed" not in result.stdout


def test_advanced_model_cpu_test_fails_on_purpose() -> None:
    result = sample_pytest("examples/omni-sample/tests", "-m", "advanced_model and cpu")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout
    assert "deliberate failure" in result.stdout


def test_gpu_tests_are_skipped_without_a_gpu() -> None:
    result = sample_pytest("tests", "-m", "core_model and gpu", "-rs", cwd=SAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" not in result.stdout
    skipped = re.findall(r"SKIPPED \[\d+\] .*needs (\d+) (\w+) card", result.stdout)
    assert {platform for _, platform in skipped} == {"rocm", "cuda", "xpu"}


def collected(*args: str) -> list[str]:
    result = sample_pytest("tests", "--collect-only", "-q", *args, cwd=SAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_shards_partition_the_selected_tests() -> None:
    expr = ("-m", "core_model and cpu and not omni")
    everything = collected("tests/model_executor", *expr)
    shards = [
        collected("tests/model_executor", *expr, "--num-shards=2", f"--shard-id={i}")
        for i in range(2)
    ]
    assert all(shards), "both shards must get tests"
    assert sorted(shards[0] + shards[1]) == sorted(everything)
    assert not set(shards[0]) & set(shards[1])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--num-shards=2", "--shard-id=2"), "--shard-id must be in [0, 2), got 2"),
        (("--num-shards=0",), "--num-shards must be at least 1, got 0"),
        (("--num-shards=",), "invalid int value"),
        (("--run-level=weekly",), "invalid choice: 'weekly'"),
    ],
)
def test_bad_options_are_usage_errors(args: tuple[str, ...], message: str) -> None:
    result = sample_pytest("tests", *args, cwd=SAMPLE)
    assert result.returncode == 4, result.stdout + result.stderr
    assert message in result.stderr


def test_run_level_defaults_to_core_model() -> None:
    result = sample_pytest("tests", "-m", "omni and cpu", "-v", cwd=SAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "run-level=core_model" in result.stdout


def test_no_test_file_uses_a_direct_sku_mark() -> None:
    skus = {"H100", "L4", "B200", "MI325", "B60", "A2", "A3", "A5", "310P"}
    for path in (SAMPLE / "tests").rglob("test_*.py"):
        for sku in skus:
            assert f"mark.{sku}" not in path.read_text(), f"{path}: direct SKU mark {sku}"


# --------------------------------------------------------------------------- markers


def shared_marker_tags() -> dict[str, set[str]]:
    """Marker → tags, from the registry facts in ../shared/vllm-omni/MARKERS.md."""
    table: dict[str, set[str]] = {}
    text = need_shared(SHARED / "vllm-omni" / "MARKERS.md").read_text()
    for name, tags in re.findall(r"^\| (\w+) \| [^|]+ \| ([^|]*) \|$", text, re.MULTILINE):
        table.setdefault(name, set(re.findall(r"\[([\w-]+)\]", tags)))
    return table


def sample_marker_tags() -> dict[str, set[str]]:
    import tomllib

    markers = tomllib.loads((SAMPLE / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"
    ]["markers"]
    return {
        line.split(":", 1)[0]: set(re.findall(r"\[([\w-]+)\]", line.split(":", 1)[1]))
        for line in markers
    }


def test_markers_carry_the_same_tags_as_vllm_omni() -> None:
    ours, theirs = sample_marker_tags(), shared_marker_tags()
    assert len(theirs) > 30, "MARKERS.md table not parsed"
    shared_names = [name for name in ours if name in theirs]
    assert len(shared_names) >= 20
    for name in shared_names:
        assert ours[name] == theirs[name], name
    # A5 and 310P: registered by vLLM-Omni PR #6875 (MARKERS.md, gaps).
    assert ours["A5"] == ours["310P"] == {"hardware-resource", "npu"}
    tags = set().union(*ours.values())
    assert {"ci-level", "hardware-platform", "gpu", "hardware-resource", "hardware-cards"} <= tags


def test_every_marker_used_in_the_yamls_is_registered() -> None:
    registered = set(sample_marker_tags())
    for path in SAMPLE_YAMLS:
        for step in leaf_steps((yaml.safe_load(path.read_text()) or {}).get("steps") or []):
            for expr in marker_exprs(step):
                words = set(re.findall(r"[A-Za-z0-9_]+", expr)) - {"and", "or", "not"}
                assert words <= registered, f"{path.name}: {expr}"


# --------------------------------------------------------------------------- YAMLs


def test_every_required_yaml_exists_and_every_yaml_parses() -> None:
    present = {str(p.relative_to(BUILDKITE)) for p in SAMPLE_YAMLS}
    assert set(REQUIRED_YAMLS) <= present
    for path in SAMPLE_YAMLS:
        assert isinstance(yaml.safe_load(path.read_text()), dict), path


def test_amd_ready_has_the_lanes_the_tier_session_needs() -> None:
    steps = leaf_steps(load("amd/test-amd-ready.yml")["steps"])
    assert all(s["depends_on"] == "amd-build" for s in steps)
    assert all(s["mirror_hardwares"] == ["amdproduction"] for s in steps)
    simple = [s for s in steps if s["label"].startswith("Simple")]
    blocking_cpu = [s for s in simple if s["grade"] == "Blocking"]
    assert len(blocking_cpu) >= 3
    for step in simple:
        assert all(re.search(r"\bcpu\b", e) for e in marker_exprs(step)), step["label"]
    (sharded,) = [s for s in steps if s.get("parallelism") == 2]
    text = "\n".join(commands(sharded))
    assert "--num-shards" in text and "$$BUILDKITE_PARALLEL_JOB_COUNT" in text
    assert "--shard-id" in text and '$$BUILDKITE_PARALLEL_JOB"' in text
    (quarantined,) = [s for s in steps if s["grade"] == "NonBlocking"]
    assert marker_exprs(quarantined) == ["advanced_model and cpu"]
    gpu = [s for s in steps if s["agent_pool"] == "mi300_2"]
    assert gpu and all("cpu" not in e for s in gpu for e in marker_exprs(s))


def test_amd_merge_and_nightly_are_amd_suites() -> None:
    for rel, level in (
        ("amd/test-amd-merge.yml", "advanced_model"),
        ("amd/test-amd-nightly.yml", "full_model"),
    ):
        doc = load(rel)
        assert doc["env"]["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
        steps = leaf_steps(doc["steps"])
        assert all({"agent_pool", "grade", "depends_on"} <= set(s) for s in steps), rel
        assert any(level in e for s in steps for e in marker_exprs(s)), rel
    nightly = leaf_steps(load("amd/test-amd-nightly.yml")["steps"])
    assert {s["grade"] for s in nightly} == {"NonBlocking"}


def test_registry_keys_and_presets_resolve() -> None:
    deps = load("common/ci_source_file_dependencies.yml")["source_file_dependencies"]
    presets = load("common/ci_mirror_hardwares.yml")["mirror_hardwares"]
    assert deps["source_filter_fallback"], "source_filter_fallback must list paths"
    for rel in ("cuda/test-ready.yml", "cuda/test-merge.yml", "npu/test-npu-ready.yml"):
        for step in leaf_steps(load(rel)["steps"]):
            keys = step.get("source_file_dependencies", [])
            for key in [keys] if isinstance(keys, str) else keys:
                assert key in deps and key != "source_filter_fallback", (rel, key)
            if "mirror_hardwares" in step:
                assert step["mirror_hardwares"] in presets, (rel, step["label"])
    for name in ("l4_1", "l4_2", "l4_4", "h100_1", "b200_1", "a2b3_npu_1", "a3_npu_2"):
        assert name in presets


def test_bootstrap_files_have_the_real_step_keys() -> None:
    cuda = [s["key"] for s in load("cuda/bootstrap-upload-steps.yml")["steps"]]
    assert cuda == ["image-build", "upload-ready-pipeline", "upload-merge-pipeline"]
    npu = [s["key"] for s in load("npu/bootstrap-upload-steps.yml")["steps"]]
    assert npu == [
        "image-build-a2",
        "image-build-a3",
        "image-build-a5",
        "image-build-310p",
        "upload-ready-pipeline",
    ]
    intel = leaf_steps(load("intel/pipeline-intel.yml")["steps"])
    assert [s["label"] for s in intel] == ["Intel: XPU Test"]
    assert intel[0]["env"]["VLLM_VERSION"].startswith("v")


def test_every_test_path_in_the_yamls_exists_in_the_sample() -> None:
    for path in SAMPLE_YAMLS:
        for step in leaf_steps((yaml.safe_load(path.read_text()) or {}).get("steps") or []):
            for token in re.findall(r"(?<![\w=/-])tests/[\w./-]*", "\n".join(commands(step))):
                assert (SAMPLE / token).exists(), f"{path.name}: {token}"


def test_lint_pipelines_accepts_the_sample() -> None:
    result = run_inproc("lint-pipelines", "--repo", str(SAMPLE), cwd=ROOT)
    assert result.code == 0, result.stdout + result.stderr
    assert "0 problem(s)" in result.stdout


# --------------------------------------------------------------------------- packaging


def test_requirements_sort_differently_in_c_and_locale_order() -> None:
    names = sorted(p.name for p in (SAMPLE / "requirements").glob("*.txt"))
    assert len(names) >= 3
    c_order = sorted(names, key=lambda n: n.encode())
    # glibc's en_US.UTF-8 collation ignores punctuation and case at first level.
    locale_order = sorted(names, key=lambda n: re.sub(r"[^a-z0-9]", "", n.lower()))
    assert c_order != locale_order


def dockerfile(name: str) -> str:
    return (DOCKER / name).read_text()


def stages(text: str) -> list[tuple[str, str, list[str]]]:
    """(from, name, instructions) per stage."""
    found: list[tuple[str, str, list[str]]] = []
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            parts = line.split()
            found.append((parts[1], parts[3] if len(parts) > 3 else "", []))
        elif found:
            found[-1][2].append(line)
    return found


def test_rocm_deps_stage_copies_only_the_cache_key_inputs_first() -> None:
    (deps_from, deps_name, deps), (test_from, test_name, test) = stages(
        dockerfile("Dockerfile.rocm")
    )
    assert (deps_from, deps_name) == ("${BASE_IMAGE}", "deps")
    assert (test_from, test_name) == ("deps", "test")
    first_run = next(i for i, line in enumerate(deps) if line.startswith("RUN"))
    copied = " ".join(line for line in deps[:first_run] if line.startswith("COPY"))
    for needed in (*KEY_INPUTS_FIXED, "requirements/"):
        assert needed in copied
    assert all(not line.startswith(("COPY", "ADD")) for line in deps[first_run:])
    runs = [line for line in deps if line.startswith("RUN")]
    assert len(runs) >= 3
    assert not any(re.search(r"\bsleep\b", line) for line in runs)
    assert "wheelhouse" not in " ".join(deps)
    assert test[0] == "COPY . ."
    assert "ARG BASE_IMAGE=" + BASE_IMAGE in dockerfile("Dockerfile.rocm")
    ignore = (DOCKER / "Dockerfile.rocm.dockerignore").read_text().split()
    assert ".git" in ignore and not any("wheelhouse" in entry for entry in ignore)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        (
            "Dockerfile.rocm",
            (
                "BASE_IMAGE",
                "USE_NIGHTLY_BUILD",
                "VLLM_VERSION_OR_COMMIT_HASH",
                "ARG_PYTORCH_ROCM_ARCH",
                "COMMON_WORKDIR",
            ),
        ),
        ("Dockerfile.ci", ("VLLM_BASE_IMAGE", "VLLM_BASE_TAG", "APP_DIR")),
        (
            "Dockerfile.npu.ci",
            ("VLLM_ASCEND_IMAGE", "VLLM_ASCEND_VERSION", "VLLM_ASCEND_DEVICE_SUFFIX", "APP_DIR"),
        ),
        ("Dockerfile.xpu", ("VLLM_BASE_IMAGE", "VLLM_VERSION", "VLLM_BASE")),
    ],
)
def test_dockerfiles_keep_the_real_arg_names_and_a_local_base(
    name: str, args: tuple[str, ...]
) -> None:
    text = dockerfile(name)
    declared = re.findall(r"^ARG (\w+)(?:=(.*))?$", text, re.MULTILINE)
    assert set(args) <= {arg for arg, _ in declared}
    defaults = {arg: value for arg, value in declared if value}
    # Expand the first FROM with the defaults: it must be the offline base image.
    base = stages(text)[0][0]
    for _ in range(3):
        base = re.sub(r"\$\{(\w+)\}", lambda m: defaults.get(m.group(1), ""), base)
    assert base == BASE_IMAGE
    assert "tools/install_wheelhouse.sh" in text


def test_xpu_image_is_built_from_vllm_base() -> None:
    assert stages(dockerfile("Dockerfile.xpu"))[0][:2] == ("${VLLM_BASE}", "vllm-omni")
    assert stages(dockerfile("Dockerfile.xpu"))[-1][1] == "vllm-omni-openai"
