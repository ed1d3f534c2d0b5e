"""Cost of `plan` for all four platforms on the corpus repo, against a YAML floor.

Builds a temporary git repo from the corpus (../shared/vllm-omni/.buildkite/,
the generated pyproject.toml, `diffusion_joy_image_accuracy` registered; see
tests/corpus.py), commits one model's change on a feature branch, then plans
rocm, cuda, npu and xpu with every tier label (so every tier YAML is read and
rendered): diff resolution (git), skip-ci, AMD suites, bootstrap gates, every
child render. Each round starts with empty caches. In the same run it measures
the floor: loading every YAML file the plan reads with `yaml.CSafeLoader`.
Goal: the plan takes at most 5x the floor.

    python benchmarks/plan.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from ci import schema, skipci  # noqa: E402
from ci.plan.inputs import parse_inputs  # noqa: E402
from ci.plan.make import make_plan  # noqa: E402
from tests.corpus import make_corpus  # noqa: E402
from tests.gitrepo import GitRepo  # noqa: E402

GOAL = 5.0
LABELS = "ready,merge-test,nightly-test,weekly-test"
MODEL = "vllm_omni/model_executor/models/qwen3_omni/model.py"
# Every YAML the plan reads for those labels.
READS = (
    ".buildkite/amd/test-amd-ready.yml",
    ".buildkite/amd/test-amd-merge.yml",
    ".buildkite/amd/test-amd-nightly.yml",
    ".buildkite/cuda/bootstrap-upload-steps.yml",
    ".buildkite/cuda/test-ready.yml",
    ".buildkite/cuda/test-merge.yml",
    ".buildkite/cuda/test-nightly.yml",
    ".buildkite/cuda/test-weekly.yml",
    ".buildkite/npu/bootstrap-upload-steps.yml",
    ".buildkite/npu/test-npu-ready.yml",
    ".buildkite/npu/test-npu-nightly.yml",
    ".buildkite/intel/pipeline-intel.yml",
    ".buildkite/common/ci_source_file_dependencies.yml",
    ".buildkite/common/ci_mirror_hardwares.yml",
)


def corpus_repo(tmp: Path) -> Path:
    repo = GitRepo.create(tmp / "omni")
    make_corpus(repo.path)
    repo.write(MODEL, "class Model:\n    pass\n")
    repo.commit("corpus")
    repo.push("main")
    repo.branch("feature")
    repo.commit_files({MODEL: "class Model:\n    size = 2\n"}, "one model")
    return repo.path


def plan_once(repo: Path, head: str = "") -> float:
    skipci.clear_cache()
    schema.clear_cache()
    started = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):
        plan = make_plan(parse_inputs(repo=str(repo), labels=LABELS, head=head))
    elapsed = time.perf_counter() - started
    assert all(p.status == "run" for p in plan.platforms), [p.errors for p in plan.platforms]
    return elapsed


def floor_once(repo: Path) -> float:
    started = time.perf_counter()
    for rel in READS:
        yaml.load((repo / rel).read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="plan-bench-") as tmp:
        repo = corpus_repo(Path(tmp))
        plan_once(repo)  # warm imports (rich is not imported: no table is printed)
        floor_once(repo)
        sha = GitRepo(repo).sha()
        plans: list[float] = []
        at_sha: list[float] = []
        floors: list[float] = []
        for _ in range(args.rounds):  # interleaved: a busy machine slows all alike
            plans.append(plan_once(repo))
            at_sha.append(plan_once(repo, head=sha))
            floors.append(floor_once(repo))
    plan = statistics.median(plans)
    archived = statistics.median(at_sha)
    floor = statistics.median(floors)
    ratio = plan / floor
    print(f"plan (rocm, cuda, npu, xpu; {LABELS}): {plan * 1000:.1f} ms (median of {args.rounds})")
    print(
        f"plan --head <sha> (files read through git archive): {archived * 1000:.1f} ms "
        f"({archived / floor:.2f}x)"
    )
    print(f"floor (CSafeLoader over the {len(READS)} YAML files it reads): {floor * 1000:.1f} ms")
    print(f"ratio: {ratio:.2f}x (goal <= {GOAL:.0f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
