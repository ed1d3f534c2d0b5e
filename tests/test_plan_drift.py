"""`plan` against the real commands: same change, same step lists.

The plan's CUDA and NPU tiers must list exactly the steps that
`vllm-omni-ci upload-pipeline <file> --scope auto --dry-run` emits for the
same PR build, and its rocm, cuda, npu and xpu bootstraps exactly what
`vllm-omni-ci bootstrap --platform P --dry-run` renders (the AMD labels come
from a real HTTP server on 127.0.0.1 standing in for GitHub), so the plan and
the real uploads cannot drift apart.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci import skipci
from ci.plan.build import make_plan
from ci.plan.inputs import parse_inputs
from ci.plan.model import BuildPlan, PlannedPipeline
from tests.conftest import StandIns, run_cli
from tests.gitrepo import GitRepo, buildkite_env
from tests.test_plan import ALL_LABELS, MODEL, corpus_repo, pipeline_of

SCHEDULE_ENV = (
    "NIGHTLY",
    "WEEKLY",
    "NON_CRITICAL",
    "MIRROR_HW",
    "AMD_MIRROR_HW",
    "DEBUG_TEST_YAML",
    "RUN_ALL",
    "VLLM_USE_PRECOMPILED",
    "GITHUB_TOKEN",
)


@pytest.fixture
def github() -> Iterator[tuple[str, list[str]]]:
    """A GitHub API stand-in that answers every PR with ALL_LABELS."""
    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            names = ALL_LABELS.split(",")
            body = json.dumps({"labels": [{"name": n} for n in names]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", requests
    server.shutdown()


def pr_env(repo: GitRepo, api: str, standins: StandIns, **extra: str) -> dict[str, str]:
    env = buildkite_env(
        standins.env(),
        BUILDKITE_PULL_REQUEST="7",
        BUILDKITE_PULL_REQUEST_BASE_BRANCH="main",
        BUILDKITE_BRANCH="feature",
        BUILDKITE_COMMIT=repo.sha(),
        VLLM_OMNI_CI_GITHUB_API=api,
    )
    for name in SCHEDULE_ENV:
        env.pop(name, None)
    env.update(extra)
    return env


def leaves(steps: Any, skip: set[str]) -> list[dict[str, Any]]:
    """Leaf steps of a rendered pipeline, minus groups/steps named in `skip`.

    `skip` is what the plan says an `if` drops: each of them must carry an
    `if` in the real output, so the plan cannot hide a step that always runs.
    """
    found: list[dict[str, Any]] = []
    for step in steps or []:
        if not isinstance(step, dict):
            continue
        name = str(step.get("group") or step.get("label") or "")
        if name in skip:
            assert isinstance(step.get("if"), str), f"{name!r} has no if, yet the plan drops it"
            continue
        if isinstance(step.get("steps"), list):
            found += leaves(step["steps"], skip)
        else:
            found.append(step)
    return found


def rows(steps: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            str(s.get("label") or s.get("key")),
            (s.get("agents") or {}).get("queue"),
            s.get("parallelism"),
            s.get("timeout_in_minutes"),
            bool(s.get("soft_fail")),
        )
        for s in steps
    ]


def plan_rows(pipeline: PlannedPipeline) -> list[tuple[Any, ...]]:
    return [
        (s.label, s.queue, s.parallelism, s.timeout_in_minutes, s.soft_fail) for s in pipeline.steps
    ]


def if_false(pipeline: PlannedPipeline) -> set[str]:
    return {d.label for d in pipeline.dropped if d.reason == "if-false"}


def dry_run(*args: str, env: dict[str, str]) -> dict[str, Any]:
    done = run_cli(*args, "--dry-run", env=env)
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(done.stdout)
    assert isinstance(data, dict), done.stdout
    return data


def make(repo: GitRepo, **options: Any) -> BuildPlan:
    skipci.clear_cache()
    return make_plan(parse_inputs(repo=str(repo.path), branch="feature", **options))


CASES = {
    "model-change": ({MODEL: "class Model:\n    size = 9\n"}, ""),
    "registry-change-b200": (
        {".buildkite/common/ci_mirror_hardwares.yml": None},
        "b200",
    ),
}


@pytest.fixture(params=list(CASES))
def changed(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[GitRepo, str]:
    files, mirror = CASES[request.param]
    repo = corpus_repo(tmp_path)
    for rel, text in files.items():
        body = text if text is not None else (repo.path / rel).read_text() + "\n# touched\n"
        repo.write(rel, body)
    repo.commit(request.param)
    return repo, mirror


def test_cuda_and_npu_tiers_equal_upload_pipeline_dry_run(
    changed: tuple[GitRepo, str], github: tuple[str, list[str]], standins: StandIns
) -> None:
    repo, mirror = changed
    standins.add("buildkite-agent")
    plan = make(repo, labels=ALL_LABELS, platform=["cuda", "npu"], mirror_hw=mirror)
    env = pr_env(repo, github[0], standins, **({"MIRROR_HW": mirror} if mirror else {}))
    compared = 0
    for platform in ("cuda", "npu"):
        for child in plan.platform(platform).pipelines[1:]:
            assert child.status == "uploaded", (platform, child.name, child.reason)
            assert child.file
            out = dry_run(
                "upload-pipeline", child.file, "--scope", "auto", "--repo", str(repo.path), env=env
            )
            assert plan_rows(child) == rows(leaves(out["steps"], if_false(child))), child.file
            compared += 1
    assert compared == 6
    assert standins.calls("buildkite-agent") == []


@pytest.mark.parametrize("platform", ["cuda", "npu", "xpu", "rocm"])
def test_bootstraps_equal_bootstrap_dry_run(
    platform: str, tmp_path: Path, github: tuple[str, list[str]], standins: StandIns
) -> None:
    standins.add("buildkite-agent")
    repo = corpus_repo(tmp_path)
    repo.commit_files({MODEL: "class Model:\n    size = 8\n"}, "model")
    plan = make(repo, labels=ALL_LABELS, platform=[platform])
    out = dry_run(
        "bootstrap",
        "--platform",
        platform,
        "--repo",
        str(repo.path),
        env=pr_env(repo, github[0], standins, BUILDKITE_PULL_REQUEST_LABELS=ALL_LABELS),
    )
    boot = plan.platform(platform).pipelines[0]
    expected = rows(leaves(out["steps"], if_false(boot)))
    assert plan_rows(boot) == expected
    assert expected, "the bootstrap renders steps"
    # The labels come from Buildkite's variable: neither the dry run nor the plan asks GitHub.
    assert standins.calls("buildkite-agent") == []
    assert github[1] == []
    if platform == "rocm":
        assert any(s.groups[:1] == ("NIGHTLY_TESTS",) for s in boot.steps)


def test_a_scheduled_nightly_on_main_equals_the_real_commands(
    tmp_path: Path, github: tuple[str, list[str]], standins: StandIns
) -> None:
    standins.add("buildkite-agent")
    repo = corpus_repo(tmp_path)
    repo.git("checkout", "-q", "main")
    repo.commit_files({MODEL: "class Model:\n    size = 10\n"}, "model on main")
    skipci.clear_cache()
    plan = make_plan(parse_inputs(repo=str(repo.path), branch="main", nightly=True))
    # As a main build diffs (spec §2.6): the commit against its parent, not origin/main.
    assert plan.diff["range"] == "HEAD^...HEAD"
    assert plan.diff["paths"] == [MODEL]
    env = pr_env(repo, github[0], standins, NIGHTLY="1")
    env.update(BUILDKITE_BRANCH="main", BUILDKITE_PULL_REQUEST="false")
    for platform in ("cuda", "npu"):
        boot = plan.platform(platform).pipelines[0]
        out = dry_run("bootstrap", "--platform", platform, "--repo", str(repo.path), env=env)
        assert plan_rows(boot) == rows(leaves(out["steps"], if_false(boot)))
        uploaded = [p for p in plan.platform(platform).pipelines[1:] if p.status == "uploaded"]
        assert [p.name for p in uploaded] == ["nightly"]
        for child in plan.platform(platform).pipelines[1:]:
            if child.status != "uploaded":
                assert child.reason == (
                    "upload step's if is false (false for a main build with NIGHTLY=1)"
                )
        [child] = uploaded
        assert child.scope == "all" and child.file
        out = dry_run(
            "upload-pipeline", child.file, "--scope", "auto", "--repo", str(repo.path), env=env
        )
        assert plan_rows(child) == rows(leaves(out["steps"], if_false(child)))
    # An `if` on an env var the plan cannot know is Buildkite's to decide.
    email = [s for s in pipeline_of(plan, "cuda", "nightly").steps if "Email" in s.label]
    assert [s.runs for s in email] == ["conditional"]
    assert 'build.env("EMAIL_DISTRIBUTION") == "1"' in email[0].note
    assert email[0].note.startswith("conditional, not evaluated: ")
    assert [p.name for p in plan.platform("rocm").pipelines] == ["NIGHTLY_TESTS"]
    assert standins.calls("buildkite-agent") == []
