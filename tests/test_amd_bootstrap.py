"""`bootstrap --platform rocm`: the B and T golden scenarios (pipeline spec §5.2, §5.3),
every real AMD suite combination, bad inputs, and end-to-end runs on real git
repositories (one made from the sample) with a recording `buildkite-agent` and a
local GitHub API server on 127.0.0.1.

Where we differ from the script on purpose, the row says so and names the
docs/differences.md entry.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci import skipci, yamlio
from ci.amd import bootstrap, combine, render, suites
from ci.errors import Failure, Stop, UserError
from ci.schema import schema_problems
from tests.conftest import ROOT, SAMPLE, SHARED, StandIns, need_shared
from tests.gitrepo import GitRepo, buildkite_env, git_counter
from tests.inproc import Outcome, run_inproc

CORPUS_AMD = SHARED / "vllm-omni" / ".buildkite" / "amd"
NOT_CRITICAL = "No critical changes, using precompiled wheels"
FROM_SOURCE = "Detected critical changes, building wheels from source"
ANNOTATE = ["annotate", skipci.SKIP_ANNOTATION, "--style", "info"]
UPLOADS = [["artifact", "upload", "pipeline.yaml"], ["pipeline", "upload", "pipeline.yaml"]]
# Leaf steps per real suite file, counted by hand from ../shared (not by our code).
LEAF_COUNTS = {"ready": 22, "merge": 22, "nightly": 9}


# --------------------------------------------------------------------------- helpers


def leaves(steps: list[Any]) -> list[dict[str, Any]]:
    """Leaf steps of a suite file or pipeline, walked independently of the renderer."""
    out: list[dict[str, Any]] = []
    for entry in steps:
        out.extend(entry["steps"] if "group" in entry else [entry])
    return out


def rendered_leaves(pipeline: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in leaves(pipeline["steps"]) if s.get("key") != render.BUILD_KEY]


def labels_of(pipeline: dict[str, Any]) -> set[str]:
    return {s["label"] for s in rendered_leaves(pipeline)}


def corpus_amd() -> Path:
    """The real AMD suites in ../shared (the calling test fails in one line without them)."""
    return need_shared(CORPUS_AMD)


def suite_labels(name: str, amd_dir: Path | None = None) -> set[str]:
    data = yaml.safe_load(((amd_dir or corpus_amd()) / f"test-amd-{name}.yml").read_text())
    return {f"{s['agent_pool']}: {s['label']}" for s in leaves(data["steps"])}


def copy_tracked(source: Path, dest: Path) -> None:
    """Copy the files git tracks under `source` (the sample without its build outputs)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=source, capture_output=True, text=True, check=True
    ).stdout
    for rel in filter(None, listed.split("\0")):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, target)


@pytest.fixture(scope="module")
def amd_template(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """main (pushed to a real origin) holds the real AMD suites; work happens on `feature`.

    Built once per module; tests write to their own copy (`amd_repo`).
    """
    repo = GitRepo.create(tmp_path_factory.mktemp("amd-template") / "omni")
    shutil.copytree(corpus_amd(), repo.path / ".buildkite" / "amd")
    repo.commit_files({"vllm_omni/model.py": "x = 1\n", "docs/index.md": "# docs\n"}, "init")
    repo.push("main")
    repo.branch("feature")
    return repo


@pytest.fixture
def amd_repo(amd_template: GitRepo, tmp_path: Path) -> GitRepo:
    """A copy of `amd_template` (checkout and bare origin) that this test may change."""
    assert amd_template.origin is not None
    repo = GitRepo(tmp_path / "omni", tmp_path / "omni-origin.git")
    assert repo.origin is not None
    shutil.copytree(amd_template.path, repo.path, symlinks=True)
    shutil.copytree(amd_template.origin, repo.origin, symlinks=True)
    repo.git("remote", "set-url", "origin", str(repo.origin))
    return repo


@dataclass
class GitHub:
    """A tiny GitHub API: PR number → labels; or a status, a body or a hang to fail with.

    With `hang` set, a request is never answered while the test runs (the
    handler waits for `released`, which the fixture sets at teardown).
    """

    labels: dict[str, list[str]] = field(default_factory=dict)
    status: int = 200
    body: bytes | None = None
    hang: bool = False
    released: threading.Event = field(default_factory=threading.Event)
    requests: list[str] = field(default_factory=list)
    url: str = ""


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> http.server.ThreadingHTTPServer:
    """A GitHub stand-in on 127.0.0.1 (a free port), answering in a background thread."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    # A short poll: `shutdown()` at teardown waits up to one poll interval (0.5 s by default).
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


@pytest.fixture
def github() -> Iterator[GitHub]:
    state = GitHub()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.path + " auth=" + str(self.headers.get("Authorization")))
            if state.hang:
                state.released.wait()
                return
            number = self.path.rsplit("/", 1)[-1]
            if state.status != 200 or (state.body is None and number not in state.labels):
                self.send_response(state.status if state.status != 200 else 404)
                self.end_headers()
                return
            body = state.body
            if body is None:
                body = json.dumps({"labels": [{"name": n} for n in state.labels[number]]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = _serve(Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    state.released.set()
    server.shutdown()
    server.server_close()


@dataclass
class Agent:
    standins: StandIns
    uploaded: Path

    def calls(self) -> list[list[str]]:
        return self.standins.argvs("buildkite-agent")

    def pipeline(self) -> dict[str, Any]:
        loaded: dict[str, Any] = yaml.safe_load(self.uploaded.read_text())
        return loaded


@pytest.fixture
def agent(standins: StandIns, tmp_path: Path) -> Agent:
    """A recording buildkite-agent; `pipeline upload FILE` keeps a copy of FILE (read from cwd)."""
    uploaded = tmp_path / "uploaded.yaml"
    standins.add(
        "buildkite-agent",
        f'if [[ "$1" == pipeline && "$2" == upload ]]; then cp "$3" {uploaded}; fi',
    )
    return Agent(standins, uploaded)


SCHEDULE_ENV = (
    "DEBUG_TEST_YAML", "NIGHTLY", "AMD_MIRROR_HW", "VLLM_USE_PRECOMPILED", "RUN_ALL",
    "GITHUB_TOKEN", "VLLM_OMNI_CI_GITHUB_REPO",
)  # fmt: skip


def bootstrap_env(
    repo: GitRepo, agent: Agent, github: GitHub, *, branch: str = "feature", pr: str = "false",
    **extra: str,
) -> dict[str, str]:  # fmt: skip
    env = buildkite_env(agent.standins.env())
    for key in SCHEDULE_ENV:
        env.pop(key, None)
    env.update(
        {
            "BUILDKITE": "true",
            "BUILDKITE_BRANCH": branch,
            "BUILDKITE_COMMIT": repo.sha(),
            "BUILDKITE_PULL_REQUEST": pr,
            "BUILDKITE_PIPELINE_SLUG": "vllm-omni-amd-ci",
            "VLLM_OMNI_CI_GITHUB_API": github.url,
        }
    )
    env.update(extra)
    return env


def run_bootstrap(repo: GitRepo, env: dict[str, str], *extra: str) -> Outcome:
    return run_inproc("bootstrap", "--platform", "rocm", "--repo", str(repo.path), *extra, env=env)


def append(text: str) -> Callable[[str], str]:
    return lambda old: old + text


def env_var(name: str, value: str) -> Callable[[str], str]:
    """Edit a suite file: add `name: value` to its top-level env."""
    return lambda old: old.replace("env:\n", f"env:\n  {name}: '{value}'\n", 1)


def apply(repo: GitRepo, change: dict[str, str | Callable[[str], str]]) -> None:
    for rel, new in change.items():
        path = repo.path / rel
        old = path.read_text() if path.exists() else ""
        repo.write(rel, new(old) if callable(new) else new)


# --------------------------------------------------------------------------- B rows

PRODUCT = {"vllm_omni/model.py": "x = 2\n"}
DOCS = {"docs/a.md": "new page\n"}


@dataclass
class B:
    """One golden row, run end to end: commit `change`, bootstrap (uploading), check."""

    change: dict[str, str | Callable[[str], str]] = field(default_factory=lambda: dict(PRODUCT))
    branch: str = "feature"  # "main": committed on main, a main build
    pr: str = "false"
    labels: list[str] = field(default_factory=list)  # what GitHub answers for the PR
    status: int = 200
    env: dict[str, str] = field(default_factory=dict)
    code: int = 0
    uploaded: tuple[str, ...] = ()  # suites whose steps the uploaded pipeline holds
    image_only: bool = False  # uploaded, with nothing but the image step (B17)
    groups: tuple[str, ...] | None = None  # top-level groups after the image group
    annotate: bool = False
    requests: int = 0
    lines: tuple[str, ...] = ()  # exact stderr lines
    error: str = ""  # the one error line (prefix), for code != 0
    alone: bool = False  # the error is all of stderr: found before git ran


B_ROWS: dict[str, B] = {
    "B1": B(
        pr="123", status=403, code=1, requests=1, error=bootstrap.LABEL_ERROR + " (GET ", alone=True
    ),
    "B2": B(pr="123", env={"DEBUG_TEST_YAML": "merge"}, uploaded=("merge",)),
    "B3": B(uploaded=("ready",), lines=(suites.FALLBACK_NOTICE,)),
    "B4": B(
        change=DOCS, pr="123", labels=["ready"], requests=1, annotate=True,
        lines=("Skipping AMD l2 suite due to skip-all decision.", bootstrap.NOTHING_LEFT),
    ),
    "B5": B(
        change=DOCS, pr="123", labels=["ready", "nightly-test"], requests=1,
        uploaded=("nightly",), lines=("Skipping AMD l2 suite due to skip-all decision.",),
    ),
    "B6": B(change=DOCS, branch="main", env={"NIGHTLY": "1"}, uploaded=("nightly",)),
    "B7": B(
        change=DOCS, branch="main", env={"NIGHTLY": "0"}, annotate=True,
        lines=("Skipping AMD l3 suite due to skip-all decision.", bootstrap.NOTHING_LEFT),
    ),
    "B8": B(
        change={".buildkite/cuda/test-ready.yml": "steps: []\n"}, branch="main",
        lines=("Skipping AMD l3 suite due to skip-l23 decision.", bootstrap.NOTHING_LEFT),
    ),
    "B9": B(
        change={".buildkite/amd/test-amd-merge.yml": append("\n# touched\n")},
        pr="9", labels=["merge-test"], requests=1, uploaded=("merge",),
    ),
    "B10": B(
        change={".buildkite/amd/test-amd-ready.yml": append("\n# touched\n")},
        pr="10", labels=["ready", "merge-test"], requests=1, uploaded=("ready",),
        lines=("Skipping AMD l3 suite due to skip-l23 decision.",),
    ),
    "B11": B(
        pr="11", labels=["ready", "merge-test"], requests=1, uploaded=("ready", "merge"),
        groups=("READY_TESTS", "MERGE_TESTS"),
        lines=("AMD test suites: READY_TESTS:test-amd-ready.yml MERGE_TESTS:test-amd-merge.yml",),
    ),
    "B12": B(
        change={
            ".buildkite/amd/test-amd-ready.yml": env_var("X", "1"),
            ".buildkite/amd/test-amd-merge.yml": env_var("X", "2"),
        },
        env={"DEBUG_TEST_YAML": "ready,merge"}, code=1,
        error="error: Conflicting environment value for X: '1' != '2'",
    ),
    "B13": B(
        change={"setup.py": "print()\n"}, pr="13", labels=["ready"], requests=1,
        uploaded=("ready",),
        lines=("Found changes: setup.py. Run all tests", "Run all: 1", FROM_SOURCE),
    ),
    "B14": B(
        change={"docker/Dockerfile.rocm": "FROM x\n"}, pr="14", labels=["ready"], requests=1,
        uploaded=("ready",), lines=(NOT_CRITICAL, "Run all: 0"),
    ),
    "B15-rocm": B(
        change={"csrc/rocm/x.cu": "x\n"}, pr="15", labels=["ready"], requests=1,
        uploaded=("ready",), lines=(NOT_CRITICAL, "Run all: 0"),
    ),
    "B15-cuda": B(
        change={"csrc/cuda/x.cu": "x\n"}, pr="15", labels=["ready"], requests=1,
        uploaded=("ready",), lines=("Found changes: csrc/cuda/x.cu. Run all tests", FROM_SOURCE),
    ),
    "B16": B(
        pr="16", labels=["ready"], requests=1, env={"VLLM_USE_PRECOMPILED": "0"},
        uploaded=("ready",), lines=("VLLM_USE_PRECOMPILED is already set to: 0", "Run all: 0"),
    ),
    # docs/differences.md "AMD render: data, not a template": empty groups are dropped.
    "B17": B(
        env={"BUILDKITE_PIPELINE_SLUG": "fastcheck"}, image_only=True,
        lines=("AMD Mirror HW: amdtentative",),
    ),
    # The template selected nothing for a typo and the build went green with the image
    # step alone; now it fails closed, before any request (docs/differences.md).
    "B17-typo": B(
        env={"AMD_MIRROR_HW": "amdprodution"}, pr="17", labels=["ready"], code=1, alone=True,
        error="error: AMD_MIRROR_HW='amdprodution' is not a mirror_hardwares value of the"
        " AMD suites: allowed values are amdproduction",
    ),
    "B17-uppercase": B(
        env={"AMD_MIRROR_HW": "AMDPRODUCTION"}, code=1, alone=True,
        error="error: AMD_MIRROR_HW='AMDPRODUCTION' is not a mirror_hardwares value",
    ),
    "B17-unknown": B(
        env={"AMD_MIRROR_HW": "mi355"}, code=1, alone=True,
        error="error: AMD_MIRROR_HW='mi355' is not a mirror_hardwares value",
    ),
    # fastcheck's amdtentative is the script's own choice: AMD_MIRROR_HW is not read.
    "B17-fastcheck-ignores-mirror": B(
        env={"BUILDKITE_PIPELINE_SLUG": "fastcheck", "AMD_MIRROR_HW": "typo"}, image_only=True,
        lines=("AMD Mirror HW: amdtentative",),
    ),
    # The script's default for an empty value, as for an unset one.
    "B17-empty": B(env={"AMD_MIRROR_HW": ""}, uploaded=("ready",),
                   lines=("AMD Mirror HW: amdproduction",)),
    # docs/differences.md "Selector errors name the input…": no spec strings in-process,
    # so an unknown suite can only come from DEBUG_TEST_YAML.
    "B18": B(
        env={"DEBUG_TEST_YAML": "weekly"}, code=1, alone=True,
        error="error: DEBUG_TEST_YAML entries must be 'merge', 'nightly', or 'ready', got 'weekly'",
    ),
    "A19-nightly-2": B(
        env={"NIGHTLY": "2"}, code=1, error="error: NIGHTLY must be 0 or 1, got '2'", alone=True
    ),
    "A19-nightly-true": B(
        env={"NIGHTLY": "true"}, code=1, error="error: NIGHTLY must be 0 or 1, got 'true'",
        alone=True,
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(B_ROWS))
def test_b_rows(name: str, amd_repo: GitRepo, agent: Agent, github: GitHub) -> None:
    row = B_ROWS[name]
    if row.branch == "main":
        amd_repo.git("checkout", "-q", "main")
    apply(amd_repo, row.change)
    amd_repo.commit(name)
    github.labels[row.pr] = row.labels
    github.status = row.status
    env = bootstrap_env(amd_repo, agent, github, branch=row.branch, pr=row.pr, **row.env)
    done = run_bootstrap(amd_repo, env)
    lines = done.stderr.splitlines()

    assert done.code == row.code, done.stderr
    assert done.stdout == ""  # the pipeline is uploaded, not printed
    assert "Traceback" not in done.stderr
    assert len(github.requests) == row.requests
    for line in row.lines:
        assert line in lines, (line, done.stderr)
    if row.code:
        errors = [ln for ln in lines if ln.startswith(("error:", "ERROR:"))]
        assert errors == [lines[-1]] and lines[-1].startswith(row.error), done.stderr
        assert len(lines) == 1 or not row.alone, done.stderr
        assert agent.calls() == []
        return
    if not (row.uploaded or row.image_only):
        assert agent.calls() == ([ANNOTATE] if row.annotate else [])
        assert bootstrap.NOTHING_LEFT in lines
        return
    assert agent.calls() == UPLOADS
    pipeline = agent.pipeline()
    assert schema_problems(pipeline) == []
    assert pipeline["steps"][0]["steps"][0]["key"] == render.BUILD_KEY
    expected = set().union(*(suite_labels(s) for s in row.uploaded))
    assert labels_of(pipeline) == expected
    groups = tuple(g.get("group") for g in pipeline["steps"][1:])
    if row.groups is not None:
        assert groups == row.groups
    elif len(row.uploaded) == 1:  # one suite keeps its own groups (§1.8)
        assert not set(groups) & {s.group for s in suites.SUITES}
    # Uploaded from a private directory: nothing is written into the checkout
    # (docs/differences.md, "AMD: the pipeline is uploaded from a private directory").
    assert not (amd_repo.path / ".buildkite" / "amd" / bootstrap.PIPELINE_FILE).exists()
    assert amd_repo.git("status", "--porcelain", "--untracked-files=all") == ""


def test_b11_env_is_the_union_and_no_temp_file(
    amd_repo: GitRepo, agent: Agent, github: GitHub, tmp_path: Path
) -> None:
    amd_repo.commit_files(PRODUCT, "product")
    env = bootstrap_env(
        amd_repo, agent, github, DEBUG_TEST_YAML="ready,merge", TMPDIR=str(tmp_path / "t")
    )
    (tmp_path / "t").mkdir()
    done = run_bootstrap(amd_repo, env)
    assert done.code == 0, done.stderr
    ready, merge = (
        yaml.safe_load((corpus_amd() / f"test-amd-{n}.yml").read_text())["env"]
        for n in ("ready", "merge")
    )
    assert agent.pipeline()["env"] == {k: str(v) for k, v in {**ready, **merge}.items()}
    assert list((tmp_path / "t").iterdir()) == []  # no amd-selected-tests.*.yml


def test_order_of_operations(amd_repo: GitRepo, agent: Agent, github: GitHub) -> None:
    """Spec §1.2: labels, diff, suites, skip-ci, critical files, then the upload."""
    amd_repo.commit_files({"setup.py": "x\n"}, "critical")
    github.labels["21"] = ["documentation"]  # no tier label: the ready fallback
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, pr="21"))
    assert done.code == 0, done.stderr
    assert len(github.requests) == 1
    lines = done.stderr.splitlines()
    order = [
        f"[diff]: 1 changed file(s) (PR build #21: origin/main...{amd_repo.sha()})",
        suites.FALLBACK_NOTICE,
        "[skip-ci]: product or non-whitelisted changes present; run normal CI",
        "Found changes: setup.py. Run all tests",
        "AMD test suites: READY_TESTS:test-amd-ready.yml",
    ]
    assert [lines.index(line) for line in order] == sorted(lines.index(line) for line in order)
    assert agent.calls() == UPLOADS


def test_a_failed_upload_exits_with_the_agent_status(
    amd_repo: GitRepo, standins: StandIns, github: GitHub
) -> None:
    standins.add("buildkite-agent", '[[ "$1" == pipeline ]] && exit 3; exit 0')
    agent = Agent(standins, Path("unused"))
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github))
    assert done.code == 3
    assert agent.calls() == UPLOADS
    last = done.stderr.splitlines()[-1]  # the door's wording; only its gist is ours
    assert last.startswith("error: ") and "pipeline upload" in last and "exit 3" in last


def test_a_failed_annotation_is_ignored(
    amd_repo: GitRepo, standins: StandIns, github: GitHub
) -> None:
    """B4 with an agent that cannot annotate: the script ran it with `|| true`."""
    standins.add("buildkite-agent", "exit 1")
    agent = Agent(standins, Path("unused"))
    amd_repo.commit_files(DOCS, "docs")
    github.labels["4"] = ["ready"]
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, pr="4"))
    assert done.code == 0, done.stderr
    assert agent.calls() == [ANNOTATE]
    assert done.stderr.splitlines()[-1] == bootstrap.NOTHING_LEFT


def test_buildkite_without_a_branch_is_an_input_error(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    env = bootstrap_env(amd_repo, agent, github, NIGHTLY="x")
    del env["BUILDKITE_BRANCH"]
    done = run_bootstrap(amd_repo, env)
    assert done.code == 1
    assert done.stderr.splitlines() == [
        "error: BUILDKITE_BRANCH is not set",
        "error: NIGHTLY must be 0 or 1, got 'x'",
    ]
    assert agent.calls() == []


def test_a_subfolder_target_sees_only_its_own_changes(
    tmp_path: Path, agent: Agent, github: GitHub
) -> None:
    """--repo omni inside a larger repository: a change outside omni/ is not omni's."""
    outer = GitRepo.create(tmp_path / "mono")
    shutil.copytree(corpus_amd(), outer.path / "omni" / ".buildkite" / "amd")
    outer.commit_files({"omni/docs/a.md": "a\n", "server/app.py": "x = 1\n"}, "base")
    outer.push("main")
    outer.branch("feature")
    outer.commit_files({"omni/docs/a.md": "b\n", "server/app.py": "x = 2\n"}, "docs + outside")
    github.labels["31"] = ["ready"]
    env = bootstrap_env(outer, agent, github, pr="31")
    done = run_inproc(
        "bootstrap", "--platform", "rocm", "--repo", str(outer.path / "omni"), env=env
    )
    assert done.code == 0, done.stderr
    assert "[skip-ci]: CI skipped — docs or pytest skip-mark changes only" in done.stderr
    assert agent.calls() == [ANNOTATE]


# --------------------------------------------------------------------------- labels


def test_label_request_sends_the_token_and_never_prints_it(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    github.status = 500
    token = "ghp_canary_token_123456"
    env = bootstrap_env(amd_repo, agent, github, pr="5", GITHUB_TOKEN=token)
    done = run_bootstrap(amd_repo, env)
    assert done.code == 1
    assert github.requests == [f"/repos/vllm-project/vllm-omni/pulls/5 auth=Bearer {token}"]
    assert done.stderr.splitlines() == [
        f"{bootstrap.LABEL_ERROR} (GET {github.url}/repos/vllm-project/vllm-omni/pulls/5: "
        "HTTP 500 Internal Server Error)"
    ]
    assert token not in done.stderr + done.stdout
    assert agent.calls() == []


def test_labels_are_read_without_a_token(github: GitHub) -> None:
    github.labels["8"] = ["ready", "nightly-test"]
    env = {bootstrap.GITHUB_API_ENV: github.url, bootstrap.GITHUB_REPO_ENV: "o/r"}
    assert bootstrap.fetch_labels("8", env) == "ready\nnightly-test"
    assert github.requests == ["/repos/o/r/pulls/8 auth=None"]


@pytest.mark.parametrize(
    ("setup", "cause"),
    [
        (lambda gh: setattr(gh, "status", 404), "HTTP 404 Not Found"),
        (lambda gh: setattr(gh, "body", b"<html>rate limited</html>"), "unexpected response"),
        (lambda gh: setattr(gh, "body", b'{"message": "x"}'), "unexpected response: KeyError"),
        (lambda gh: setattr(gh, "body", b'{"labels": [1]}'), "unexpected response: TypeError"),
        (lambda gh: setattr(gh, "hang", True), "timed out"),
    ],
    ids=["http-error", "not-json", "no-labels", "bad-label", "timeout"],
)
def test_every_label_failure_is_fatal(
    setup: Callable[[GitHub], None], cause: str, github: GitHub
) -> None:
    setup(github)
    env = {bootstrap.GITHUB_API_ENV: github.url}
    # With `hang`, the server never answers: only the timeout can end the request.
    with pytest.raises(Stop) as caught:
        bootstrap.fetch_labels("7", env, timeout=0.5)
    assert caught.value.code == 1
    assert len(github.requests) == 1
    (line,) = caught.value.lines
    assert line.startswith(f"{bootstrap.LABEL_ERROR} (GET {github.url}/repos/")
    assert cause in line


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_api_is_fatal() -> None:
    api = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(Stop) as caught:
        bootstrap.fetch_labels("7", {bootstrap.GITHUB_API_ENV: api})
    assert caught.value.code == 1
    assert caught.value.lines[0].startswith(f"{bootstrap.LABEL_ERROR} (GET {api}/repos/")
    assert "Connection refused" in caught.value.lines[0]


def test_labels_are_not_requested_outside_a_pr_or_with_debug_yaml(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    """Spec §1.3: only a PR build without DEBUG_TEST_YAML asks GitHub (B2, B3)."""
    for pr, debug in (("false", ""), ("", ""), ("4", "ready")):
        env = bootstrap_env(amd_repo, agent, github, pr=pr, DEBUG_TEST_YAML=debug)
        done = run_bootstrap(amd_repo, env, "--dry-run")
        assert done.code == 0, done.stderr
    assert github.requests == []


# --------------------------------------------------------------------------- bad input

READY = ".buildkite/amd/test-amd-ready.yml"
ONE_STEP = (
    "steps:\n  - label: X\n    agent_pool: {pool}\n    mirror_hardwares: [amdproduction]\n"
    "    timeout_in_minutes: {timeout}\n    commands: [c1]\n"
)


@pytest.mark.parametrize(
    ("name", "suite", "error"),
    [
        ("invalid YAML", "steps: [unclosed\n", "ready.yml: invalid YAML at line 2, column 1: "),
        ("not a suite", "steps: 3\n", "ready.yml: not an AMD suite (a mapping with a `steps`"),
        ("env not a mapping", "env: [a]\nsteps: []\n", "ready.yml: `env` must be a mapping"),
        ("missing file", None, "ready.yml: cannot read: No such file or directory"),
        ("a bare step", "steps: [wait]\n", "ready.yml: steps[0] must be a mapping"),
        (
            "a group child that is not a mapping",
            "steps:\n  - group: g\n    steps: [oops]\n",
            "ready.yml: steps[0].steps[0] must be a mapping, got 'oops'",
        ),
        (
            "schema-invalid step",
            ONE_STEP.format(pool="mi300_1", timeout="soon"),
            ".buildkite/amd/test-amd-ready.yml: rendered pipeline fails the Buildkite schema at "
            "steps/1/timeout_in_minutes: 'soon' is not of type 'integer'",
        ),
        (
            "pool without a count",
            ONE_STEP.format(pool="mi300", timeout=5),
            "step 'X': agent_pool 'mi300' must end in _<gpu count> (e.g. mi300_1)",
        ),
    ],
)  # fmt: skip
def test_bad_suites_fail_closed(
    name: str, suite: str | None, error: str, amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    if suite is None:
        amd_repo.remove(READY)
    else:
        amd_repo.write(READY, suite)
    amd_repo.commit(name)
    env = bootstrap_env(amd_repo, agent, github, DEBUG_TEST_YAML="ready")
    done = run_bootstrap(amd_repo, env)
    assert done.code == 1
    lines = done.stderr.splitlines()
    assert [ln for ln in lines if ln.startswith("error:")] == [lines[-1]], done.stderr
    assert lines[-1].startswith("error: ") and error in lines[-1], done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert agent.calls() == []


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--platform", "foo"], {}, [
            "error: --platform: unknown platform 'foo': allowed values are rocm (alias amd), cuda, "
            "npu, "
            "xpu (alias intel)"
        ]),
        ([], {}, [
            "error: --platform is required: rocm (alias amd), cuda, npu, xpu (alias intel)"
        ]),
        (["--platform", "rocm"], {"DEBUG_TEST_YAML": ", ,"}, [
            "error: DEBUG_TEST_YAML did not contain a test suite"
        ]),
        (["--platform", "rocm"], {"DEBUG_TEST_YAML": "ready,READY"}, [
            "error: duplicate DEBUG_TEST_YAML suite 'ready'"
        ]),
        (["--platform", "rocm"], {"NIGHTLY": "yes", "DEBUG_TEST_YAML": "weekly"}, [
            "error: NIGHTLY must be 0 or 1, got 'yes'",
            "error: DEBUG_TEST_YAML entries must be 'merge', 'nightly', or 'ready', got 'weekly'",
        ]),
    ],
    ids=["unknown-platform", "no-platform", "empty-debug", "duplicate-debug", "both"],
)  # fmt: skip
def test_bad_inputs_stop_before_anything_runs(
    args: list[str], env: dict[str, str], expected: list[str],
    amd_repo: GitRepo, agent: Agent, github: GitHub,
) -> None:  # fmt: skip
    """One line per problem and nothing else: no label request, no git log, no upload."""
    full = bootstrap_env(amd_repo, agent, github, pr="3", **env)
    done = run_inproc("bootstrap", *args, "--repo", str(amd_repo.path), env=full)
    assert done.code == (2 if "rocm" not in args else 1)
    assert done.stderr.splitlines() == expected
    assert done.stdout == ""
    assert github.requests == [] and agent.calls() == []


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
    return {k: v for k, v in base.items() if v is not None}


GPU = ("plugins", 0, "kubernetes", "podSpecPatch", "containers", 0, "resources")
CONTAINER = ("plugins", 0, "kubernetes", "podSpecPatch", "containers", 0)
COMMANDS_HEAD = "(command rocm-smi || true) && cd /app/vllm-omni"


@dataclass
class T:
    data: dict[str, Any]
    expect: dict[tuple[Any, ...], Any]
    suite_env: dict[str, Any] = field(default_factory=dict)
    grouped: bool = False
    mirror_hw: str = "amdproduction"


T_ROWS: dict[str, T] = {
    "T1": T(step(), {
        ("label",): "mi300_4: X",
        ("agents",): {"queue": "amd_mi300_4"},
        (*GPU, "limits", "amd.com/gpu"): "4",
        (*GPU, "requests", "amd.com/gpu"): "4",
        ("env", "VLLM_CI_EXPECTED_GPU_COUNT"): "4",
        ("depends_on",): "amd-build",
        ("soft_fail",): False,
        ("priority",): 100,
    }),
    "T2": T(step(grade=None), {("soft_fail",): True}),
    "T2-NonBlocking": T(step(grade="NonBlocking"), {("soft_fail",): True}),
    # docs/differences.md "AMD render: data, not a template": no pool means mi300_1 throughout.
    "T3": T(step(agent_pool=None), {
        ("agents",): {"queue": "amd_mi300_1"},
        ("label",): "mi300_1: X",
        (*GPU, "limits", "amd.com/gpu"): "1",
        ("env", "VLLM_CI_EXPECTED_GPU_COUNT"): "1",
    }),
    "T4": T(
        step(retry={"automatic": [{"exit_status": 134, "limit": 1, "signal": "x"}]}),
        {("retry",): {"automatic": [{"exit_status": 134, "limit": 1}]}},
    ),
    "T4-group": T(
        step(retry={"automatic": [{"exit_status": 134, "limit": 1}]}),
        {("retry",): {"automatic": [{"exit_status": 134, "limit": 1}]}},
        grouped=True,
    ),
    "T5": T(step(parallelism=4, artifact_paths=["a.log"], timeout_in_minutes=90), {
        ("parallelism",): 4, ("artifact_paths",): ["a.log"], ("timeout_in_minutes",): 90,
    }),
    "T6": T(
        step(env={"A": "b"}),
        {
            ("env", "A"): "b",
            ("env", "TEST_COMMANDS"): "\n".join([
                COMMANDS_HEAD, 'export VLLM_WORKER_MULTIPROC_METHOD="spawn"', 'export A="b"',
                "c1", "c2",
            ]),
        },
        suite_env={"VLLM_WORKER_MULTIPROC_METHOD": "spawn"},
    ),
    # docs/differences.md "AMD render": blank lines in a command block are kept.
    "T6-command-block": T(step(commands=None, command="a \\\n  --x\n\nb\n"), {
        ("env", "TEST_COMMANDS"): "\n".join([COMMANDS_HEAD, "a \\", "  --x", "", "b"]),
    }),
    "T7": T(step(agent_pool="mi250_1"), {
        ("env", "TEST_COMMANDS"): "\n".join(
            [COMMANDS_HEAD, "python3 -m pip uninstall -y amd-aiter", "c1", "c2"]
        ),
    }),
    "T8": T(step(mirror_hardwares=["amdtentative"]), {}),
    # docs/differences.md "AMD render: data, not a template": the tool's commands.
    "T9": T(step(), {
        (*CONTAINER, "image"): "rocm/vllm-omni:$BUILDKITE_COMMIT",
        ("command",): "vllm-omni-ci run-tests --platform rocm",
    }),
    "T9-filtered": T(step(), {}, mirror_hw="amdtentative"),
}  # fmt: skip


def dig(data: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


@pytest.mark.parametrize("name", list(T_ROWS))
def test_t_rows(name: str) -> None:
    row = T_ROWS[name]
    entry = {"group": "g", "steps": [row.data]} if row.grouped else row.data
    pipeline, dropped, _ = render.render_pipeline(row.suite_env, [entry], row.mirror_hw)
    assert schema_problems(pipeline) == []
    image_group = pipeline["steps"][0]
    assert [s["key"] for s in image_group["steps"]] == [render.BUILD_KEY]  # T9: always first
    assert image_group["steps"][0]["commands"] == ["vllm-omni-ci build-image --platform rocm"]
    assert pipeline.get("env", {}) == row.suite_env
    out = rendered_leaves(pipeline)
    if not row.expect:  # T8: filtered by mirror_hardwares
        assert out == [] and dropped == ["X"]
        assert len(pipeline["steps"]) == 1  # no empty group left behind
        return
    (got,) = out
    if row.grouped:
        assert pipeline["steps"][1]["group"] == "g"
    for path, value in row.expect.items():
        assert dig(got, path) == value, path


@pytest.mark.parametrize(("pool", "gpus"), [("mi300_1", 1), ("mi300_8", 8), ("mi355_16", 16)])
def test_gpu_count_is_the_numeric_suffix(pool: str, gpus: int) -> None:
    """docs/differences.md "AMD render": the whole suffix, not the last character (16, not 6)."""
    out = render.render_step(step(agent_pool=pool), {})
    assert out["env"]["VLLM_CI_EXPECTED_GPU_COUNT"] == str(gpus)
    assert dig(out, (*GPU, "limits", "amd.com/gpu")) == str(gpus)
    assert out["agents"]["queue"] == f"amd_{pool}"


def test_export_values_escape_quotes_and_keep_buildkite_dollars() -> None:
    """docs/differences.md "AMD render": `"` and `\\` are escaped; `$`/`$$` mean what they
    mean in the step commands (Buildkite interpolation, then bash)."""
    env = {"Q": 'a"b\\c', "D": "$$HOME/x:$BUILDKITE_COMMIT"}
    lines = render.test_commands(step(env=env), {}, "mi300_1").splitlines()
    assert 'export Q="a\\"b\\\\c"' in lines
    assert 'export D="$$HOME/x:$BUILDKITE_COMMIT"' in lines
    (export_q,) = [ln for ln in lines if ln.startswith("export Q=")]
    done = subprocess.run(
        ["bash", "-c", export_q + '; printf %s "$Q"'], capture_output=True, text=True, check=True
    )
    assert done.stdout == env["Q"]  # bash reads back exactly the YAML value


def test_a_bad_pool_is_an_error_naming_the_step() -> None:
    with pytest.raises(Failure) as caught:
        render.render_step(step(agent_pool="mi300_x"), {})
    assert caught.value.problems == (
        "step 'X': agent_pool 'mi300_x' must end in _<gpu count> (e.g. mi300_1)",
    )


# --------------------------------------------------------------------------- real suites


@pytest.mark.parametrize("name", list(LEAF_COUNTS))
def test_real_suite_leaf_counts(name: str) -> None:
    """22/22/9, counted on the raw YAML text: one `label:` per leaf step, none on groups."""
    text = (corpus_amd() / f"test-amd-{name}.yml").read_text()
    step_labels = [ln for ln in text.splitlines() if ln.strip().startswith("- label:")]
    assert len(step_labels) == LEAF_COUNTS[name]
    data = yaml.safe_load(text)
    assert len(leaves(data["steps"])) == LEAF_COUNTS[name]


def source_body(src: dict[str, Any]) -> str:
    if "commands" in src:
        return "\n".join(str(c) for c in src["commands"]).strip()
    return str(src["command"]).strip()


@pytest.mark.parametrize(
    "names",
    [["ready"], ["merge"], ["nightly"], ["ready", "merge"], ["ready", "merge", "nightly"]],
    ids="+".join,
)
def test_real_suites_render(names: list[str]) -> None:
    sources = {n: yaml.safe_load((corpus_amd() / f"test-amd-{n}.yml").read_text()) for n in names}
    per_suite = {n: leaves(sources[n]["steps"]) for n in names}
    source_leaves = [s for n in names for s in per_suite[n]]
    assert len(source_leaves) == sum(LEAF_COUNTS[n] for n in names)
    distinct: list[dict[str, Any]] = []
    for s in source_leaves:
        if s not in distinct:
            distinct.append(s)

    docs = [combine.load_suite(corpus_amd(), suites.BY_NAME[n]) for n in names]
    err: list[str] = []
    combined = combine.combine(docs, err.append)
    pipeline, not_mirrored, _ = render.render_pipeline(combined.env, combined.steps)
    assert schema_problems(pipeline) == []
    assert not_mirrored == []  # every real step is on amdproduction

    dropped_lines = [ln for ln in err if ln.startswith("Dropped duplicate ")]
    assert len(dropped_lines) == len(source_leaves) - len(distinct)
    out = rendered_leaves(pipeline)
    assert len(out) == len(distinct)
    for src in distinct:
        pool = src["agent_pool"]
        matches = [
            s
            for s in out
            if s["label"] == f"{pool}: {src['label']}"
            and s["agents"] == {"queue": f"amd_{pool}"}
            and s["command"] == render.RUN_TESTS
            and s["env"]["TEST_COMMANDS"].endswith("\n" + source_body(src))
            and s["soft_fail"] is (src.get("grade") != "Blocking")
            and s.get("parallelism") == src.get("parallelism")
            and s.get("timeout_in_minutes") == src.get("timeout_in_minutes")
        ]
        assert len(matches) == 1, src["label"]
    if len(names) > 1:  # one group per suite, holding that suite's steps minus duplicates
        groups = {g["group"]: g["steps"] for g in pipeline["steps"][1:]}
        assert list(groups) == [suites.BY_NAME[n].group for n in names]
        for n in names:
            kept = len(per_suite[n]) - sum(f" {suites.BY_NAME[n].group} " in ln for ln in err)
            assert len(groups[suites.BY_NAME[n].group]) == kept


def test_ready_plus_merge_is_43_jobs_as_upstream_pins() -> None:
    """Spec §1.8: upstream's combine_test_suites.py test pins ready+merge at 56 raw
    jobs (sum of parallelism) and 43 after de-duplication, for this revision."""
    docs = [combine.load_suite(corpus_amd(), suites.BY_NAME[n]) for n in ("ready", "merge")]
    combined = combine.combine(docs, lambda _line: None)
    pipeline, _, _ = render.render_pipeline(combined.env, combined.steps)

    def jobs(steps: list[dict[str, Any]]) -> int:
        return sum(int(s.get("parallelism") or 1) for s in steps)

    assert sum(jobs(leaves(d.steps)) for d in docs) == 56
    assert jobs(rendered_leaves(pipeline)) == 43


# --------------------------------------------------------------------------- the sample


def test_end_to_end_on_a_repo_made_from_the_sample(
    tmp_path: Path, agent: Agent, github: GitHub
) -> None:
    """A PR labelled ready + merge-test on a copy of the sample: labels from the local
    GitHub API, one diff for both gated suites, upload through the recording agent."""
    repo = GitRepo.create(tmp_path / "sample")
    copy_tracked(SAMPLE, repo.path)
    repo.commit("sample")
    repo.push("main")
    repo.branch("feature")
    repo.write("omni_sample/new_module.py", "VALUE = 1\n")
    repo.commit("product change")
    github.labels["77"] = ["documentation", "merge-test", "ready"]
    bin_dir, git_log = git_counter(tmp_path)
    env = bootstrap_env(repo, agent, github, pr="77", GITHUB_TOKEN="ghp_sample_secret_987")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"

    done = run_bootstrap(repo, env)
    assert done.code == 0, done.stderr
    assert done.stdout == ""
    assert "ghp_sample_secret_987" not in done.stderr
    assert github.requests == [
        "/repos/vllm-project/vllm-omni/pulls/77 auth=Bearer ghp_sample_secret_987"
    ]
    calls = agent.standins.calls("buildkite-agent")
    assert [c["argv"] for c in calls] == UPLOADS
    (cwd,) = {c["cwd"] for c in calls}  # one private directory for both, outside the checkout
    assert not Path(cwd).is_relative_to(repo.path) and not Path(cwd).exists()
    lines = done.stderr.splitlines()
    skip_lines = [ln for ln in lines if ln.startswith("[skip-ci]: ")]
    assert skip_lines == ["[skip-ci]: product or non-whitelisted changes present; run normal CI"]
    assert "AMD test suites: READY_TESTS:test-amd-ready.yml MERGE_TESTS:test-amd-merge.yml" in lines
    # Two gated suites (ready l2, merge l3) and the critical scan share one diff.
    diffs = [c for c in git_log.read_text().splitlines() if " diff " in f" {c} "]
    assert len([c for c in diffs if "--name-only" in c]) == 1, diffs

    pipeline = agent.pipeline()
    assert schema_problems(pipeline) == []
    amd_dir = repo.path / ".buildkite" / "amd"
    assert labels_of(pipeline) == suite_labels("ready", amd_dir) | suite_labels("merge", amd_dir)
    assert [g["group"] for g in pipeline["steps"]][1:] == ["READY_TESTS", "MERGE_TESTS"]

    # The dry run, given the same labels (it never asks GitHub), prints exactly what was
    # uploaded, on stdout alone, and uploads nothing.
    agent.standins.log.unlink()
    dry = run_bootstrap(repo, env, "--dry-run", "--labels", "documentation,merge-test,ready")
    assert dry.code == 0, dry.stderr
    assert yaml.safe_load(dry.stdout) == pipeline
    assert len(github.requests) == 1  # still only the real run's
    assert agent.calls() == [] and not (amd_dir / bootstrap.PIPELINE_FILE).exists()
    not_run = [ln for ln in dry.stderr.splitlines() if ln.startswith("(dry-run) not run: ")]
    assert not_run == [
        f"(dry-run) not run: (cd '{bootstrap.PRIVATE_DIR}' && buildkite-agent {' '.join(argv)})"
        for argv in UPLOADS
    ]


def test_done_when_sample_dry_run_prints_a_schema_valid_pipeline() -> None:
    """The issue's command, verbatim: `DEBUG_TEST_YAML=ready vllm-omni-ci bootstrap
    --platform rocm --repo examples/omni-sample --dry-run`, from the repository root."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE")}
    env.pop("NIGHTLY", None)
    env["DEBUG_TEST_YAML"] = "ready"
    done = run_inproc(
        "bootstrap", "--platform", "rocm", "--repo", "examples/omni-sample", "--dry-run",
        env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.code == 0, done.stderr
    pipeline = yaml.safe_load(done.stdout)
    assert schema_problems(pipeline) == []
    assert yamlio.dumps(pipeline) == done.stdout  # stdout is the YAML and nothing else
    assert labels_of(pipeline) == suite_labels("ready", SAMPLE / ".buildkite" / "amd")
    assert "steps:" not in done.stderr
    assert not (SAMPLE / ".buildkite" / "amd" / bootstrap.PIPELINE_FILE).exists()


@pytest.mark.parametrize("api", ["not a url", "ftp://127.0.0.1:9", "file:///etc", "127.0.0.1:9"])
def test_an_api_that_is_not_an_http_url_is_a_label_failure(api: str) -> None:
    """No traceback for a mistyped $VLLM_OMNI_CI_GITHUB_API, and no file:// read."""
    with pytest.raises(Stop) as caught:
        bootstrap.fetch_labels("7", {bootstrap.GITHUB_API_ENV: api})
    assert caught.value.code == 1
    cause = f"VLLM_OMNI_CI_GITHUB_API={api!r}: allowed values are http(s) URLs"
    assert caught.value.lines == (f"{bootstrap.LABEL_ERROR} ({cause})",)


# --------------------------------------------------------------------------- inputs (issue 23)


def test_an_empty_buildkite_branch_is_a_branch_that_is_not_main(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    """Set but empty, BUILDKITE_BRANCH is a value, as under the script's `set -u`: not
    main, so the ready fallback (it used to stop with `BUILDKITE_BRANCH is not set`)."""
    amd_repo.commit_files(PRODUCT, "product")
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, branch=""))
    assert done.code == 0, done.stderr
    assert suites.FALLBACK_NOTICE in done.stderr.splitlines()
    assert "AMD test suites: READY_TESTS:test-amd-ready.yml" in done.stderr.splitlines()
    assert agent.calls() == UPLOADS
    assert labels_of(agent.pipeline()) == suite_labels("ready")


# PR labels without the network: --labels, then BUILDKITE_PULL_REQUEST_LABELS, then GitHub.


def test_buildkite_pr_labels_replace_the_github_request(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    amd_repo.commit_files(PRODUCT, "product")
    github.status = 500  # a request would fail the build
    env = bootstrap_env(
        amd_repo, agent, github, pr="41", BUILDKITE_PULL_REQUEST_LABELS="merge-test,ready"
    )
    done = run_bootstrap(amd_repo, env)
    assert done.code == 0, done.stderr
    assert github.requests == []
    assert [g["group"] for g in agent.pipeline()["steps"][1:]] == ["READY_TESTS", "MERGE_TESTS"]


def test_empty_buildkite_pr_labels_mean_no_labels(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    github.status = 500
    env = bootstrap_env(amd_repo, agent, github, pr="42", BUILDKITE_PULL_REQUEST_LABELS="")
    done = run_bootstrap(amd_repo, env, "--dry-run")
    assert done.code == 0, done.stderr
    assert github.requests == []
    assert suites.FALLBACK_NOTICE in done.stderr.splitlines()
    assert labels_of(yaml.safe_load(done.stdout)) == suite_labels("ready")


def test_the_labels_option_wins_and_makes_no_request(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    github.status = 500
    env = bootstrap_env(amd_repo, agent, github, pr="43", BUILDKITE_PULL_REQUEST_LABELS="ready")
    done = run_bootstrap(amd_repo, env, "--labels", "merge-test")
    assert done.code == 0, done.stderr
    assert github.requests == []
    assert "AMD test suites: MERGE_TESTS:test-amd-merge.yml" in done.stderr.splitlines()
    assert labels_of(agent.pipeline()) == suite_labels("merge")


def test_a_pr_dry_run_without_labels_stops_before_any_request(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    """`BUILDKITE_PULL_REQUEST=1 … --dry-run` asked GitHub (and failed offline)."""
    github.labels["1"] = ["ready"]
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, pr="1"), "--dry-run")
    assert done.code == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: PR #1 needs its labels and --dry-run makes no GitHub request: give them with"
        " --labels (comma-separated, '' for none) or BUILDKITE_PULL_REQUEST_LABELS"
    ]
    assert done.stdout == ""
    assert github.requests == [] and agent.calls() == []
    # Either source makes the same dry run work, still without a request.
    for args, extra in ((["--labels", "ready"], {}), ([], {bootstrap.LABELS_ENV: "ready"})):
        env = bootstrap_env(amd_repo, agent, github, pr="1", **extra)
        ok = run_bootstrap(amd_repo, env, "--dry-run", *args)
        assert ok.code == 0, ok.stderr
        assert labels_of(yaml.safe_load(ok.stdout)) == suite_labels("ready")
        assert "warning:" not in ok.stderr
    assert github.requests == []
    # A misspelt label still falls back to the ready suite, with a warning (issue 35).
    env = bootstrap_env(amd_repo, agent, github, pr="1")
    typo = run_bootstrap(amd_repo, env, "--dry-run", "--labels", "merge-tset")
    assert typo.code == 0, typo.stderr
    assert labels_of(yaml.safe_load(typo.stdout)) == suite_labels("ready")
    warned = [ln for ln in typo.stderr.splitlines() if ln.startswith("warning: --labels: ")]
    assert warned == [
        "warning: --labels: 'merge-tset' is no tier's label; did you mean 'merge-test'? (the"
        " tiers' labels: ready, merge-test, nightly-test, weekly-test; any other selects nothing)"
    ]


@pytest.mark.parametrize("platform", ["cuda", "npu", "xpu"])
def test_labels_are_an_option_of_the_rocm_bootstrap_only(
    platform: str, amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    env = bootstrap_env(amd_repo, agent, github)
    done = run_inproc(
        "bootstrap", "--platform", platform, "--labels", "ready", "--repo", str(amd_repo.path),
        "--dry-run", env=env,
    )  # fmt: skip
    assert done.code == 2
    assert done.stderr.splitlines() == [
        f"error: --labels: only for --platform rocm; the {platform} bootstrap uploads `if`"
        " conditions that Buildkite evaluates against the PR's labels itself"
    ]
    assert done.stdout == "" and agent.calls() == []


# BUILDKITE_PULL_REQUEST: digits or false (docs/differences.md).


@pytest.mark.parametrize(
    "value", ["1/../../../evil", "1 2", "1;touch pwned", "12\n", "-1", "abc", "False", "\uff11"]
)
def test_a_pr_number_that_is_not_digits_is_an_input_error(
    value: str, amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    token = "ghp_pr_canary_0042"
    env = bootstrap_env(amd_repo, agent, github, pr=value, GITHUB_TOKEN=token)
    for extra in ([], ["--labels", "ready"], ["--dry-run"]):
        done = run_bootstrap(amd_repo, env, *extra)
        assert done.code == 2, done.stderr
        assert done.stderr.splitlines() == [
            f"error: BUILDKITE_PULL_REQUEST: {value!r} is not a PR number: allowed values are"
            " digits or 'false' (empty: unset)"
        ]
        assert done.stdout == ""
    assert github.requests == [] and agent.calls() == []
    assert not (amd_repo.path / "pwned").exists()
    with pytest.raises(UserError) as caught:  # the request itself refuses it too
        bootstrap.fetch_labels(value, {bootstrap.GITHUB_API_ENV: github.url})
    assert caught.value.code == 2
    assert github.requests == []


@pytest.mark.parametrize("value", ["", "false"])
def test_an_empty_or_false_pr_is_not_a_pr(
    value: str, amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github, pr=value), "--dry-run")
    assert done.code == 0, done.stderr
    assert github.requests == []
    assert suites.FALLBACK_NOTICE in done.stderr.splitlines()


# The label request never follows a redirect (docs/differences.md).


@dataclass
class Recorder:
    """An HTTP server that answers every GET with `status`, and records what arrived."""

    status: int = 200
    location: str = ""
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def servers() -> Iterator[Callable[[], Recorder]]:
    started: list[http.server.ThreadingHTTPServer] = []

    def start() -> Recorder:
        state = Recorder()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                state.requests.append((self.path, self.headers.get("Authorization")))
                self.send_response(state.status)
                if state.location:
                    self.send_header("Location", state.location + self.path)
                body = json.dumps({"labels": [{"name": "ready"}]}).encode()
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = _serve(Handler)
        started.append(server)
        state.url = f"http://127.0.0.1:{server.server_address[1]}"
        return state

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_the_token_goes_nowhere(
    status: int, servers: Callable[[], Recorder], amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    elsewhere = servers()  # another origin (port), answering with labels
    api = servers()
    api.status, api.location = status, elsewhere.url
    token = "ghp_redirect_canary_77"
    env = bootstrap_env(amd_repo, agent, github, pr="7", GITHUB_TOKEN=token)
    env[bootstrap.GITHUB_API_ENV] = api.url
    done = run_bootstrap(amd_repo, env)
    assert done.code == 1, done.stderr
    assert api.requests == [("/repos/vllm-project/vllm-omni/pulls/7", f"Bearer {token}")]
    assert elsewhere.requests == []  # neither the request nor the token arrived there
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"{bootstrap.LABEL_ERROR} (GET {api.url}/repos/")
    assert f"HTTP {status} " in line
    assert f"redirect to {elsewhere.url}/repos/vllm-project/vllm-omni/pulls/7 refused" in line
    assert token not in done.stderr + done.stdout
    assert agent.calls() == []


# AMD_MIRROR_HW: a value some suite step uses, or the default (docs/differences.md).


def test_a_mirror_value_of_another_suite_is_known_but_uploads_the_image_alone(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    nightly = ".buildkite/amd/test-amd-nightly.yml"
    text = (amd_repo.path / nightly).read_text()
    amd_repo.write(nightly, text.replace("[amdproduction]", "[amdproduction, mi355x]", 1))
    amd_repo.commit("nightly step mirrored on mi355x")
    env = bootstrap_env(amd_repo, agent, github, AMD_MIRROR_HW="mi355x")
    done = run_bootstrap(amd_repo, env, "--dry-run")  # ready: no step lists mi355x
    assert done.code == 0, done.stderr
    assert rendered_leaves(yaml.safe_load(done.stdout)) == []
    assert (
        "warning: AMD_MIRROR_HW='mi355x' is in no selected step's mirror_hardwares"
        " (they use: amdproduction); only the image step is uploaded"
    ) in done.stderr.splitlines()
    env["DEBUG_TEST_YAML"] = "nightly"
    chosen = run_bootstrap(amd_repo, env, "--dry-run")
    assert chosen.code == 0, chosen.stderr
    assert len(rendered_leaves(yaml.safe_load(chosen.stdout))) == 1
    env["AMD_MIRROR_HW"] = "mi355"  # the error lists what the suites use
    typo = run_bootstrap(amd_repo, env, "--dry-run")
    assert typo.code == 1
    assert typo.stderr.splitlines() == [
        "error: AMD_MIRROR_HW='mi355' is not a mirror_hardwares value of the AMD suites:"
        " allowed values are amdproduction, mi355x"
    ]


# The upload reads a private copy: concurrent bootstraps, read-only checkouts.


def test_another_bootstrap_on_the_checkout_cannot_change_what_we_upload(
    amd_repo: GitRepo, standins: StandIns, github: GitHub, tmp_path: Path
) -> None:
    """A nightly run on the same checkout writes `.buildkite/amd/pipeline.yaml` between
    our write and our upload (here: while our artifact upload runs)."""
    amd_repo.commit_files(PRODUCT, "product")
    shared = amd_repo.path / ".buildkite" / "amd" / bootstrap.PIPELINE_FILE
    uploaded = tmp_path / "uploaded.yaml"
    standins.add(
        "buildkite-agent",
        f"""
        if [[ "$1" == artifact ]]; then printf 'steps: [{{command: other-run}}]\\n' > {shared}; fi
        if [[ "$1" == pipeline ]]; then cp "$3" {uploaded}; fi
        """,
    )
    agent = Agent(standins, uploaded)
    done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github))
    assert done.code == 0, done.stderr
    assert agent.calls() == UPLOADS
    assert labels_of(agent.pipeline()) == suite_labels("ready")


def test_a_checkout_we_cannot_write_to_still_uploads(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    """`.buildkite/amd/pipeline.yaml` cannot be written (a directory there; and the folder
    read-only, which binds non-root users): the script's path was a traceback."""
    amd_dir = amd_repo.path / ".buildkite" / "amd"
    (amd_dir / bootstrap.PIPELINE_FILE).mkdir()
    amd_dir.chmod(0o555)
    try:
        done = run_bootstrap(amd_repo, bootstrap_env(amd_repo, agent, github))
    finally:
        amd_dir.chmod(0o755)
    assert done.code == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert agent.calls() == UPLOADS
    assert labels_of(agent.pipeline()) == suite_labels("ready")
    assert list((amd_dir / bootstrap.PIPELINE_FILE).iterdir()) == []


# plan reads the AMD code without its log lines.

LEGACY_LINES = ("Run all: ", "Nightly: ", "AMD Mirror HW: ", "AMD test suites: ")


def test_plan_keeps_the_bootstraps_log_lines_off_its_stderr(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    amd_repo.commit_files({"setup.py": "x\n"}, "critical")
    planned = run_inproc(
        "plan", "--repo", str(amd_repo.path), "--platform", "rocm", "--labels", "ready,merge-test",
        "--format", "json", env=buildkite_env(),
    )  # fmt: skip
    assert planned.code == 0, planned.stderr
    assert json.loads(planned.stdout)["platforms"][0]["status"] == "run"
    noise = [
        ln
        for ln in planned.stderr.splitlines()
        if ln.startswith((*LEGACY_LINES, "Found changes: ", "Dropped duplicate "))
        or ln in (FROM_SOURCE, NOT_CRITICAL, suites.FALLBACK_NOTICE)
    ]
    assert noise == [], planned.stderr
    # The bootstrap itself keeps them.
    env = bootstrap_env(amd_repo, agent, github, pr="5", BUILDKITE_PULL_REQUEST_LABELS="ready")
    booted = run_bootstrap(amd_repo, env, "--dry-run")
    assert booted.code == 0, booted.stderr
    for prefix in LEGACY_LINES:
        assert any(ln.startswith(prefix) for ln in booted.stderr.splitlines()), prefix
    assert FROM_SOURCE in booted.stderr.splitlines()


def test_every_bad_env_input_is_reported_at_once_and_a_bad_pr_wins_exit_2(
    amd_repo: GitRepo, agent: Agent, github: GitHub
) -> None:
    env = bootstrap_env(amd_repo, agent, github, pr="1 2", NIGHTLY="x", AMD_MIRROR_HW="typo")
    done = run_bootstrap(amd_repo, env)
    assert done.code == 2
    assert done.stderr.splitlines() == [
        "error: BUILDKITE_PULL_REQUEST: '1 2' is not a PR number: allowed values are digits or"
        " 'false' (empty: unset)",
        "error: NIGHTLY must be 0 or 1, got 'x'",
        "error: AMD_MIRROR_HW='typo' is not a mirror_hardwares value of the AMD suites:"
        " allowed values are amdproduction",
    ]
    assert github.requests == [] and agent.calls() == []
