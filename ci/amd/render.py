"""The AMD test pipeline, built as data (replaces test-template-amd-omni.j2 + minijinja).

Each test step gets the label `<pool>: <label>`, the queue `amd_<pool>`,
`depends_on: amd-build`, the native Kubernetes pod spec and the runner command;
docs/differences.md ("AMD render") says where we differ from the template.
"""

from __future__ import annotations

import re
from typing import Any

from ci.errors import Failure
from ci.pipeline import model
from ci.pipeline.commands import step_commands  # a string or a list of strings, else exit 1

IMAGE_REGISTRY = "rocm/vllm-omni"
IMAGE = f"{IMAGE_REGISTRY}:$BUILDKITE_COMMIT"
WORKING_DIR = "/app/vllm-omni"
DEFAULT_POOL = "mi300_1"
BUILD_KEY = "amd-build"
RUN_TESTS = "vllm-omni-ci run-tests --platform rocm"
BUILD_IMAGE = "vllm-omni-ci build-image --platform rocm"
HF_HOME = "/home/buildkite-agent/huggingface"


def gpu_count(pool: str, label: str) -> int:
    """The card count is the pool's numeric suffix (`mi300_4` → 4)."""
    if not (match := re.search(r"_(\d+)$", pool)):
        raise Failure(
            f"step {label!r}: agent_pool {pool!r} must end in _<gpu count> (e.g. mi300_1)"
        )
    return int(match.group(1))


def image_build_group() -> model.Document:
    return {
        "group": ":docker: AMD image",
        "steps": [
            {
                "label": "AMD: :docker: build image",
                "key": BUILD_KEY,
                "depends_on": None,
                "soft_fail": False,
                "agents": {"queue": "cpu_queue_premerge"},
                "commands": [BUILD_IMAGE],
                "env": {
                    "DOCKER_BUILDKIT": "1",
                    "PYTORCH_ROCM_ARCH": "gfx942",
                    "ROCM_CI_IMAGE_REGISTRY": IMAGE_REGISTRY,
                },
                "retry": {"automatic": [{"exit_status": s, "limit": 1} for s in (-1, -10, 1)]},
            }
        ],
    }


# Job env keys the pod's container does not get (it gets the rest, in the same order).
_JOB_ONLY = {
    "VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE",
    "HF_HUB_DOWNLOAD_TIMEOUT",
    "HF_HUB_ETAG_TIMEOUT",
}


def _pod_spec(gpus: int) -> model.Document:
    container = {
        "name": "container-0",
        "image": IMAGE,
        "imagePullPolicy": "Always",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["IPC_LOCK"]},
        },
        "resources": {kind: {"amd.com/gpu": str(gpus)} for kind in ("limits", "requests")},
        "volumeMounts": [{"name": "devshm", "mountPath": "/dev/shm"}],
        "env": [{"name": k, "value": v} for k, v in _job_env(gpus).items() if k not in _JOB_ONLY],
    }
    return {
        "automountServiceAccountToken": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "imagePullSecrets": [{"name": "docker-config"}],
        "containers": [container],
        "volumes": [{"name": "devshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}],
    }


def _job_env(gpus: int) -> dict[str, str]:
    return {
        "AMD_CI_RUNTIME": "native",
        "NATIVE_CI": "true",
        "VLLM_CI_DOCKER_DISABLED": "1",
        "VLLM_CI_EXPECTED_GPU_COUNT": str(gpus),
        "VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE": "1",
        "HF_HOME": HF_HOME,
        "HF_HUB_DOWNLOAD_TIMEOUT": "300",
        "HF_HUB_ETAG_TIMEOUT": "60",
        "MIOPEN_DEBUG_CONV_DIRECT": "0",
        "MIOPEN_DEBUG_CONV_GEMM": "0",
        "VLLM_ROCM_USE_AITER": "0",
        "PYTORCH_ROCM_ARCH": "",
    }


def _quote(value: Any) -> str:
    """`"value"` for an export line (`"` and `\\` escaped); `$` is left to Buildkite and the job."""
    text = str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_commands(step: model.Document, suite_env: model.Document, pool: str) -> str:
    """The TEST_COMMANDS block the runner executes: `cd`, the suite's then the step's
    exports, `pip uninstall -y amd-aiter` on mi250 pools, then the step's commands."""
    lines = [f"(command rocm-smi || true) && cd {step.get('working_dir') or WORKING_DIR}"]
    lines += [f"export {k}={_quote(v)}" for k, v in suite_env.items()]
    lines += [f"export {k}={_quote(v)}" for k, v in (step.get("env") or {}).items()]
    if "mi250" in pool:
        lines.append("python3 -m pip uninstall -y amd-aiter")
    lines.append("\n".join(step_commands(step)).strip())
    return "\n".join(lines)


def render_step(step: model.Document, suite_env: model.Document) -> model.Document:
    label = str(step.get("label", ""))
    # No pool: the template's queue default, amd_mi300_1, for the whole step
    # (label prefix and GPU count too, which the template left empty).
    pool = str(step.get("agent_pool") or DEFAULT_POOL)
    gpus = gpu_count(pool, label)
    env = _job_env(gpus)
    env.update({str(k): str(v) for k, v in (step.get("env") or {}).items()})
    env["TEST_COMMANDS"] = test_commands(step, suite_env, pool)
    out: model.Document = {
        "label": f"{pool}: {label}",
        "depends_on": BUILD_KEY,
        "agents": {"queue": f"amd_{pool}"},
        "plugins": [{"kubernetes": {"podSpecPatch": _pod_spec(gpus)}}],
        "command": RUN_TESTS,
        "env": env,
        "priority": 100,
    }
    if step.get("parallelism"):
        out["parallelism"] = step["parallelism"]
    if step.get("artifact_paths"):
        out["artifact_paths"] = [str(p) for p in step["artifact_paths"]]
    if retry := (step.get("retry") or {}).get("automatic"):
        rules = [r for r in (retry if isinstance(retry, list) else [retry]) if isinstance(r, dict)]
        kept = [{k: r[k] for k in ("exit_status", "limit") if k in r} for r in rules]
        out["retry"] = {"automatic": kept}
    if step.get("timeout_in_minutes"):
        out["timeout_in_minutes"] = step["timeout_in_minutes"]
    out["soft_fail"] = step.get("grade") != "Blocking"
    return out


def mirror_values(steps: list[Any]) -> set[str]:
    """Every `mirror_hardwares` value the suites use: what AMD_MIRROR_HW can select."""
    leaves = model.leaves(model.nodes(steps))
    return {str(v) for step, _ in leaves for v in step.get("mirror_hardwares") or []}


def render_pipeline(
    env: model.Document, steps: list[Any], mirror_hw: str = "amdproduction"
) -> tuple[model.Document, list[str], list[str]]:
    """The pipeline, the labels the mirror filter dropped, and the groups it left empty, which
    are dropped (Buildkite rejects them). A group keeps only `group` and `depends_on`, as the
    template did."""
    dropped: list[str] = []
    empty: list[str] = []

    def step(entry: model.Step, _outer: object) -> model.Step | None:
        if mirror_hw in (entry.get("mirror_hardwares") or []):
            return model.Step(render_step(dict(entry.fields), env))
        dropped.append(str(entry.get("label", "")))
        return None

    def group(entry: model.Group, _outer: object) -> model.Group:
        fields = {"group": str(entry.get("group"))}
        if entry.get("depends_on"):
            fields["depends_on"] = entry.get("depends_on")
        return model.Group(fields, entry.steps)

    suites = [n for n in model.nodes(steps) if not isinstance(n, model.Shorthand)]
    kept = model.prune(
        suites, step, on_group=group, on_empty=lambda g, _outer: empty.append(str(g.get("group")))
    )
    pipeline: model.Document = {}
    if env:
        pipeline["env"] = {str(k): str(v) for k, v in env.items()}
    pipeline["steps"] = [image_build_group(), *model.emit_nodes(kept)]
    return pipeline, dropped, empty
