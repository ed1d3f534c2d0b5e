"""`bootstrap --platform rocm`: replaces bootstrap-amd-omni.sh.

The order of operations is the script's, which must hold (the label fetch
fails closed before anything else can fail): labels, diff, suites, skip-ci
per suite, critical files, render, validate, upload. Everything up to the
upload is computed in-process; the only side effects are the label request,
git (through the diff resolver) and `buildkite-agent`.

Labels come from `--labels`, else (a PR build) BUILDKITE_PULL_REQUEST_LABELS,
else the GitHub API; `--dry-run` never makes the request. The rendered
pipeline is written to a private temporary directory and uploaded from there,
so two bootstraps on one checkout cannot upload each other's pipeline.
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
NOT_CRITICAL_PREFIXES = (
    "docker/Dockerfile.",
    "csrc/cpu",
    "csrc/rocm",
    "cmake/hipify.py",
    "cmake/cpu_extension.cmake",
)


Note = Callable[[str], None]


def parse_pull_request(value: str | None) -> str:
    """BUILDKITE_PULL_REQUEST: a PR number (ASCII digits), or `false`.

    Unset and empty are `false`, as `${BUILDKITE_PULL_REQUEST:-false}` made
    them. Anything else is an input error (exit 2): the number goes into the
    GitHub API path, where `1/../x` or `1 2` would change (or break) the request.
    """
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
    """Every `mirror_hardwares` value of the AMD suite files present in `amd_dir`.

    Read leniently (a missing or broken file adds nothing): a broken suite is
    reported when it is selected and loaded, not while AMD_MIRROR_HW is checked.
    """
    found: set[str] = set()
    for suite in suites.SUITES:
        path = amd_dir / suite.file
        if not path.is_file():
            continue
        try:
            data = yamlio.load(path)
        except UserError:
            continue
        if isinstance(data, dict) and isinstance(data.get("steps"), list):
            found |= render.mirror_values(data["steps"])
    return found


def parse_mirror_hw(value: str | None, amd_dir: Path) -> str:
    """AMD_MIRROR_HW: empty/unset is `amdproduction`; else a value the suites use, exactly.

    The template selected nothing for an unknown value and the build went green
    with the image step alone; a typo (or `AMDPRODUCTION`) now fails (exit 1).
    """
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
        code = FAILURE
        pull_request = NOT_A_PR
        try:
            pull_request = parse_pull_request(env.get("BUILDKITE_PULL_REQUEST"))
        except UserError as exc:
            problems += list(exc.problems)
            code = BAD_INPUT
        branch = ""
        if in_buildkite(env) and "BUILDKITE_BRANCH" in env:
            # Set, even empty, it is a value (not main: the labels decide), as it was to
            # the script; only an unset one stopped it (`set -u`). Outside Buildkite an
            # empty one is the checkout's branch, as for every task (ci.target).
            branch = env["BUILDKITE_BRANCH"]
        else:
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
        # fastcheck's amdtentative is the script's own choice, over AMD_MIRROR_HW.
        mirror_hw = FASTCHECK_MIRROR_HW
        if env.get("BUILDKITE_PIPELINE_SLUG") != "fastcheck":
            try:
                mirror_hw = parse_mirror_hw(env.get("AMD_MIRROR_HW"), repo / ".buildkite" / "amd")
            except UserError as exc:
                problems += list(exc.problems)
        UserError.collect(problems, code=code)
        return cls(
            branch=branch,
            pull_request=pull_request,
            debug_test_yaml=env.get("DEBUG_TEST_YAML") or "",
            nightly=nightly,
            mirror_hw=mirror_hw,
            run_all=(env.get("RUN_ALL") or "0") == "1",
            use_precompiled=env.get("VLLM_USE_PRECOMPILED") or "",
        )

    @classmethod
    def of_branch(cls, branch: str, *, nightly: bool = False) -> Inputs:
        """A build of `branch` as `plan` describes one: its labels are given, never fetched,
        so the PR number is not needed; the default mirror, no debug suites, no overrides."""
        return cls(branch, NOT_A_PR, "", nightly, DEFAULT_MIRROR_HW, False, "")

    @property
    def is_pr(self) -> bool:
        return self.pull_request != NOT_A_PR

    @property
    def needs_labels(self) -> bool:
        """The script asked GitHub only for a PR build without DEBUG_TEST_YAML."""
        return self.is_pr and not self.debug_test_yaml


def log(message: str) -> None:
    door.note(message)


def quiet(message: str) -> None:
    """A `Note` that drops the bootstrap's log lines (`plan` reports the outcome instead)."""


# --------------------------------------------------------------------------- labels


def dry_run_needs_labels(pull_request: str) -> str:
    return (
        f"PR #{pull_request} needs its labels and --dry-run makes no GitHub request:"
        f" give them with --labels (comma-separated, '' for none) or {LABELS_ENV}"
    )


def resolve_labels(
    inputs: Inputs, env: Mapping[str, str], given: str | None = None, *, offline: bool = False
) -> str:
    """The PR's labels: `given` (`--labels`), else $BUILDKITE_PULL_REQUEST_LABELS, else GitHub.

    Only a PR build without DEBUG_TEST_YAML reads the environment or GitHub (the
    script's rule); `given` is used as it is. `offline` (`--dry-run`) never asks
    GitHub: without labels it stops with an input error (exit 2).
    """
    if given is not None:
        return given
    if not inputs.needs_labels:
        return ""
    if LABELS_ENV in env:  # set by Buildkite for PR builds, empty when there are none
        return env[LABELS_ENV]
    if offline:
        raise UserError(dry_run_needs_labels(inputs.pull_request), code=BAD_INPUT)
    return fetch_labels(inputs.pull_request, env)


def fetch_labels(
    pull_request: str, env: Mapping[str, str], *, timeout: float = LABEL_TIMEOUT
) -> str:
    """The PR's labels, one per line, from the GitHub REST API. Fails closed.

    Any failure (HTTP error, network, timeout, a body without `labels[].name`,
    a redirect, which is never followed so the token stays with the API host)
    stops with exit 1 and one stderr line: the script's message, then the cause
    in parentheses (the token redacted). A `pull_request` that is not a number
    is an input error (exit 2) before any request.
    """
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
    request = urllib.request.Request(url)
    request.add_header("Accept", "application/vnd.github+json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
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


# --------------------------------------------------------------------------- critical files


def first_critical(paths: list[str]) -> str | None:
    """The first path that forces building wheels from source, by literal prefix."""
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
    validate: bool = True,
    offline: bool = False,
    note: Note = log,
    inputs: Inputs | None = None,
) -> AmdBootstrapOutcome:
    """The script's steps up to its upload, in its order. `labels` given means: don't ask GitHub.

    `diff` replaces the env-resolved diff (`plan` passes its explicit range);
    `validate=False` skips the schema check (tests of the render alone; `plan`
    keeps it on, as the upload does). `offline` (`--dry-run`): labels come from
    `labels` or the environment, never from GitHub (`resolve_labels`). `note`
    gets the script's log lines (`Run all: …`, `AMD test suites: …`); `plan`
    passes `quiet`. `inputs` replaces reading them from `env` (`plan` gives its own).
    """
    inputs = inputs or Inputs.from_env(repo, env)
    labels = resolve_labels(inputs, env, labels, offline=offline)
    if diff is None:
        diff = resolve_diff(repo, env=env)
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
        if word is None:
            kept.append(suite)
        else:
            skipped.append((suite, word))
            note(f"Skipping AMD {suite.level} suite due to {word} decision.")
    if not kept:
        annotate = any(word == "skip-all" for _, word in skipped)
        return AmdBootstrapOutcome(None, (), tuple(skipped), annotate)

    paths = list(diff.paths or ())
    run_all, _precompiled, lines = precompiled_choice(inputs, paths)
    for line in lines:
        note(line)
    note(f"Run all: {int(run_all)}")
    note(f"Nightly: {int(inputs.nightly)}")
    note(f"AMD Mirror HW: {inputs.mirror_hw}")
    note("AMD test suites: " + " ".join(s.spec for s in kept))

    amd_dir = repo / ".buildkite" / "amd"
    docs = [combine.load_suite(amd_dir, suite) for suite in kept]
    combined = combine.combine(docs)
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
    if validate:  # the check every upload makes, worded the same
        require_valid(pipeline, " + ".join(f".buildkite/amd/{s.file}" for s in kept))
    duplicates = tuple(
        (suite.group, str(step.get("label", "")) if isinstance(step, dict) else "")
        for suite, step in combined.dropped
    )
    return AmdBootstrapOutcome(
        pipeline,
        tuple(kept),
        tuple(skipped),
        not_mirrored=tuple(dropped),
        empty_groups=tuple(empty),
        duplicates=duplicates,
        mirror_hw=inputs.mirror_hw,
    )


PRIVATE_DIR = "<private temp dir>"  # how a dry run shows the directory a run creates


def upload_commands(directory: str) -> tuple[door.Command, ...]:
    """The script's two calls, argv unchanged, run in `directory` (which holds PIPELINE_FILE).

    The script ran them in `.buildkite/amd`, where every bootstrap on the
    checkout wrote the same `pipeline.yaml`; a private directory per run keeps
    the artifact's name and the upload's argv without that race.
    """
    return (
        door.Command(
            ("buildkite-agent", "artifact", "upload", PIPELINE_FILE),
            description="keep the rendered pipeline as an artifact",
            cwd=directory,
        ),
        door.Command(
            ("buildkite-agent", "pipeline", "upload", PIPELINE_FILE),
            description="upload the AMD test pipeline",
            cwd=directory,
        ),
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
