"""`bootstrap --platform cuda|npu|xpu`: spec §4 flows and the F-row golden scenarios (§5.7).

Everything runs on real git repositories in temp dirs holding the real vLLM-Omni
`.buildkite/` corpus (../shared, copied at test time) or the sample repo, with a
recording `buildkite-agent` stand-in that also keeps what it was asked to upload.

What a build does is read back the way Buildkite would: each step's `if` is
evaluated with `ci.pipeline.ifexpr` against the build's branch, PR labels and
env, and each upload step that runs is executed as emitted
(`vllm-omni-ci upload-pipeline … --scope auto`) and compared with the scope
the spec's table gives (§4.4).
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci import skipci
from ci.images import variants
from ci.pipeline import bootstrap_mode, ifexpr, model
from ci.pipeline import scope as scopes
from ci.pipeline.bootstrap_mode import BootstrapPlatform
from ci.schema import schema_problems
from tests.conftest import ROOT, SAMPLE, StandIns, need_shared
from tests.corpus import make_corpus
from tests.gitrepo import GitRepo, buildkite_env
from tests.inproc import run_inproc
from tests.test_bootstrap_mode import wrapped

TIERS = ("ready", "merge", "nightly", "weekly")
KIND_FILES: dict[str, dict[str, str | None]] = {
    "docs": {"docs/a.md": "# doc\n"},
    "code": {"vllm_omni/model.py": "x = 2\n"},
    "cuda-ready-yaml": {".buildkite/cuda/test-ready.yml": None},
    "cuda-merge-yaml": {".buildkite/cuda/test-merge.yml": None},
    "cuda-nightly-yaml": {".buildkite/cuda/test-nightly.yml": None},
    "npu-ready-yaml": {".buildkite/npu/test-npu-ready.yml": None},
}
SKIP_ANNOTATION = ":memo: CI skipped — docs or pytest skip-mark changes only"


def cli_env(values: Mapping[str, str] | None = None, **more: str) -> dict[str, str]:
    # PYTHONPATH: run this checkout's code even if the editable install points elsewhere.
    env = buildkite_env(None, **{**(values or {}), **more})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(scope="module")
def corpus_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, dict[str, str]]:
    """The real corpus on `main` (pushed), and one commit per diff kind on top of it."""
    path = make_corpus(tmp_path_factory.mktemp("bootstraps") / "omni")
    repo = GitRepo.create(path)
    repo.write("vllm_omni/model.py", "x = 1\n")
    repo.commit("base")
    repo.push("main")
    shas: dict[str, str] = {}
    for kind, files in KIND_FILES.items():
        repo.branch(kind)
        for rel, text in files.items():
            current = (path / rel).read_text() if (path / rel).exists() else ""
            repo.write(rel, text if text is not None else current + "# touched\n")
        shas[kind] = repo.commit(kind)
        repo.git("checkout", "-q", "main")
    return repo, shas


def build_env(kind_sha: str, build: str) -> tuple[str, frozenset[str], dict[str, str]]:
    """(branch, labels, env) of one build: `pr:<label>` / `pr:none` / `main[:<SCHEDULE>]`."""
    if build.startswith("pr:"):
        label = build[3:]
        labels = frozenset() if label == "none" else frozenset({label})
        env = dict(
            BUILDKITE_BRANCH="feature",
            BUILDKITE_PULL_REQUEST="7",
            BUILDKITE_PULL_REQUEST_BASE_BRANCH="main",
            BUILDKITE_COMMIT=kind_sha,
        )
        return "feature", labels, env
    env = dict(BUILDKITE_BRANCH="main", BUILDKITE_PULL_REQUEST="false", BUILDKITE_COMMIT=kind_sha)
    if ":" in build:
        env[build.split(":", 1)[1]] = "1"
    return "main", frozenset(), env


def leaves(pipeline: Mapping[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(steps: list[Any]) -> None:
        for step in steps:
            if isinstance(step, dict) and isinstance(step.get("steps"), list):
                walk(step["steps"])
            elif isinstance(step, dict):
                found.append(step)

    walk(list(pipeline["steps"]))
    return found


def runs(step: Mapping[str, Any], ctx: ifexpr.Context) -> bool:
    condition = step.get("if")
    if condition is None:
        return True
    result = ifexpr.check(str(condition), ctx)
    assert result is not None, condition
    return result


def uploaded_path(step: Mapping[str, Any]) -> str:
    (command,) = step["commands"]
    words = shlex.split(command)
    assert words[:2] == ["vllm-omni-ci", "upload-pipeline"], command
    assert words[-3:] == ["--upload", "--scope", "auto"], command
    return words[2]


def outcome(
    pipeline: Mapping[str, Any], branch: str, labels: frozenset[str], env: Mapping[str, str]
) -> tuple[bool, dict[str, str]]:
    """(do the image steps run, {tier: scope} of the uploads that run) on this build."""
    ctx = ifexpr.Context.of(branch, labels, env)
    images = [s for s in leaves(pipeline) if str(s.get("key", "")).startswith("image-build")]
    assert images
    image_runs = {runs(s, ctx) for s in images}
    assert len(image_runs) == 1  # every image step carries the same gate
    uploads: dict[str, str] = {}
    for step in leaves(pipeline):
        key = str(step.get("key", ""))
        if key in bootstrap_mode.UPLOAD_KEYS and runs(step, ctx):
            tier = key.removeprefix("upload-").removesuffix("-pipeline")
            uploads[tier] = scopes.resolve("auto", uploaded_path(step), branch, env)
    return image_runs.pop(), uploads


BUILDS = (
    "pr:ready",
    "pr:merge-test",
    "pr:nightly-test",
    "pr:weekly-test",
    "pr:none",
    "main",
    "main:NIGHTLY",
    "main:WEEKLY",
    "main:NON_CRITICAL",
)
NOTHING: tuple[bool, dict[str, str]] = (False, {})
# Spec §4.4 (normal-CI diff) and §3.2 (skip-all, yaml-gated), per build, as
# (image steps run, {tier: scope of the uploads that run}).
SCHEDULED_CUDA = {
    "main:NIGHTLY": (True, {"nightly": "all"}),
    "main:WEEKLY": (True, {"ready": "e2e", "merge": "e2e", "weekly": "all"}),
    "main:NON_CRITICAL": (True, {"weekly": "all"}),
}
EXPECTED: dict[tuple[str, str], dict[str, tuple[bool, dict[str, str]]]] = {
    ("cuda", "code"): {
        "pr:ready": (True, {"ready": "diff"}),
        "pr:merge-test": (True, {"merge": "diff"}),
        "pr:nightly-test": (True, {"nightly": "diff"}),
        "pr:weekly-test": (True, {"weekly": "diff"}),
        "pr:none": (True, {}),
        "main": (True, {"merge": "diff"}),
        **SCHEDULED_CUDA,
    },
    ("cuda", "docs"): {
        **{b: NOTHING for b in BUILDS if not b.startswith("main:")},
        **SCHEDULED_CUDA,
    },
    ("cuda", "cuda-ready-yaml"): {
        "pr:ready": (True, {"ready": "diff"}),
        "pr:merge-test": NOTHING,
        "pr:nightly-test": (True, {"nightly": "diff"}),
        "pr:weekly-test": (True, {"weekly": "diff"}),
        "pr:none": NOTHING,
        "main": NOTHING,
        "main:NIGHTLY": (True, {"nightly": "all"}),
        "main:WEEKLY": (True, {"ready": "e2e", "weekly": "all"}),
        "main:NON_CRITICAL": (True, {"weekly": "all"}),
    },
    ("cuda", "cuda-merge-yaml"): {
        "pr:ready": NOTHING,
        "pr:merge-test": (True, {"merge": "diff"}),
        "pr:nightly-test": (True, {"nightly": "diff"}),
        "pr:weekly-test": (True, {"weekly": "diff"}),
        "pr:none": NOTHING,
        "main": (True, {"merge": "diff"}),
        "main:NIGHTLY": (True, {"nightly": "all"}),
        "main:WEEKLY": (True, {"merge": "e2e", "weekly": "all"}),
        "main:NON_CRITICAL": (True, {"weekly": "all"}),
    },
    ("cuda", "cuda-nightly-yaml"): {
        "pr:ready": NOTHING,
        "pr:merge-test": NOTHING,
        "pr:nightly-test": (True, {"nightly": "diff"}),
        "pr:weekly-test": (True, {"weekly": "diff"}),
        "pr:none": NOTHING,
        "main": NOTHING,
        "main:NIGHTLY": (True, {"nightly": "all"}),
        "main:WEEKLY": (True, {"weekly": "all"}),
        "main:NON_CRITICAL": (True, {"weekly": "all"}),
    },
    ("npu", "code"): {
        **{b: (True, {}) for b in BUILDS},
        "pr:ready": (True, {"ready": "diff"}),
        "pr:nightly-test": (True, {"nightly": "diff"}),
        "main:NIGHTLY": (True, {"nightly": "all"}),
    },
    ("npu", "docs"): {
        **{b: NOTHING for b in BUILDS},
        "main:NIGHTLY": (True, {"nightly": "all"}),
    },
    ("npu", "cuda-ready-yaml"): {
        **{b: NOTHING for b in BUILDS},
        "pr:nightly-test": (True, {"nightly": "diff"}),
        "main:NIGHTLY": (True, {"nightly": "all"}),
    },
    ("npu", "npu-ready-yaml"): {
        **{b: NOTHING for b in BUILDS},
        "pr:ready": (True, {"ready": "diff"}),
        "pr:nightly-test": (True, {"nightly": "diff"}),
        "main:NIGHTLY": (True, {"nightly": "all"}),
    },
}


# The `if` of every step per diff kind (spec §3.2 table; names expanded by the
# spec's textual rule, each non-bare expression wrapped once more): None = no
# `if` (always runs), absent = omitted. The same on every build: Buildkite,
# not the bootstrap, evaluates branch, labels and schedule env.
CUDA_NORMAL = {
    "image": None,
    "upload-ready-pipeline": "READY_UPLOAD",
    "upload-merge-pipeline": "MERGE_UPLOAD",
    "upload-nightly-pipeline": "NIGHTLY_LABEL",
    "upload-weekly-pipeline": "WEEKLY_LABEL",
}
GATES: dict[tuple[str, str], dict[str, str | None]] = {
    ("cuda", "code"): CUDA_NORMAL,
    ("cuda", "docs"): {
        "image": "(NIGHTLY_MAIN) || (WEEKLY_MAIN)",
        "upload-ready-pipeline": "WEEKLY_E2E",
        "upload-merge-pipeline": "WEEKLY_E2E",
        "upload-nightly-pipeline": "NIGHTLY_MAIN",
        "upload-weekly-pipeline": "WEEKLY_MAIN",
    },
    ("cuda", "cuda-ready-yaml"): {
        "image": "(READY_UPLOAD) || (NIGHTLY_LABEL) || (WEEKLY_LABEL)",
        "upload-ready-pipeline": "READY_UPLOAD",
        "upload-nightly-pipeline": "NIGHTLY_LABEL",
        "upload-weekly-pipeline": "WEEKLY_LABEL",
    },
    ("cuda", "cuda-merge-yaml"): {
        "image": "(MERGE_UPLOAD) || (NIGHTLY_LABEL) || (WEEKLY_LABEL)",
        "upload-merge-pipeline": "MERGE_UPLOAD",
        "upload-nightly-pipeline": "NIGHTLY_LABEL",
        "upload-weekly-pipeline": "WEEKLY_LABEL",
    },
    ("cuda", "cuda-nightly-yaml"): {
        "image": "(NIGHTLY_LABEL) || (WEEKLY_LABEL)",
        "upload-nightly-pipeline": "NIGHTLY_LABEL",
        "upload-weekly-pipeline": "WEEKLY_LABEL",
    },
    ("npu", "code"): {
        "image": None,
        "upload-ready-pipeline": "READY_LABEL",
        "upload-nightly-pipeline": "NIGHTLY_LABEL",
    },
    ("npu", "docs"): {"image": "NIGHTLY_MAIN", "upload-nightly-pipeline": "NIGHTLY_MAIN"},
    ("npu", "cuda-ready-yaml"): {
        "image": "(NIGHTLY_LABEL)",
        "upload-nightly-pipeline": "NIGHTLY_LABEL",
    },
    ("npu", "npu-ready-yaml"): {
        "image": "(READY_LABEL) || (NIGHTLY_LABEL)",
        "upload-ready-pipeline": "READY_LABEL",
        "upload-nightly-pipeline": "NIGHTLY_LABEL",
    },
}


def expected_gates(platform: str, kind: str) -> dict[str, str | None]:
    images = ["image-build"] if platform == "cuda" else [v.step_key for v in variants.VARIANTS]
    table = GATES[platform, kind]
    found = {key: table["image"] for key in images}
    found.update({k: v for k, v in table.items() if k != "image"})
    return {k: None if v is None else wrapped(v) for k, v in found.items()}


@pytest.mark.parametrize(("platform", "kind"), sorted(EXPECTED))
def test_real_bootstrap_files_gates_and_scopes(
    corpus_repo: tuple[GitRepo, dict[str, str]], platform: str, kind: str
) -> None:
    from ci import bootstraps

    repo, shas = corpus_repo
    expected = EXPECTED[platform, kind]
    assert set(expected) == set(BUILDS)
    assert set(GATES) == set(EXPECTED)
    for build in BUILDS:
        branch, labels, env = build_env(shas[kind], build)
        skipci.clear_cache()
        pipeline = bootstraps.plan_pipeline(
            "cuda" if platform == "cuda" else "npu", repo.path, cli_env(env)
        )
        assert schema_problems(pipeline) == [], build
        gates = {s["key"]: s.get("if") for s in leaves(pipeline)}
        assert gates == expected_gates(platform, kind), (platform, kind, build)
        assert outcome(pipeline, branch, labels, env) == expected[build], (platform, kind, build)


def test_upload_pipeline_bootstrap_mode_gives_the_same_gates(
    corpus_repo: tuple[GitRepo, dict[str, str]],
) -> None:
    """`upload-pipeline <bootstrap file>` (gates only) and `bootstrap` agree on every `if`."""
    from ci import bootstraps

    repo, shas = corpus_repo
    for kind in ("docs", "code", "cuda-ready-yaml"):
        env = cli_env(build_env(shas[kind], "pr:ready")[2])
        done = run_inproc(
            "upload-pipeline",
            ".buildkite/cuda/bootstrap-upload-steps.yml",
            "--repo",
            str(repo.path),
            env=env,
        )
        assert done.code == 0, done.stderr
        gates = {s["key"]: s.get("if") for s in leaves(yaml.safe_load(done.stdout))}
        skipci.clear_cache()
        planned = bootstraps.plan_pipeline("cuda", repo.path, env)
        assert gates == {s["key"]: s.get("if") for s in leaves(planned)}


def test_no_bash_in_emitted_steps(corpus_repo: tuple[GitRepo, dict[str, str]]) -> None:
    from ci import bootstraps

    repo, shas = corpus_repo
    env = cli_env(build_env(shas["code"], "main")[2])
    platforms: tuple[BootstrapPlatform, ...] = ("cuda", "npu")
    for platform in platforms:
        skipci.clear_cache()
        pipeline = bootstraps.plan_pipeline(platform, repo.path, env)
        for step in leaves(pipeline):
            assert "command" not in step
            (command,) = step["commands"]
            assert command.startswith("vllm-omni-ci "), command
            for shell in ("bash", "python3", "EXTRA", "if [", "$$"):
                assert shell not in command


def test_npu_image_steps_come_from_the_variant_table(
    corpus_repo: tuple[GitRepo, dict[str, str]],
) -> None:
    from ci import bootstraps

    repo, shas = corpus_repo
    skipci.clear_cache()
    pipeline = bootstraps.plan_pipeline(
        "npu", repo.path, cli_env(build_env(shas["code"], "main")[2])
    )
    images = [s for s in leaves(pipeline) if s["key"].startswith("image-build")]
    assert [s["key"] for s in images] == [v.step_key for v in variants.VARIANTS]
    assert [s["label"] for s in images] == [v.step_label for v in variants.VARIANTS]
    assert [s["commands"] for s in images] == [[v.build_command()] for v in variants.VARIANTS]
    source = yaml.safe_load((repo.path / ".buildkite/npu/bootstrap-upload-steps.yml").read_text())[
        "steps"
    ][0]
    for step in images:
        assert step["agents"] == dict(variants.BUILD_AGENTS)
        assert step["env"] == dict(variants.STEP_ENV)  # no per-step VLLM_IMAGE_TAG
        assert step["plugins"] == source["plugins"]  # the Vault plugin is kept
    for step in leaves(pipeline):
        if step["key"] in bootstrap_mode.UPLOAD_KEYS:
            assert step["depends_on"] == [v.step_key for v in variants.VARIANTS]
    assert "&id" not in yaml.safe_dump(pipeline)


def test_cuda_image_step_builds_with_the_tool(corpus_repo: tuple[GitRepo, dict[str, str]]) -> None:
    from ci import bootstraps

    repo, shas = corpus_repo
    skipci.clear_cache()
    pipeline = bootstraps.plan_pipeline(
        "cuda", repo.path, cli_env(build_env(shas["code"], "main")[2])
    )
    image = leaves(pipeline)[0]
    assert image == {
        "label": ":docker: Build image",
        "key": "image-build",
        "commands": ["vllm-omni-ci build-image --platform cuda"],
        "agents": {"queue": "cpu_queue_premerge"},
    }
    paths = {
        s["key"]: uploaded_path(s)
        for s in leaves(pipeline)
        if s["key"] in bootstrap_mode.UPLOAD_KEYS
    }
    assert paths == {
        "upload-ready-pipeline": ".buildkite/cuda/test-ready.yml",
        "upload-merge-pipeline": ".buildkite/cuda/test-merge.yml",
        "upload-nightly-pipeline": ".buildkite/cuda/test-nightly.yml",
        "upload-weekly-pipeline": ".buildkite/cuda/test-weekly.yml",
    }


# --------------------------------------------------------------------------- F rows, executed


def agent(standins: StandIns, out: Path) -> None:
    """A recording buildkite-agent that keeps each uploaded pipeline (stdin) in `out`."""
    out.mkdir(exist_ok=True)
    standins.add(
        "buildkite-agent",
        f'if [ "$1 $2" = "pipeline upload" ]; then '
        f"n=$(ls {shlex.quote(str(out))} | wc -l); cat > {shlex.quote(str(out))}/$n.yml; fi",
    )


def uploads(out: Path) -> list[dict[str, Any]]:
    files = sorted(out.glob("*.yml"), key=lambda p: int(p.stem))
    return [yaml.safe_load(p.read_text()) for p in files]


def bootstrap_and_run(
    repo: GitRepo,
    platform: str,
    sha: str,
    build: str,
    standins: StandIns,
    tmp_path: Path,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, str]]:
    """Run the bootstrap as Buildkite would, then every upload step whose `if` holds.

    Returns the bootstrap pipeline, {tier: uploaded test pipeline}, {tier: stderr}.
    """
    branch, labels, values = build_env(sha, build)
    env = standins.env(cli_env(values))
    out = tmp_path / f"agent-{platform}-{build.replace(':', '_')}"
    agent(standins, out)
    done = run_inproc("bootstrap", "--platform", platform, env=env, cwd=repo.path)
    assert done.code == 0, done.stderr
    assert done.stdout == ""
    (pipeline,) = uploads(out)
    ctx = ifexpr.Context.of(branch, labels, values)
    tiers: dict[str, dict[str, Any]] = {}
    logs: dict[str, str] = {}
    for step in leaves(pipeline):
        key = str(step.get("key", ""))
        if key not in bootstrap_mode.UPLOAD_KEYS or not runs(step, ctx):
            continue
        before = len(uploads(out))
        words = shlex.split(step["commands"][0])
        child = run_inproc(*words[1:], env=env, cwd=repo.path)
        assert child.code == 0, child.stderr
        tier = key.removeprefix("upload-").removesuffix("-pipeline")
        tiers[tier] = uploads(out)[before]
        logs[tier] = child.stderr
    return pipeline, tiers, logs


def rendered(repo: GitRepo, path: str, flags: list[str], env: Mapping[str, str]) -> dict[str, Any]:
    done = run_inproc("upload-pipeline", path, *flags, env=env, cwd=repo.path)
    assert done.code == 0, done.stderr
    document: dict[str, Any] = yaml.safe_load(done.stdout)
    return document


def test_f1_cuda_nightly_on_main_uploads_everything(
    corpus_repo: tuple[GitRepo, dict[str, str]], standins: StandIns, tmp_path: Path
) -> None:
    repo, shas = corpus_repo
    _, tiers, logs = bootstrap_and_run(
        repo, "cuda", shas["code"], "main:NIGHTLY", standins, tmp_path
    )
    assert set(tiers) == {"nightly"}
    env = cli_env(build_env(shas["code"], "main:NIGHTLY")[2])
    assert tiers["nightly"] == rendered(repo, ".buildkite/cuda/test-nightly.yml", ["--all"], env)
    assert "(all scope)" in logs["nightly"]


def test_f2_cuda_weekly_on_non_critical_main_is_all(
    corpus_repo: tuple[GitRepo, dict[str, str]], standins: StandIns, tmp_path: Path
) -> None:
    repo, shas = corpus_repo
    build = "main:NON_CRITICAL"
    _, tiers, _ = bootstrap_and_run(repo, "cuda", shas["code"], build, standins, tmp_path)
    env = cli_env(build_env(shas["code"], build)[2])
    assert tiers["weekly"] == rendered(repo, ".buildkite/cuda/test-weekly.yml", ["--all"], env)


def test_f2_cuda_weekly_label_on_a_pr_is_diff_aware(
    corpus_repo: tuple[GitRepo, dict[str, str]], standins: StandIns, tmp_path: Path
) -> None:
    repo, shas = corpus_repo
    _, tiers, logs = bootstrap_and_run(
        repo, "cuda", shas["code"], "pr:weekly-test", standins, tmp_path
    )
    assert set(tiers) == {"weekly"}
    env = cli_env(build_env(shas["code"], "pr:weekly-test")[2])
    everything = rendered(repo, ".buildkite/cuda/test-weekly.yml", ["--all"], env)
    assert tiers["weekly"] == rendered(repo, ".buildkite/cuda/test-weekly.yml", [], env)
    assert tiers["weekly"] != everything  # the unrelated product change filters steps out
    assert "(diff scope)" in logs["weekly"]


def test_f3_cuda_ready_and_merge_on_weekly_main_are_e2e(
    corpus_repo: tuple[GitRepo, dict[str, str]], standins: StandIns, tmp_path: Path
) -> None:
    repo, shas = corpus_repo
    _, tiers, _ = bootstrap_and_run(repo, "cuda", shas["code"], "main:WEEKLY", standins, tmp_path)
    assert set(tiers) == {"ready", "merge", "weekly"}
    env = cli_env(build_env(shas["code"], "main:WEEKLY")[2])
    for tier in ("ready", "merge"):
        path = f".buildkite/cuda/test-{tier}.yml"
        assert tiers[tier] == rendered(repo, path, ["--e2e"], env)
    # F2 on WEEKLY=1: the weekly tier is uploaded whole.
    assert tiers["weekly"] == rendered(repo, ".buildkite/cuda/test-weekly.yml", ["--all"], env)


def test_f4_cuda_main_push_uploads_merge_against_the_commit_parent(
    corpus_repo: tuple[GitRepo, dict[str, str]], standins: StandIns, tmp_path: Path
) -> None:
    repo, shas = corpus_repo
    sha = shas["code"]
    _, tiers, logs = bootstrap_and_run(repo, "cuda", sha, "main", standins, tmp_path)
    assert set(tiers) == {"merge"}
    assert f"changed file(s) (main build: {sha}^..{sha})" in logs["merge"]
    assert "(diff scope)" in logs["merge"]
    env = cli_env(build_env(sha, "main")[2])
    assert tiers["merge"] == rendered(repo, ".buildkite/cuda/test-merge.yml", [], env)


def test_f8_npu_nightly_on_main(
    corpus_repo: tuple[GitRepo, dict[str, str]], standins: StandIns, tmp_path: Path
) -> None:
    repo, shas = corpus_repo
    pipeline, tiers, _ = bootstrap_and_run(
        repo, "npu", shas["code"], "main:NIGHTLY", standins, tmp_path
    )
    assert set(tiers) == {"nightly"}  # ready not uploaded
    images = [s for s in leaves(pipeline) if s["key"].startswith("image-build")]
    assert len(images) == 4 and all("if" not in s for s in images)
    env = cli_env(build_env(shas["code"], "main:NIGHTLY")[2])
    assert tiers["nightly"] == rendered(repo, ".buildkite/npu/test-npu-nightly.yml", ["--all"], env)


def test_f8_npu_docs_only_nightly_still_builds_images(
    corpus_repo: tuple[GitRepo, dict[str, str]],
) -> None:
    from ci import bootstraps

    repo, shas = corpus_repo
    branch, labels, env = build_env(shas["docs"], "main:NIGHTLY")
    skipci.clear_cache()
    pipeline = bootstraps.plan_pipeline("npu", repo.path, cli_env(env))
    assert outcome(pipeline, branch, labels, env) == (True, {"nightly": "all"})


# --------------------------------------------------------------------------- Intel (F5-F7)


def copy_repo(template: GitRepo, dest: Path) -> GitRepo:
    """A copy of `template` at `dest`, with its own copy of the bare origin (a test may write)."""
    repo = GitRepo(dest, dest.parent / f"{dest.name}-origin.git")
    shutil.copytree(template.path, repo.path, symlinks=True)
    if template.origin is not None and repo.origin is not None:
        shutil.copytree(template.origin, repo.origin, symlinks=True)
        repo.git("remote", "set-url", "origin", str(repo.origin))
    return repo


@pytest.fixture(scope="module")
def intel_template(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """The corpus for the Intel bootstrap, built once per module (`intel_repo` copies it)."""
    path = make_corpus(
        tmp_path_factory.mktemp("intel-template") / "intel", pyproject=False, register_key=False
    )
    repo = GitRepo.create(path)
    repo.write("vllm_omni/model.py", "x = 1\n")
    repo.commit("base")
    return repo


@pytest.fixture
def intel_repo(intel_template: GitRepo, tmp_path: Path) -> GitRepo:
    return copy_repo(intel_template, tmp_path / "intel")


def intel_run(
    repo: GitRepo, standins: StandIns, tmp_path: Path, *extra: str
) -> tuple[Any, list[list[str]], list[dict[str, Any]]]:
    out = tmp_path / "intel-agent"
    agent(standins, out)
    env = standins.env(
        cli_env(
            BUILDKITE_BRANCH="main", BUILDKITE_PULL_REQUEST="false", BUILDKITE_COMMIT=repo.sha()
        )
    )
    done = run_inproc("bootstrap", "--platform", "xpu", *extra, env=env, cwd=repo.path)
    return done, standins.argvs("buildkite-agent"), uploads(out)


def test_f5_intel_docs_only_annotates_and_uploads_nothing(
    intel_repo: GitRepo, standins: StandIns, tmp_path: Path
) -> None:
    intel_repo.commit_files({"docs/a.md": "# a\n"})
    done, argvs, uploaded = intel_run(intel_repo, standins, tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout == ""
    assert argvs == [["annotate", SKIP_ANNOTATION, "--style", "info"]]
    assert uploaded == []


def test_f5_annotation_failure_is_ignored(
    intel_repo: GitRepo, standins: StandIns, tmp_path: Path
) -> None:
    intel_repo.commit_files({"docs/a.md": "# a\n"})
    standins.add("buildkite-agent", "exit 3")
    env = standins.env(
        cli_env(
            BUILDKITE_BRANCH="main",
            BUILDKITE_PULL_REQUEST="false",
            BUILDKITE_COMMIT=intel_repo.sha(),
        )
    )
    done = run_inproc("bootstrap", "--platform", "intel", env=env, cwd=intel_repo.path)
    assert done.code == 0, done.stderr


def test_f6_intel_other_platform_yaml_stops_quietly(
    intel_repo: GitRepo, standins: StandIns, tmp_path: Path
) -> None:
    text = (intel_repo.path / ".buildkite/cuda/test-merge.yml").read_text()
    intel_repo.commit_files({".buildkite/cuda/test-merge.yml": text + "# touched\n"})
    done, argvs, uploaded = intel_run(intel_repo, standins, tmp_path)
    assert done.code == 0, done.stderr
    assert "intel/l2: skip-l23" in done.stderr
    assert argvs == [] and uploaded == []


def test_f7_intel_product_change_uploads_the_rewritten_pipeline(
    intel_repo: GitRepo, standins: StandIns, tmp_path: Path
) -> None:
    intel_repo.commit_files({"vllm_omni/model.py": "x = 2\n"})
    done, argvs, uploaded = intel_run(intel_repo, standins, tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout == ""
    assert argvs == [["pipeline", "upload"]]
    (pipeline,) = uploaded
    original = yaml.safe_load((intel_repo.path / ".buildkite/intel/pipeline-intel.yml").read_text())
    step = pipeline["steps"][0]["steps"][0]
    before = original["steps"][0]["steps"][0]
    assert step["commands"] == [
        "vllm-omni-ci build-image --platform xpu && vllm-omni-ci run-tests --platform xpu"
    ]
    assert "command" not in step
    assert {k: v for k, v in step.items() if k != "commands"} == {
        k: v for k, v in before.items() if k != "command"
    }
    assert schema_problems(pipeline) == []


def test_intel_dry_run_prints_the_yaml_alone(
    intel_repo: GitRepo, standins: StandIns, tmp_path: Path
) -> None:
    intel_repo.commit_files({"vllm_omni/model.py": "x = 2\n"})
    done, argvs, uploaded = intel_run(intel_repo, standins, tmp_path, "--dry-run")
    assert done.code == 0, done.stderr
    assert argvs == [] and uploaded == []
    document = yaml.safe_load(done.stdout)
    assert schema_problems(document) == []
    assert "run-tests --platform xpu" in done.stdout
    assert "Preparing Intel pipeline" in done.stderr


def test_intel_pipeline_without_the_script_is_refused(
    intel_repo: GitRepo, standins: StandIns, tmp_path: Path
) -> None:
    intel_repo.commit_files(
        {
            ".buildkite/intel/pipeline-intel.yml": "steps:\n  - label: x\n    command: make\n",
            "vllm_omni/model.py": "x = 3\n",
        }
    )
    done, argvs, uploaded = intel_run(intel_repo, standins, tmp_path)
    assert done.code == 1
    assert "no step runs run-xpu-test.sh" in done.stderr
    assert argvs == [] and uploaded == []


# --------------------------------------------------------------------------- the sample


@pytest.fixture
def sample_repo(sample_template: GitRepo, tmp_path: Path) -> GitRepo:
    return copy_repo(sample_template, tmp_path / "sample")


@pytest.fixture(scope="module")
def sample_template(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """The sample on `main` (pushed) and a product change on `feature`, built once per module."""
    path = tmp_path_factory.mktemp("sample-template") / "sample"
    shutil.copytree(
        SAMPLE,
        path,
        ignore=shutil.ignore_patterns("wheelhouse", ".pytest_cache", ".benchmarks", "__pycache__"),
    )
    repo = GitRepo.create(path)
    repo.commit("sample")
    repo.push("main")
    repo.branch("feature")
    repo.commit_files({"omni_sample/touched.py": "x = 1\n"})
    return repo


@pytest.mark.parametrize(
    ("platform", "labels", "tiers"),
    [
        ("cuda", ["ready"], {"ready"}),
        ("cuda", ["merge-test"], {"merge"}),
        ("npu", ["ready"], {"ready"}),
    ],
)
def test_sample_bootstrap_end_to_end(
    sample_repo: GitRepo,
    standins: StandIns,
    tmp_path: Path,
    platform: str,
    labels: list[str],
    tiers: set[str],
) -> None:
    build = "pr:" + labels[0]
    pipeline, uploaded, _ = bootstrap_and_run(
        sample_repo, platform, sample_repo.sha(), build, standins, tmp_path
    )
    assert schema_problems(pipeline) == []
    assert set(uploaded) == tiers
    for tier, document in uploaded.items():
        assert schema_problems(document) == [], tier
        assert document["steps"]
        assert "source_file_dependencies" not in yaml.safe_dump(document)


def test_sample_intel_end_to_end(sample_repo: GitRepo, standins: StandIns, tmp_path: Path) -> None:
    out = tmp_path / "agent"
    agent(standins, out)
    env = standins.env(
        cli_env(
            BUILDKITE_BRANCH="feature",
            BUILDKITE_PULL_REQUEST="3",
            BUILDKITE_COMMIT=sample_repo.sha(),
        )
    )
    done = run_inproc("bootstrap", "--platform", "xpu", env=env, cwd=sample_repo.path)
    assert done.code == 0, done.stderr
    (pipeline,) = uploads(out)
    assert schema_problems(pipeline) == []
    assert pipeline["steps"][0]["steps"][0]["commands"] == [
        "vllm-omni-ci build-image --platform xpu && vllm-omni-ci run-tests --platform xpu"
    ]
    assert standins.argvs("buildkite-agent") == [["pipeline", "upload"]]


def test_sample_docs_only_pr_cuda_gates_everything_off(
    sample_repo: GitRepo, standins: StandIns, tmp_path: Path
) -> None:
    sample_repo.git("checkout", "-q", "-b", "docs-only", "main")
    sha = sample_repo.commit_files({"docs/y.md": "# y\n"})
    pipeline, uploaded, _ = bootstrap_and_run(
        sample_repo, "cuda", sha, "pr:ready", standins, tmp_path
    )
    assert uploaded == {}
    image = leaves(pipeline)[0]
    assert ifexpr.check(image["if"], ifexpr.Context.of("feature", ["ready"], {})) is False


@pytest.mark.parametrize("platform", ["cuda", "npu", "xpu"])
def test_done_when_dry_run_on_the_sample_prints_a_valid_pipeline(platform: str) -> None:
    done = run_inproc(
        "bootstrap", "--platform", platform, "--repo", str(SAMPLE), "--dry-run", env=cli_env()
    )
    assert done.code == 0, done.stderr
    document = yaml.safe_load(done.stdout)
    assert schema_problems(document) == []
    assert document["steps"]
    from ci import yamlio

    assert done.stdout == yamlio.dumps(document)  # the YAML alone: no log line on stdout
    assert "(dry-run) not run: buildkite-agent pipeline upload" in done.stderr


def test_dry_run_says_which_commands_it_replaced(tmp_path: Path) -> None:
    """One `note:` per step whose commands the bootstrap replaced (issue 35); none once the
    file already has them."""
    repo = GitRepo.create(tmp_path / "old", origin=False)
    old_upload = "python3 .buildkite/common/scripts/upload_pipeline.py --upload x/test-ready.yml"
    repo.write(
        ".buildkite/cuda/bootstrap-upload-steps.yml",
        "steps:\n  - key: image-build\n    command: bash build.sh\n"
        f"  - key: upload-ready-pipeline\n    command: {old_upload}\n",
    )
    repo.commit("old commands")
    done = run_inproc(
        "bootstrap", "--platform", "cuda", "--repo", str(repo.path), "--dry-run", env=cli_env()
    )
    assert done.code == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: step 'image-build': bash build.sh → vllm-omni-ci build-image --platform cuda",
        "note: step 'upload-ready-pipeline': upload_pipeline.py --upload x/test-ready.yml"
        " → vllm-omni-ci upload-pipeline x/test-ready.yml --upload --scope auto",
    ]
    from ci import bootstraps

    again: list[str] = []
    once, _ = bootstraps.rewrite_steps(yaml.safe_load(done.stdout), "cuda")
    bootstraps.rewrite_steps(once, "cuda", again)
    assert again == []


def test_upload_step_without_a_test_yaml_is_refused(tmp_path: Path) -> None:
    repo = GitRepo.create(tmp_path / "odd", origin=False)
    repo.write(
        ".buildkite/cuda/bootstrap-upload-steps.yml",
        "steps:\n  - key: image-build\n    command: bash build.sh\n"
        "  - key: upload-ready-pipeline\n    command: echo hi\n",
    )
    repo.commit("odd")
    done = run_inproc(
        "bootstrap", "--platform", "cuda", "--repo", str(repo.path), "--dry-run", env=cli_env()
    )
    assert done.code == 1
    assert done.stdout == ""
    assert "error: bootstrap step 'upload-ready-pipeline': cannot tell which test pipeline" in (
        done.stderr
    )


def test_rewrite_is_idempotent_on_the_real_files() -> None:
    """A bootstrap file already migrated by hand to the emitted commands is accepted as is."""
    from ci import bootstraps
    from tests.corpus import BUILDKITE

    platforms: tuple[BootstrapPlatform, ...] = ("cuda", "npu")
    for platform in platforms:
        path = need_shared(BUILDKITE / platform / "bootstrap-upload-steps.yml")
        document = yaml.safe_load(path.read_text())
        once, keys = bootstraps.rewrite_steps(document, platform)
        twice, again = bootstraps.rewrite_steps(once, platform)
        assert model.emit(twice) == model.emit(once) and keys == again
    intel = yaml.safe_load(need_shared(BUILDKITE / "intel" / "pipeline-intel.yml").read_text())
    once_intel = model.emit(bootstraps.rewrite_intel(intel, "x"))
    assert model.emit(bootstraps.rewrite_intel(once_intel, "x")) == once_intel


def test_npu_depends_on_keeps_other_dependencies() -> None:
    from ci import bootstraps

    document = {
        "steps": [
            {"key": "image-build-a2", "label": "a2", "command": "bash b.sh", "timeout": 5},
            {"key": "lint", "command": "true"},
            {
                "key": "upload-ready-pipeline",
                "depends_on": ["lint", "image-build-a2", {"step": "lint", "allow_failure": True}],
                "command": "python3 x/upload_pipeline.py --upload .buildkite/npu/r.yml",
            },
        ]
    }
    rewritten, keys = bootstraps.rewrite_steps(document, "npu")
    out = model.emit(rewritten)
    generated = [v.step_key for v in variants.VARIANTS]
    assert keys == frozenset(generated)
    assert [s["key"] for s in out["steps"]] == [*generated, "lint", "upload-ready-pipeline"]
    upload = out["steps"][-1]
    assert upload["depends_on"] == ["lint", *generated, {"step": "lint", "allow_failure": True}]
    assert all(s["timeout"] == 5 for s in out["steps"][:4])  # template keys carried over
    assert out["steps"][len(generated)] == {"key": "lint", "command": "true"}  # untouched


def test_a_failed_upload_passes_the_agent_exit_code(standins: StandIns) -> None:
    standins.add("buildkite-agent", "cat > /dev/null; exit 5")
    done = run_inproc(
        "bootstrap", "--platform", "npu", "--repo", str(SAMPLE), env=standins.env(cli_env())
    )
    assert done.code == 5
    assert done.stdout == ""
    assert standins.argvs("buildkite-agent") == [["pipeline", "upload"]]
