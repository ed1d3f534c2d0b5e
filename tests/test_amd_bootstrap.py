"""`bootstrap --platform rocm`: the B and T golden scenarios (pipeline spec §5.2, §5.3),
every real AMD suite combination, and end-to-end runs on real git repositories
with a recording `buildkite-agent` and a local GitHub API server."""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci.amd import bootstrap, combine, render, suites
from ci.schema import pipeline_errors
from tests.conftest import SAMPLE, SHARED, StandIns, run_cli

CORPUS_AMD = SHARED / "vllm-omni" / ".buildkite" / "amd"
NOT_CRITICAL = "No critical changes, using precompiled wheels"
LEAF_COUNTS = {"ready": 22, "merge": 22, "nightly": 9}


# --------------------------------------------------------------------------- helpers


def leaves(steps: list[Any]) -> list[dict[str, Any]]:
    """Leaf steps of a suite file, walked independently of the renderer."""
    out: list[dict[str, Any]] = []
    for entry in steps:
        out.extend(entry["steps"] if "group" in entry else [entry])
    return out


def rendered_leaves(pipeline: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in leaves(pipeline["steps"]) if s.get("key") != render.BUILD_KEY]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@dataclass
class Repo:
    path: Path

    def write(self, rel: str, text: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def commit(self, message: str = "change") -> str:
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD")


@pytest.fixture
def amd_repo(tmp_path: Path) -> Repo:
    """A git repo whose main holds the real AMD suites; work happens on `feature`."""
    repo = Repo(tmp_path / "omni")
    repo.path.mkdir()
    git(repo.path, "init", "-q", "-b", "main")
    shutil.copytree(CORPUS_AMD, repo.path / ".buildkite" / "amd")
    repo.write("vllm_omni/model.py", "x = 1\n")
    repo.write("docs/index.md", "# docs\n")
    repo.commit("init")
    git(repo.path, "checkout", "-q", "-b", "feature")
    return repo


@dataclass
class GitHub:
    """A tiny GitHub API: PR number → labels, or an HTTP status to fail with."""

    labels: dict[str, list[str]] = field(default_factory=dict)
    status: int = 200
    requests: list[str] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def github() -> Iterator[GitHub]:
    state = GitHub()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.path + " auth=" + str(self.headers.get("Authorization")))
            number = self.path.rsplit("/", 1)[-1]
            if state.status != 200 or number not in state.labels:
                self.send_response(state.status if state.status != 200 else 404)
                self.end_headers()
                return
            body = json.dumps({"labels": [{"name": n} for n in state.labels[number]]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()


@dataclass
class Agent:
    standins: StandIns
    uploaded: Path

    def calls(self) -> list[list[str]]:
        return self.standins.argvs("buildkite-agent")

    def pipeline(self) -> dict[str, Any]:
        return yaml.safe_load(self.uploaded.read_text())


@pytest.fixture
def agent(standins: StandIns, tmp_path: Path) -> Agent:
    uploaded = tmp_path / "uploaded.yaml"
    standins.add(
        "buildkite-agent",
        f'if [[ "$1" == pipeline && "$2" == upload ]]; then cp "$3" {uploaded}; fi',
    )
    return Agent(standins, uploaded)


def bootstrap_env(
    repo: Repo, agent: Agent, github: GitHub, *, branch: str = "feature", pr: str = "false",
    **extra: str,
) -> dict[str, str]:  # fmt: skip
    env = agent.standins.env()
    for key in list(env):
        if key.startswith(("BUILDKITE", "DEBUG_TEST_YAML", "NIGHTLY", "AMD_MIRROR", "VLLM_USE")):
            del env[key]
    env.update(
        {
            "BUILDKITE": "true",
            "BUILDKITE_BRANCH": branch,
            "BUILDKITE_COMMIT": git(repo.path, "rev-parse", "HEAD"),
            "BUILDKITE_PULL_REQUEST": pr,
            "BUILDKITE_PIPELINE_SLUG": "vllm-omni-amd-ci",
            "VLLM_OMNI_CI_GITHUB_API": github.url,
        }
    )
    env.update(extra)
    return env


def run_bootstrap(repo: Repo, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("bootstrap", "--platform", "rocm", "--repo", str(repo.path), *extra, env=env)


def labels_of(pipeline: dict[str, Any]) -> set[str]:
    return {s["label"] for s in rendered_leaves(pipeline)}


def suite_labels(name: str) -> set[str]:
    data = yaml.safe_load((CORPUS_AMD / f"test-amd-{name}.yml").read_text())
    return {f"{s['agent_pool']}: {s['label']}" for s in leaves(data["steps"])}


# --------------------------------------------------------------------------- B rows


def test_b1_label_fetch_failure_is_fatal(amd_repo: Repo, agent: Agent, github: GitHub) -> None:
    github.status = 403
    amd_repo.write("vllm_omni/model.py", "x = 2\n")
    amd_repo.commit()
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, pr="123"))
    assert done.returncode == 1
    assert bootstrap.LABEL_ERROR in done.stderr.splitlines()
    assert agent.calls() == []
    assert len(github.requests) == 1


def test_b2_debug_test_yaml_skips_the_label_request(
    amd_repo: Repo, agent: Agent, github: GitHub
) -> None:
    amd_repo.write("vllm_omni/model.py", "x = 2\n")
    amd_repo.commit()
    env = bootstrap_env(amd_repo, agent, github, pr="123", DEBUG_TEST_YAML="merge")
    done = run_bootstrap(amd_repo, env)
    assert done.returncode == 0, done.stderr
    assert github.requests == []
    assert labels_of(agent.pipeline()) == suite_labels("merge")


def test_b3_no_pr_means_no_request_and_ready_fallback(
    amd_repo: Repo, agent: Agent, github: GitHub
) -> None:
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert github.requests == []
    assert suites.FALLBACK_NOTICE in done.stderr
    assert labels_of(yaml.safe_load(done.stdout)) == suite_labels("ready")
    assert agent.calls() == []  # dry-run uploads nothing


def test_b4_docs_only_skips_and_annotates(amd_repo: Repo, agent: Agent, github: GitHub) -> None:
    github.labels["123"] = ["ready"]
    amd_repo.write("docs/a.md", "new page\n")
    amd_repo.commit()
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, pr="123"))
    assert done.returncode == 0, done.stderr
    assert "Skipping AMD l2 suite due to skip-all decision." in done.stderr
    assert bootstrap.NOTHING_LEFT in done.stderr
    assert done.stdout == ""
    assert agent.calls() == [
        ["annotate", ":memo: CI skipped — docs or pytest skip-mark changes only", "--style", "info"]
    ]


def test_b5_nightly_survives_a_docs_only_diff(amd_repo: Repo, agent: Agent, github: GitHub) -> None:
    github.labels["123"] = ["ready", "nightly-test"]
    amd_repo.write("docs/a.md", "new page\n")
    amd_repo.commit()
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, pr="123"))
    assert done.returncode == 0, done.stderr
    assert "Skipping AMD l2 suite due to skip-all decision." in done.stderr
    assert labels_of(agent.pipeline()) == suite_labels("nightly")
    assert ["annotate"] not in [c[:1] for c in agent.calls()]
    assert agent.calls()[-1] == ["pipeline", "upload", "pipeline.yaml"]


@pytest.mark.parametrize(("nightly", "uploaded"), [("1", True), ("0", False)], ids=["B6", "B7"])
def test_b6_b7_main_docs_only(
    amd_repo: Repo, agent: Agent, github: GitHub, nightly: str, uploaded: bool
) -> None:
    git(amd_repo.path, "checkout", "-q", "main")
    amd_repo.write("docs/a.md", "new page\n")
    amd_repo.commit()
    env = bootstrap_env(amd_repo, agent, github, branch="main", NIGHTLY=nightly)
    done = run_bootstrap(amd_repo, env)
    assert done.returncode == 0, done.stderr
    if uploaded:
        assert labels_of(agent.pipeline()) == suite_labels("nightly")
    else:
        assert "Skipping AMD l3 suite due to skip-all decision." in done.stderr
        assert agent.calls()[0][0] == "annotate"
        assert not agent.uploaded.exists()


def test_b8_main_cuda_yaml_only_skips_l23_without_annotation(
    amd_repo: Repo, agent: Agent, github: GitHub
) -> None:
    git(amd_repo.path, "checkout", "-q", "main")
    amd_repo.write(".buildkite/cuda/test-ready.yml", "steps: []\n")
    amd_repo.commit()
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, branch="main"))
    assert done.returncode == 0, done.stderr
    assert "Skipping AMD l3 suite due to skip-l23 decision." in done.stderr
    assert agent.calls() == []


def test_b9_merge_yaml_change_keeps_merge(amd_repo: Repo, agent: Agent, github: GitHub) -> None:
    github.labels["9"] = ["merge-test"]
    path = amd_repo.path / ".buildkite/amd/test-amd-merge.yml"
    path.write_text(path.read_text() + "\n# touched\n")
    amd_repo.commit()
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, pr="9"))
    assert done.returncode == 0, done.stderr
    assert labels_of(agent.pipeline()) == suite_labels("merge")


def test_b10_ready_yaml_change_keeps_ready_and_skips_merge(
    amd_repo: Repo, agent: Agent, github: GitHub
) -> None:
    github.labels["10"] = ["ready", "merge-test"]
    path = amd_repo.path / ".buildkite/amd/test-amd-ready.yml"
    path.write_text(path.read_text() + "\n# touched\n")
    amd_repo.commit()
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, pr="10"))
    assert done.returncode == 0, done.stderr
    assert "Skipping AMD l3 suite due to skip-l23 decision." in done.stderr
    pipeline = agent.pipeline()
    assert labels_of(pipeline) == suite_labels("ready")
    # A single suite keeps its own groups.
    assert "READY_TESTS" not in [g.get("group") for g in pipeline["steps"]]


def test_b11_two_suites_are_combined(amd_repo: Repo, agent: Agent, github: GitHub) -> None:
    github.labels["11"] = ["ready", "merge-test"]
    amd_repo.write("vllm_omni/model.py", "x = 3\n")
    amd_repo.commit()
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, pr="11"))
    assert done.returncode == 0, done.stderr
    expected = "AMD test suites: READY_TESTS:test-amd-ready.yml MERGE_TESTS:test-amd-merge.yml"
    assert expected in done.stderr
    pipeline = agent.pipeline()
    groups = [g["group"] for g in pipeline["steps"]]
    assert groups[1:] == ["READY_TESTS", "MERGE_TESTS"]
    assert pipeline["env"]["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert labels_of(pipeline) == suite_labels("ready") | suite_labels("merge")
    assert not list((amd_repo.path / ".buildkite" / "amd").glob("amd-selected-tests.*"))


def test_b12_env_conflict_names_the_variable(amd_repo: Repo, agent: Agent, github: GitHub) -> None:
    for name, value in (("ready", "1"), ("merge", "2")):
        path = amd_repo.path / f".buildkite/amd/test-amd-{name}.yml"
        path.write_text(path.read_text().replace("env:\n", f"env:\n  X: '{value}'\n", 1))
    amd_repo.commit()
    env = bootstrap_env(amd_repo, agent, github, DEBUG_TEST_YAML="ready,merge")
    done = run_bootstrap(amd_repo, env)
    assert done.returncode == 1
    assert "error: Conflicting environment value for X: '1' != '2'" in done.stderr
    assert agent.calls() == []


@pytest.mark.parametrize(
    ("row", "paths", "preset", "run_all", "precompiled", "message"),
    [
        ("B13", ["setup.py"], "", True, "0", "Found changes: setup.py. Run all tests"),
        ("B14", ["docker/Dockerfile.rocm"], "", False, "1", NOT_CRITICAL),
        ("B15-rocm", ["csrc/rocm/x.cu"], "", False, "1", NOT_CRITICAL),
        ("B15-cuda", ["csrc/cuda/x.cu"], "", True, "0", "Found changes: csrc/cuda/x.cu. Run all"),
        ("B16", ["a.py"], "0", False, "0", "VLLM_USE_PRECOMPILED is already set to: 0"),
        ("prefix", ["requirements/common.txt.bak"], "", True, "0", "Run all tests"),
    ],
)  # fmt: skip
def test_b13_b16_critical_files(
    row: str, paths: list[str], preset: str, run_all: bool, precompiled: str, message: str
) -> None:
    inputs = bootstrap.Inputs("f", "false", "", False, "amdproduction", False, preset)
    got_run_all, got_precompiled, lines = bootstrap.precompiled_choice(inputs, paths)
    assert (got_run_all, got_precompiled) == (run_all, precompiled)
    assert any(message in line for line in lines)


def test_b13_is_logged_by_the_bootstrap(amd_repo: Repo, agent: Agent, github: GitHub) -> None:
    amd_repo.write("setup.py", "print()\n")
    amd_repo.commit()
    env = bootstrap_env(amd_repo, agent, github, branch="main")
    done = run_bootstrap(amd_repo, env, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "Found changes: setup.py. Run all tests" in done.stderr
    assert "Detected critical changes, building wheels from source" in done.stderr


def test_b17_fastcheck_keeps_only_the_image_step(
    amd_repo: Repo, agent: Agent, github: GitHub
) -> None:
    """docs/differences.md "AMD: empty groups are dropped": the template emitted them empty."""
    env = bootstrap_env(amd_repo, agent, github, BUILDKITE_PIPELINE_SLUG="fastcheck")
    done = run_bootstrap(amd_repo, env, "--dry-run")
    assert done.returncode == 0, done.stderr
    pipeline = yaml.safe_load(done.stdout)
    assert rendered_leaves(pipeline) == []
    assert [s["key"] for s in leaves(pipeline["steps"])] == ["amd-build"]
    assert pipeline_errors(pipeline) == []


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG_TEST_YAML": "weekly"}, "got 'weekly'"),
        ({"NIGHTLY": "2"}, "NIGHTLY must be 0 or 1, got '2'"),
        ({"NIGHTLY": "true"}, "NIGHTLY must be 0 or 1, got 'true'"),
    ],
    ids=["B18-unknown-suite", "A19-nightly-2", "A19-nightly-true"],
)
def test_selector_errors_exit_1_in_the_bootstrap(
    amd_repo: Repo, agent: Agent, github: GitHub, env: dict[str, str], message: str
) -> None:
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, **env))
    assert done.returncode == 1
    assert message in done.stderr and "Traceback" not in done.stderr
    assert agent.calls() == []


def test_unreadable_suite_fails_closed(amd_repo: Repo, agent: Agent, github: GitHub) -> None:
    (amd_repo.path / ".buildkite/amd/test-amd-ready.yml").write_text("steps: [unclosed\n")
    amd_repo.commit()
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github))
    assert done.returncode == 1
    assert "test-amd-ready.yml: invalid YAML" in done.stderr
    assert agent.calls() == []


def test_token_is_sent_and_never_printed(amd_repo: Repo, agent: Agent, github: GitHub) -> None:
    github.status = 500
    token = "ghp_canary_token_123456"
    env = bootstrap_env(amd_repo, agent, github, pr="5", GITHUB_TOKEN=token)
    done = run_bootstrap(amd_repo, env)
    assert done.returncode == 1
    assert github.requests == [f"/repos/vllm-project/vllm-omni/pulls/5 auth=Bearer {token}"]
    assert token not in done.stderr + done.stdout


# --------------------------------------------------------------------------- T rows


def step(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "label": "X",
        "agent_pool": "mi300_4",
        "grade": "Blocking",
        "mirror_hardwares": ["amdproduction"],
        "commands": ["c1", "c2"],
    }
    base.update(over)
    return base


def test_t1_blocking_step_shape() -> None:
    out = render.render_step(step(), {})
    assert out["label"] == "mi300_4: X"
    assert out["agents"] == {"queue": "amd_mi300_4"}
    container = out["plugins"][0]["kubernetes"]["podSpecPatch"]["containers"][0]
    assert container["resources"]["limits"]["amd.com/gpu"] == "4"
    assert container["image"] == "rocm/vllm-omni:$BUILDKITE_COMMIT"
    assert out["env"]["VLLM_CI_EXPECTED_GPU_COUNT"] == "4"
    assert out["depends_on"] == "amd-build"
    assert out["soft_fail"] is False
    assert out["priority"] == 100


@pytest.mark.parametrize("grade", [None, "NonBlocking"])
def test_t2_non_blocking_soft_fails(grade: str | None) -> None:
    assert render.render_step(step(grade=grade), {})["soft_fail"] is True


def test_t3_missing_agent_pool_is_rejected() -> None:
    with pytest.raises(Exception, match="agent_pool is required"):
        render.render_step(step(agent_pool=None), {})


def test_t4_retry_rules_keep_exit_status_and_limit() -> None:
    rule = {"exit_status": 134, "limit": 1, "signal": "x"}
    out = render.render_step(step(retry={"automatic": [rule]}), {})
    assert out["retry"] == {"automatic": [{"exit_status": 134, "limit": 1}]}
    grouped, _ = render.render_pipeline(
        {}, [{"group": "g", "steps": [step(retry={"automatic": [rule]})]}]
    )
    assert grouped["steps"][1]["steps"][0]["retry"]["automatic"] == [
        {"exit_status": 134, "limit": 1}
    ]


def test_t5_parallelism_artifacts_timeout() -> None:
    out = render.render_step(
        step(parallelism=4, artifact_paths=["a.log"], timeout_in_minutes=90), {}
    )
    assert (out["parallelism"], out["artifact_paths"], out["timeout_in_minutes"]) == (
        4,
        ["a.log"],
        90,
    )


def test_t6_env_and_test_commands() -> None:
    suite_env = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    pipeline, _ = render.render_pipeline(suite_env, [step(env={"A": "b"})])
    assert pipeline["env"] == suite_env
    out = pipeline["steps"][1]
    assert out["env"]["A"] == "b"
    assert out["env"]["TEST_COMMANDS"].splitlines() == [
        "(command rocm-smi || true) && cd /app/vllm-omni",
        'export VLLM_WORKER_MULTIPROC_METHOD="spawn"',
        'export A="b"',
        "c1",
        "c2",
    ]


def test_t7_mi250_uninstalls_aiter() -> None:
    lines = render.render_step(step(agent_pool="mi250_1"), {})["env"]["TEST_COMMANDS"].splitlines()
    assert lines[-3:] == ["python3 -m pip uninstall -y amd-aiter", "c1", "c2"]


def test_t8_mirror_filter_drops_the_step() -> None:
    pipeline, dropped = render.render_pipeline({}, [step(mirror_hardwares=["amdtentative"])])
    assert rendered_leaves(pipeline) == [] and dropped == ["X"]


def test_t9_image_step_first_and_runner_command() -> None:
    pipeline, _ = render.render_pipeline({}, [step()])
    assert pipeline["steps"][0]["steps"][0]["key"] == "amd-build"
    assert pipeline["steps"][0]["steps"][0]["commands"] == [
        "vllm-omni-ci build-image --platform rocm"
    ]
    assert pipeline["steps"][1]["command"] == "vllm-omni-ci run-tests --platform rocm"


def test_values_with_quotes_and_dollars_are_escaped_for_bash() -> None:
    lines = render.test_commands(step(env={"Q": 'a"b$c'}), {}, "mi300_1").splitlines()
    assert 'export Q="a\\"b\\$c"' in lines


# --------------------------------------------------------------------------- real suites


@pytest.mark.parametrize(
    "names",
    [["ready"], ["merge"], ["nightly"], ["ready", "merge"], ["ready", "merge", "nightly"]],
    ids="+".join,
)
def test_real_suites_render(names: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    sources = {n: yaml.safe_load((CORPUS_AMD / f"test-amd-{n}.yml").read_text()) for n in names}
    source_leaves = [s for n in names for s in leaves(sources[n]["steps"])]
    for name in names:
        assert len(leaves(sources[name]["steps"])) == LEAF_COUNTS[name]
    distinct: list[dict[str, Any]] = []
    for s in source_leaves:
        if s not in distinct:
            distinct.append(s)

    docs = [combine.load_suite(CORPUS_AMD, suites.BY_NAME[n]) for n in names]
    combined = combine.combine(docs)
    combine.report_dropped(combined)
    pipeline, _ = render.render_pipeline(combined.env, combined.steps)
    assert pipeline_errors(pipeline) == []

    dropped_lines = [ln for ln in capsys.readouterr().err.splitlines() if "Dropped duplicate" in ln]
    assert len(dropped_lines) == len(source_leaves) - len(distinct)
    out = rendered_leaves(pipeline)
    assert len(out) == len(distinct)
    for src in distinct:
        label = f"{src['agent_pool']}: {src['label']}"
        matches = [
            s
            for s in out
            if s["label"] == label and s["agents"]["queue"] == f"amd_{src['agent_pool']}"
        ]
        assert matches, label
        body = "\n".join(src["commands"]) if "commands" in src else src["command"]
        assert any(m["env"]["TEST_COMMANDS"].endswith(body.strip()) for m in matches), label
        assert any(m["soft_fail"] is (src.get("grade") != "Blocking") for m in matches), label


# --------------------------------------------------------------------------- the sample


def test_sample_dry_run_is_schema_valid(tmp_path: Path) -> None:
    if not (SAMPLE / ".buildkite" / "amd" / "test-amd-ready.yml").exists():
        pytest.skip("the sample's AMD suites have not landed")
    done = run_cli(
        "bootstrap", "--platform", "rocm", "--repo", str(SAMPLE), "--dry-run",
        env={**agent_free_env(), "DEBUG_TEST_YAML": "ready"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    pipeline = yaml.safe_load(done.stdout)
    assert pipeline_errors(pipeline) == []
    assert rendered_leaves(pipeline)


def agent_free_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE")}
