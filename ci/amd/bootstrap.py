"""`bootstrap --platform rocm`: replaces bootstrap-amd-omni.sh.

The script's order holds (the label fetch fails closed before anything else
can fail): labels (`--labels`, else BUILDKITE_PULL_REQUEST_LABELS, else the
GitHub API, never under `--dry-run`), diff, suites, skip-ci per suite, critical
files, render, validate, upload. The pipeline is uploaded from a private
temporary directory, so two bootstraps on one checkout cannot mix them up.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ci import door, skipci, webclient, yamlio
from ci.amd import combine, render, suites
from ci.amd.suites import attempt
from ci.diff import resolve_diff
from ci.errors import BAD_INPUT, FAILURE, Stop, UserError
from ci.pipeline import model
from ci.redact import Redactor
from ci.schema import require_valid
from ci.target import in_buildkite, resolve_branch, resolve_build

if TYPE_CHECKING:
    from ci.diff import Diff

LABEL_ERROR = "ERROR: Could not read PR labels; refusing to select an incorrect AMD test tier."
NOTHING_LEFT = "No AMD suites remain after skip-ci filtering."
GITHUB_API_ENV = "VLLM_OMNI_CI_GITHUB_API"
GITHUB_REPO_ENV = "VLLM_OMNI_CI_GITHUB_REPO"
DEFAULT_GITHUB_API = "https://api.github.com"
DEFAULT_GITHUB_REPO = "vllm-project/vllm-omni"
LABEL_TIMEOUT = 30.0  # seconds for the whole label request
PIPELINE_FILE = "pipeline.yaml"
LABELS_ENV = "BUILDKITE_PULL_REQUEST_LABELS"  # Buildkite's, comma-separated, PR builds only
PR_ENV = "BUILDKITE_PULL_REQUEST"
DEFAULT_MIRROR_HW = "amdproduction"
FASTCHECK_MIRROR_HW = "amdtentative"
NOT_A_PR = "false"
_PR_NUMBER = re.compile(r"[0-9]+")

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
NOT_CRITICAL = (
    "docker/Dockerfile.",
    "csrc/cpu",
    "csrc/rocm",
    "cmake/hipify.py",
    "cmake/cpu_extension.cmake",
)


Note = Callable[[str], None]


def parse_pull_request(value: str | None) -> str:
    """BUILDKITE_PULL_REQUEST: a PR number (ASCII digits), or `false` (also for unset/empty).

    Anything else is an input error (exit 2): it goes into the GitHub API path."""
    text = value or ""
    if text in ("", NOT_A_PR):
        return NOT_A_PR
    if _PR_NUMBER.fullmatch(text) is None:
        raise UserError(
            f"BUILDKITE_PULL_REQUEST must be a PR number (digits) or 'false', got {text!r}",
            code=BAD_INPUT,
        )
    return text


def suite_mirror_values(amd_dir: Path) -> set[str]:
    """Every `mirror_hardwares` value of the AMD suites in `amd_dir` (broken files add none)."""
    found: set[str] = set()
    for path in (amd_dir / suite.file for suite in suites.SUITES):
        try:
            data = yamlio.load(path) if path.is_file() else None
        except UserError:
            continue
        if isinstance(data, dict) and isinstance(data.get("steps"), list):
            found |= render.mirror_values(data["steps"])
    return found


def parse_mirror_hw(value: str | None, amd_dir: Path) -> str:
    """AMD_MIRROR_HW: empty/unset is `amdproduction`, else a value the suites use, exactly.

    The template selected nothing for a typo and the build went green; now it fails (exit 1)."""
    chosen = value or DEFAULT_MIRROR_HW
    allowed = suite_mirror_values(amd_dir) | {DEFAULT_MIRROR_HW}
    if chosen not in allowed:
        raise UserError(
            f"AMD_MIRROR_HW={chosen!r} is not a mirror_hardwares value of the AMD suites:"
            f" allowed values are {', '.join(sorted(allowed))}",
            code=FAILURE,
        )
    return chosen


@dataclass(frozen=True)
class Inputs:
    """The script's env inputs, read once."""

    branch: str
    pull_request: str
    debug_test_yaml: str
    nightly: bool
    mirror_hw: str
    run_all: bool
    use_precompiled: str

    @classmethod
    def from_env(cls, repo: Path, env: Mapping[str, str]) -> Inputs:
        # Bad NIGHTLY / DEBUG_TEST_YAML / AMD_MIRROR_HW stop here, before the label
        # request and git: the script only found the first two in the selector, after
        # both (exit 1 either way). A missing BUILDKITE_BRANCH in Buildkite was `set -u`'s
        # exit 1; a bad BUILDKITE_PULL_REQUEST is an input error (exit 2, which wins).
        problems: list[str] = []
        pull_request = attempt(problems, lambda: parse_pull_request(env.get(PR_ENV)), "")
        code = FAILURE if pull_request else BAD_INPUT
        # A set BUILDKITE_BRANCH, even empty, is a value in Buildkite (not main: the labels
        # decide), as it was to the script; only an unset one stopped it (`set -u`). Outside
        # Buildkite an empty one is the checkout's branch, as for every task (ci.target).
        if in_buildkite(env) and "BUILDKITE_BRANCH" in env:
            branch = env["BUILDKITE_BRANCH"]
        else:
            branch = attempt(problems, lambda: resolve_branch(repo, env=env), "")
        nightly = attempt(problems, lambda: suites.parse_nightly(env.get("NIGHTLY") or "0"), False)
        debug = env.get("DEBUG_TEST_YAML") or ""
        if debug:
            attempt(problems, lambda: suites.parse_debug_suites(debug), None)
        # fastcheck's amdtentative is the script's own choice, over AMD_MIRROR_HW.
        mirror_hw = FASTCHECK_MIRROR_HW
        if env.get("BUILDKITE_PIPELINE_SLUG") != "fastcheck":
            amd_dir = repo / ".buildkite" / "amd"
            mirror_hw = attempt(
                problems, lambda: parse_mirror_hw(env.get("AMD_MIRROR_HW"), amd_dir), ""
            )
        UserError.collect(problems, code=code)
        return cls(
            branch=branch,
            pull_request=pull_request,
            debug_test_yaml=debug,
            nightly=nightly,
            mirror_hw=mirror_hw,
            run_all=(env.get("RUN_ALL") or "0") == "1",
            use_precompiled=env.get("VLLM_USE_PRECOMPILED") or "",
        )

    @classmethod
    def of_branch(cls, branch: str, *, nightly: bool = False) -> Inputs:
        """A build of `branch` as `plan` describes one (labels given, so no PR number needed)."""
        return cls(branch, NOT_A_PR, "", nightly, DEFAULT_MIRROR_HW, False, "")

    @property
    def is_pr(self) -> bool:
        return self.pull_request != NOT_A_PR

    @property
    def needs_labels(self) -> bool:
        """The script asked GitHub only for a PR build without DEBUG_TEST_YAML."""
        return self.is_pr and not self.debug_test_yaml


log: Note = door.note


def quiet(message: str) -> None:
    """A `Note` that drops the bootstrap's log lines (`plan` reports the outcome instead)."""


def resolve_labels(
    inputs: Inputs, env: Mapping[str, str], given: str | None = None, *, offline: bool = False
) -> str:
    """The PR's labels: `given` (`--labels`), else $BUILDKITE_PULL_REQUEST_LABELS, else GitHub.

    Only a PR build without DEBUG_TEST_YAML asks (the script's rule); `offline`
    (`--dry-run`) never asks GitHub and stops with exit 2 instead."""
    if given is not None:
        return given
    if not inputs.needs_labels:
        return ""
    if LABELS_ENV in env:  # set by Buildkite for PR builds, empty when there are none
        return env[LABELS_ENV]
    if offline:
        raise UserError(
            f"PR #{inputs.pull_request} needs its labels and --dry-run makes no GitHub request:"
            f" give them with --labels (comma-separated, '' for none) or {LABELS_ENV}",
            code=BAD_INPUT,
        )
    return fetch_labels(inputs.pull_request, env)


def fetch_labels(
    pull_request: str, env: Mapping[str, str], *, timeout: float = LABEL_TIMEOUT
) -> str:
    """The PR's labels, one per line, from the GitHub REST API. Fails closed.

    Any failure (HTTP, network, timeout, a body without `labels[].name`, a
    redirect, never followed so the token stays with the API host) is exit 1
    with the script's message and the cause (token redacted)."""
    pull_request = parse_pull_request(pull_request)
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
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.github+json", **auth})
    try:
        # Quiet: the bootstrap's stderr is the script's log, line for line (the
        # failure line below says which request failed).
        with webclient.send(request, timeout=timeout, secrets=[token], quiet=True) as response:
            data = json.loads(response.read())
        names = [str(label["name"]) for label in data["labels"]]
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as exc:
        cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(exc, urllib.error.HTTPError):
            cause = f"HTTP {exc.code} {exc.reason}"
            location = exc.headers.get("Location") if exc.headers else None
            if 300 <= exc.code < 400:
                cause = (
                    f"{cause}: redirect to {location or '(no Location)'} refused, so the token"
                    f" goes nowhere else; point {GITHUB_API_ENV} / {GITHUB_REPO_ENV} at the"
                    " final location"
                )
        elif isinstance(exc, (KeyError, TypeError, ValueError)):
            cause = f"unexpected response: {type(exc).__name__}: {exc}"
        raise Stop(FAILURE, redact(f"{LABEL_ERROR} (GET {url}: {cause})")) from None
    return "\n".join(names)


def precompiled_choice(inputs: Inputs, paths: list[str]) -> tuple[bool, str, list[str]]:
    """(RUN_ALL, VLLM_USE_PRECOMPILED, log lines), as the script decides them."""
    lines: list[str] = []
    run_all = inputs.run_all
    # The first path that forces building wheels from source, by literal prefix.
    critical = next(
        (p for p in paths if p.startswith(CRITICAL_PREFIXES) and not p.startswith(NOT_CRITICAL)),
        None,
    )
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


@dataclass(frozen=True)
class AmdBootstrapOutcome:
    """What the bootstrap decided: a pipeline to upload, or nothing (with why)."""

    pipeline: model.Document | None
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
    offline: bool = False,
    note: Note = log,
    inputs: Inputs | None = None,
) -> AmdBootstrapOutcome:
    """The script's steps up to its upload, in its order. `labels` given: don't ask GitHub.

    `plan` passes its own `diff` and `inputs`, and `quiet` as `note` (the log lines)."""
    inputs = inputs or Inputs.from_env(repo, env)
    labels = resolve_labels(inputs, env, labels, offline=offline)
    diff = diff or resolve_diff(repo, env=env)
    try:
        selection = suites.select_suites(
            inputs.branch, labels, inputs.debug_test_yaml, inputs.nightly
        )
    except UserError as exc:
        raise UserError(*exc.problems, code=FAILURE) from None
    if selection.notice:
        note(selection.notice)

    decision = skipci.decision_for(diff)
    kept: list[suites.Suite] = []
    skipped: list[tuple[suites.Suite, str]] = []
    for suite in selection.suites:
        word = decision.gate("amd", suite.level) if suite.level else None
        if word is not None:
            skipped.append((suite, word))
            note(f"Skipping AMD {suite.level} suite due to {word} decision.")
        else:
            kept.append(suite)
    if not kept:
        annotate = any(word == "skip-all" for _, word in skipped)
        return AmdBootstrapOutcome(None, (), tuple(skipped), annotate)

    run_all, _precompiled, lines = precompiled_choice(inputs, list(diff.paths or ()))
    lines += [
        f"Run all: {int(run_all)}",
        f"Nightly: {int(inputs.nightly)}",
        f"AMD Mirror HW: {inputs.mirror_hw}",
        "AMD test suites: " + " ".join(s.spec for s in kept),
    ]
    for line in lines:
        note(line)

    amd_dir = repo / ".buildkite" / "amd"
    combined = combine.combine([combine.load_suite(amd_dir, suite) for suite in kept])
    combine.report_dropped(combined, note)
    empty: list[str] = []
    pipeline, dropped = render.render_pipeline(
        combined.env, combined.steps, inputs.mirror_hw, empty_groups=empty
    )
    for label in dropped:
        note(f"Not mirrored on {inputs.mirror_hw}: {label}")
    used = render.mirror_values(combined.steps)
    # A known value (Inputs checked it) that no selected step lists: the image step alone.
    if used and inputs.mirror_hw not in used:
        note(
            f"warning: AMD_MIRROR_HW={inputs.mirror_hw!r} is in no selected step's"
            f" mirror_hardwares (they use: {', '.join(sorted(used))});"
            " only the image step is uploaded"
        )
    # The check every upload makes, worded the same.
    require_valid(pipeline, " + ".join(f".buildkite/amd/{s.file}" for s in kept))
    return AmdBootstrapOutcome(
        pipeline,
        tuple(kept),
        tuple(skipped),
        not_mirrored=tuple(dropped),
        empty_groups=tuple(empty),
        duplicates=tuple((s.group, str(step.get("label", ""))) for s, step in combined.dropped),
        mirror_hw=inputs.mirror_hw,
    )


PRIVATE_DIR = "<private temp dir>"  # how a dry run shows the directory a run creates


def upload_commands(cwd: str) -> tuple[door.Command, ...]:
    """The script's two calls, argv unchanged, run in `cwd` (a private directory holding
    PIPELINE_FILE, where the script used the shared `.buildkite/amd`)."""
    return tuple(
        door.Command(("buildkite-agent", kind, "upload", PIPELINE_FILE), description=what, cwd=cwd)
        for kind, what in (
            ("artifact", "keep the rendered pipeline as an artifact"),
            ("pipeline", "upload the AMD test pipeline"),
        )
    )


def run(
    repo: Path,
    *,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    labels: str | None = None,
) -> None:
    """The bootstrap. `labels` is `--labels` (comma- or newline-separated); see resolve_labels."""
    source = dict(os.environ if env is None else env)
    # Which build this is, before any request: inside Buildkite a missing commit stops here.
    resolve_build(repo, source)
    outcome = plan_pipeline(repo, source, labels, offline=dry_run)
    if outcome.pipeline is None:
        if outcome.annotate:
            annotate = door.Plan((skipci.annotate_command(),))
            door.execute(annotate, dry_run=dry_run, log_dry_run=True)
        log(NOTHING_LEFT)
        return
    text = yamlio.dumps(outcome.pipeline)
    if dry_run:
        sys.stdout.write(text)
        log(f"(dry-run) {PIPELINE_FILE} would be written to a new private temp directory")
        door.execute(door.Plan(upload_commands(PRIVATE_DIR)), dry_run=True, log_dry_run=True)
        return
    upload(text)


def upload(text: str) -> None:
    """Write the pipeline into a new private directory (mode 0700, under TMPDIR), upload it
    from there, and remove the directory. Nothing is written into the checkout."""
    try:
        private = tempfile.TemporaryDirectory(prefix="vllm-omni-ci-amd-")
    except OSError as exc:
        raise UserError(
            f"cannot create a temporary directory for {PIPELINE_FILE}"
            f" (TMPDIR={tempfile.gettempdir()}): {exc.strerror or exc}",
            code=FAILURE,
        ) from None
    with private as directory:
        path = Path(directory) / PIPELINE_FILE
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {path}: {exc.strerror or exc}", code=FAILURE) from None
        door.execute(door.Plan(upload_commands(directory)), check=True)
