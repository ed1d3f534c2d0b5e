"""`bootstrap --platform rocm`: replaces bootstrap-amd-omni.sh (pipeline spec §1).

The order of operations is the script's (§1.2): labels, diff, suites, skip-ci
per suite, critical files, render, validate, upload. Everything up to the
upload is computed in-process; the only side effects are the label request,
git (through the diff resolver) and `buildkite-agent`.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci import door
from ci.amd import combine, render, suites
from ci.errors import FAILURE, Stop, UserError
from ci.redact import Redactor

if TYPE_CHECKING:
    from ci.diff import Diff

LABEL_ERROR = "ERROR: Could not read PR labels; refusing to select an incorrect AMD test tier."
SKIP_ANNOTATION = ":memo: CI skipped — docs or pytest skip-mark changes only"
NOTHING_LEFT = "No AMD suites remain after skip-ci filtering."
GITHUB_API_ENV = "VLLM_OMNI_CI_GITHUB_API"
GITHUB_REPO_ENV = "VLLM_OMNI_CI_GITHUB_REPO"
DEFAULT_GITHUB_API = "https://api.github.com"
DEFAULT_GITHUB_REPO = "vllm-project/vllm-omni"
LABEL_TIMEOUT = 30.0  # seconds for the whole label request
PIPELINE_FILE = "pipeline.yaml"

CRITICAL_PREFIXES = (
    "docker/Dockerfile",
    "CMakeLists.txt",
    "requirements/common.txt",
    "requirements/cuda.txt",
    "requirements/build.txt",
    "requirements/test.txt",
    "setup.py",
    "csrc/",
    "cmake/",
)
NOT_CRITICAL_PREFIXES = (
    "docker/Dockerfile.",
    "csrc/cpu",
    "csrc/rocm",
    "cmake/hipify.py",
    "cmake/cpu_extension.cmake",
)


@dataclass(frozen=True)
class Inputs:
    """The script's env inputs (§1.1), read once."""

    branch: str
    pull_request: str
    debug_test_yaml: str
    nightly: bool
    mirror_hw: str
    run_all: bool
    use_precompiled: str

    @classmethod
    def from_env(cls, repo: Path, env: Mapping[str, str]) -> Inputs:
        from ci.target import resolve_branch

        # Bad NIGHTLY / DEBUG_TEST_YAML stop here, before the label request and
        # git: the script only found them in the selector, after both (exit 1 either way).
        # A missing BUILDKITE_BRANCH in Buildkite was `set -u`'s exit 1.
        problems: list[str] = []
        branch = ""
        try:
            branch = resolve_branch(repo, env=env)
        except UserError as exc:
            problems += list(exc.problems)
        nightly = False
        try:
            nightly = suites.parse_nightly(env.get("NIGHTLY") or "0")
        except UserError as exc:
            problems += list(exc.problems)
        if env.get("DEBUG_TEST_YAML"):
            try:
                suites.parse_debug_suites(env["DEBUG_TEST_YAML"])
            except UserError as exc:
                problems += list(exc.problems)
        UserError.collect(problems, code=FAILURE)
        mirror_hw = env.get("AMD_MIRROR_HW") or "amdproduction"
        if env.get("BUILDKITE_PIPELINE_SLUG") == "fastcheck":
            mirror_hw = "amdtentative"
        return cls(
            branch=branch,
            pull_request=env.get("BUILDKITE_PULL_REQUEST") or "false",
            debug_test_yaml=env.get("DEBUG_TEST_YAML") or "",
            nightly=nightly,
            mirror_hw=mirror_hw,
            run_all=(env.get("RUN_ALL") or "0") == "1",
            use_precompiled=env.get("VLLM_USE_PRECOMPILED") or "",
        )

    @property
    def is_pr(self) -> bool:
        return self.pull_request != "false"


def log(message: str) -> None:
    door.note(message)


# --------------------------------------------------------------------------- labels


def fetch_labels(
    pull_request: str, env: Mapping[str, str], *, timeout: float = LABEL_TIMEOUT
) -> str:
    """The PR's labels, one per line, from the GitHub REST API (§1.3). Fails closed.

    Any failure (HTTP error, network, timeout, a body without `labels[].name`)
    stops with exit 1 and one stderr line: the spec's message, then the cause
    in parentheses (the token redacted).
    """
    api = (env.get(GITHUB_API_ENV) or DEFAULT_GITHUB_API).rstrip("/")
    repo = env.get(GITHUB_REPO_ENV) or DEFAULT_GITHUB_REPO
    token = env.get("GITHUB_TOKEN") or ""
    url = f"{api}/repos/{repo}/pulls/{pull_request}"
    redact = Redactor.for_env(env, extra=[token] if token else [])
    if urllib.parse.urlsplit(api).scheme not in ("http", "https"):
        raise Stop(
            FAILURE,
            redact(f"{LABEL_ERROR} ({GITHUB_API_ENV}={api!r}: allowed values are http(s) URLs)"),
        )
    request = urllib.request.Request(url)
    request.add_header("Accept", "application/vnd.github+json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read())
        names = [str(label["name"]) for label in data["labels"]]
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as exc:
        cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(exc, urllib.error.HTTPError):
            cause = f"HTTP {exc.code} {exc.reason}"
        elif isinstance(exc, (KeyError, TypeError, ValueError)):
            cause = f"unexpected response: {type(exc).__name__}: {exc}"
        raise Stop(FAILURE, redact(f"{LABEL_ERROR} (GET {url}: {cause})")) from None
    return "\n".join(names)


# --------------------------------------------------------------------------- critical files


def first_critical(paths: list[str]) -> str | None:
    """The first path that forces building wheels from source (§1.6), by literal prefix."""
    for path in paths:
        if path.startswith(CRITICAL_PREFIXES) and not path.startswith(NOT_CRITICAL_PREFIXES):
            return path
    return None


def precompiled_choice(inputs: Inputs, paths: list[str]) -> tuple[bool, str, list[str]]:
    """(RUN_ALL, VLLM_USE_PRECOMPILED, log lines), as the script decides them."""
    lines: list[str] = []
    run_all = inputs.run_all
    critical = first_critical(paths)
    if critical is not None:
        run_all = True
        lines.append(f"Found changes: {critical}. Run all tests")
    if inputs.use_precompiled:
        lines.append(f"VLLM_USE_PRECOMPILED is already set to: {inputs.use_precompiled}")
        return run_all, inputs.use_precompiled, lines
    if run_all:
        lines.append("Detected critical changes, building wheels from source")
        return run_all, "0", lines
    lines.append("No critical changes, using precompiled wheels")
    return run_all, "1", lines


# --------------------------------------------------------------------------- flow


@dataclass(frozen=True)
class Outcome:
    """What the bootstrap decided: a pipeline to upload, or nothing (with why)."""

    pipeline: dict[str, Any] | None
    kept: tuple[suites.Suite, ...]
    skipped: tuple[tuple[suites.Suite, str], ...]
    annotate: bool = False
    # Why steps are missing from `pipeline` (read by `plan`): labels the mirror
    # filter dropped, groups left empty by it, and (suite group, label) of duplicates.
    not_mirrored: tuple[str, ...] = ()
    empty_groups: tuple[str, ...] = ()
    duplicates: tuple[tuple[str, str], ...] = ()
    mirror_hw: str = ""


def plan_pipeline(
    repo: Path,
    env: Mapping[str, str],
    labels: str | None = None,
    *,
    diff: Diff | None = None,
    validate: bool = True,
) -> Outcome:
    """Steps 1-9 of §1.2 without uploading. `labels` given means: don't ask GitHub.

    `diff` replaces the env-resolved diff (`plan` passes its explicit range);
    `validate=False` skips the schema check (tests of the render alone; `plan`
    keeps it on, as the upload does).
    """
    from ci import skipci
    from ci.diff import resolve_diff

    inputs = Inputs.from_env(repo, env)
    if labels is None:
        labels = ""
        if inputs.is_pr and not inputs.debug_test_yaml:
            labels = fetch_labels(inputs.pull_request, env)
    if diff is None:
        diff = resolve_diff(repo, env=env)
    try:
        selection = suites.select_suites(
            inputs.branch, labels, inputs.debug_test_yaml, inputs.nightly
        )
    except UserError as exc:
        raise UserError(*exc.problems, code=FAILURE) from None
    if selection.notice:
        log(selection.notice)

    decision = skipci.decision_for(diff)
    kept: list[suites.Suite] = []
    skipped: list[tuple[suites.Suite, str]] = []
    for suite in selection.suites:
        word = decision.gate("amd", suite.level) if suite.level else None
        if word is None:
            kept.append(suite)
        else:
            skipped.append((suite, word))
            log(f"Skipping AMD {suite.level} suite due to {word} decision.")
    if not kept:
        annotate = any(word == "skip-all" for _, word in skipped)
        return Outcome(None, (), tuple(skipped), annotate)

    paths = list(diff.paths or ())
    run_all, _precompiled, lines = precompiled_choice(inputs, paths)
    for line in lines:
        log(line)
    log(f"Run all: {int(run_all)}")
    log(f"Nightly: {int(inputs.nightly)}")
    log(f"AMD Mirror HW: {inputs.mirror_hw}")
    log("AMD test suites: " + " ".join(s.spec for s in kept))

    amd_dir = repo / ".buildkite" / "amd"
    docs = [combine.load_suite(amd_dir, suite) for suite in kept]
    combined = combine.combine(docs)
    combine.report_dropped(combined)
    empty: list[str] = []
    pipeline, dropped = render.render_pipeline(
        combined.env, combined.steps, inputs.mirror_hw, empty_groups=empty
    )
    for label in dropped:
        log(f"Not mirrored on {inputs.mirror_hw}: {label}")
    used = render.mirror_values(combined.steps)
    if used and inputs.mirror_hw not in used:  # a typo in AMD_MIRROR_HW uploads no test at all
        log(
            f"warning: AMD_MIRROR_HW={inputs.mirror_hw!r} is in no step's mirror_hardwares"
            f" (the suites use: {', '.join(sorted(used))}); only the image step is uploaded"
        )
    if validate:  # the check every upload makes, worded the same
        from ci.pipeline.schemacheck import require_valid

        require_valid(pipeline, " + ".join(f".buildkite/amd/{s.file}" for s in kept))
    duplicates = tuple(
        (suite.group, str(step.get("label", "")) if isinstance(step, dict) else "")
        for suite, step in combined.dropped
    )
    return Outcome(
        pipeline,
        tuple(kept),
        tuple(skipped),
        not_mirrored=tuple(dropped),
        empty_groups=tuple(empty),
        duplicates=duplicates,
        mirror_hw=inputs.mirror_hw,
    )


def upload_commands(repo: Path) -> tuple[door.Command, ...]:
    amd_dir = str(repo / ".buildkite" / "amd")
    return (
        door.Command(
            ("buildkite-agent", "artifact", "upload", PIPELINE_FILE),
            description="keep the rendered pipeline as an artifact",
            cwd=amd_dir,
        ),
        door.Command(
            ("buildkite-agent", "pipeline", "upload", PIPELINE_FILE),
            description="upload the AMD test pipeline",
            cwd=amd_dir,
        ),
    )


def annotate_command() -> door.Command:
    return door.Command(
        ("buildkite-agent", "annotate", SKIP_ANNOTATION, "--style", "info"),
        description="say why CI was skipped",
    )


def run(repo: Path, *, dry_run: bool = False, env: Mapping[str, str] | None = None) -> None:
    from ci import yamlio

    source = dict(os.environ if env is None else env)
    outcome = plan_pipeline(repo, source)
    if outcome.pipeline is None:
        if outcome.annotate:
            cmd = annotate_command()
            if dry_run:
                log(f"(dry-run) not run: {cmd.line()}")
            else:
                door.run(cmd)  # errors ignored, as in the script
        log(NOTHING_LEFT)
        return
    text = yamlio.dumps(outcome.pipeline)
    if dry_run:
        sys.stdout.write(text)
        for cmd in upload_commands(repo):
            log(f"(dry-run) not run: {cmd.line()}")
        return
    (repo / ".buildkite" / "amd" / PIPELINE_FILE).write_text(text, encoding="utf-8")
    for cmd in upload_commands(repo):
        door.run(cmd, check=True)
