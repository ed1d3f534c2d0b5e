"""`bootstrap --platform rocm`: replaces bootstrap-amd-omni.sh.

The script's order holds: labels (failing closed), diff, suites, skip-ci per suite,
critical files, render, validate, upload (from a private temporary directory).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ci import door, skipci, topology, yamlio
from ci.amd import combine, render, suites
from ci.amd.suites import attempt
from ci.diff import resolve_diff
from ci.errors import FAILURE, Failure, Stop, TaskError, UserError
from ci.pipeline import model
from ci.redact import Redactor
from ci.schema import require_valid
from ci.target import (
    NOT_A_PR,
    build_env_problems,
    in_buildkite,
    pull_request_error,
    resolve_branch,
    resolve_build,
)

if TYPE_CHECKING:
    from ci.diff import Diff

LABEL_ERROR = "ERROR: Could not read PR labels; refusing to select an incorrect AMD test tier."
NOTHING_LEFT = "No AMD suites remain after skip-ci filtering."
GITHUB_API_ENV = "VLLM_OMNI_CI_GITHUB_API"
GITHUB_REPO_ENV = "VLLM_OMNI_CI_GITHUB_REPO"
PIPELINE_FILE = "pipeline.yaml"
LABELS_ENV = "BUILDKITE_PULL_REQUEST_LABELS"  # Buildkite's, comma-separated, PR builds only
DEFAULT_MIRROR_HW = "amdproduction"

CRITICAL_PREFIXES = (
    "docker/Dockerfile", "CMakeLists.txt", "requirements/common.txt", "requirements/cuda.txt",
    "requirements/build.txt", "requirements/test.txt", "setup.py", "csrc/", "cmake/",
)  # fmt: skip
NOT_CRITICAL = (
    "docker/Dockerfile.", "csrc/cpu", "csrc/rocm", "cmake/hipify.py", "cmake/cpu_extension.cmake",
)  # fmt: skip


Note = Callable[[str], None]


def parse_pull_request(value: str | None) -> str:
    """BUILDKITE_PULL_REQUEST by every task's rule (`ci.target`), unset or empty as `false`."""
    text = value or ""
    if problem := pull_request_error(text):
        raise UserError(problem)
    return text or NOT_A_PR


def parse_mirror_hw(value: str | None, amd_dir: Path) -> str:
    """AMD_MIRROR_HW: empty/unset is `amdproduction`, else a `mirror_hardwares` value of the
    suites, exactly (the template selected nothing for a typo and the build went green; now
    exit 1). A suite file that does not load adds no value."""
    chosen, allowed = value or DEFAULT_MIRROR_HW, {DEFAULT_MIRROR_HW}
    for path in (amd_dir / suite.file for suite in suites.SUITES):
        try:
            data = yamlio.load(path) if path.is_file() else None
        except Failure:
            continue
        if isinstance(data, dict) and isinstance(data.get("steps"), list):
            allowed |= render.mirror_values(data["steps"])
    if chosen not in allowed:
        raise Failure(
            f"AMD_MIRROR_HW={chosen!r} is not a mirror_hardwares value of the AMD suites:"
            f" allowed values are {', '.join(sorted(allowed))}",
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
        # Bad inputs stop here, before the label request and git: the script's env inputs
        # fail the bootstrap (a `Failure`, exit 1, as the script did); a bad build variable,
        # BUILDKITE_PULL_REQUEST included, is an input error (`UserError`, exit 2), which wins.
        problems = build_env_problems(env)
        kind: type[TaskError] = UserError if problems else Failure
        pull_request = env.get("BUILDKITE_PULL_REQUEST") or NOT_A_PR
        # In Buildkite a set BUILDKITE_BRANCH, even empty, is the value (the script's `set -u`
        # stopped only an unset one); elsewhere an empty one is the checkout's (ci.target).
        if in_buildkite(env) and "BUILDKITE_BRANCH" in env:
            branch = env["BUILDKITE_BRANCH"]
        else:
            branch = attempt(problems, lambda: resolve_branch(repo, env=env), "")
        nightly_flag = env.get(topology.NIGHTLY_ENV) or "0"
        nightly = attempt(problems, lambda: suites.parse_nightly(nightly_flag), False)
        debug = env.get("DEBUG_TEST_YAML") or ""
        if debug:
            attempt(problems, lambda: suites.parse_debug_suites(debug), None)
        # fastcheck's amdtentative is the script's own choice, over AMD_MIRROR_HW.
        mirror_hw = "amdtentative"
        if env.get("BUILDKITE_PIPELINE_SLUG") != "fastcheck":
            amd = repo / ".buildkite" / "amd"
            mirror_hw = attempt(
                problems, lambda: parse_mirror_hw(env.get("AMD_MIRROR_HW"), amd), ""
            )
        kind.collect(dict.fromkeys(problems))  # resolve_branch repeats ours
        run_all, precompiled = (env.get("RUN_ALL") or "0") == "1", env.get("VLLM_USE_PRECOMPILED")
        return cls(branch, pull_request, debug, nightly, mirror_hw, run_all, precompiled or "")

    @classmethod
    def of_branch(cls, branch: str, *, nightly: bool = False) -> Inputs:
        """A build of `branch` as `plan` describes one (labels given, so no PR number needed)."""
        return cls(branch, NOT_A_PR, "", nightly, DEFAULT_MIRROR_HW, False, "")


def resolve_labels(
    inputs: Inputs, env: Mapping[str, str], given: str | None = None, *, offline: bool = False
) -> str:
    """`given` (`--labels`), else $BUILDKITE_PULL_REQUEST_LABELS, else GitHub (`offline`,
    i.e. `--dry-run`: exit 2 instead)."""
    if given is not None:
        return given
    if inputs.pull_request == NOT_A_PR or inputs.debug_test_yaml:  # labels choose nothing then
        return ""
    if LABELS_ENV in env:  # set by Buildkite for PR builds, empty when there are none
        return env[LABELS_ENV]
    if offline:
        raise UserError(
            f"PR #{inputs.pull_request} needs its labels and --dry-run makes no GitHub request:"
            f" give them with --labels (comma-separated, '' for none) or {LABELS_ENV}",
        )
    return fetch_labels(inputs.pull_request, env)


def fetch_labels(pull_request: str, env: Mapping[str, str], *, timeout: float = 30.0) -> str:
    """The PR's labels, one per line, from the GitHub REST API within `timeout` seconds. Fails
    closed: any failure (a redirect too, never followed so the token stays with the API host)
    is exit 1. Its HTTP client loads here: most builds give their labels."""
    import urllib.error
    import urllib.request

    from ci import webclient

    pull_request = parse_pull_request(pull_request)
    api = (env.get(GITHUB_API_ENV) or "https://api.github.com").rstrip("/")
    repo = env.get(GITHUB_REPO_ENV) or "vllm-project/vllm-omni"
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
    try:  # quiet: stderr is the script's log, line for line
        with webclient.send(request, timeout=timeout, secrets=[token], quiet=True) as response:
            data = json.loads(response.read())
        names = [str(label["name"]) for label in data["labels"]]
    except urllib.error.HTTPError as exc:
        cause = f"HTTP {exc.code} {exc.reason}"
        if 300 <= exc.code < 400:
            location = (exc.headers.get("Location") if exc.headers else None) or "(no Location)"
            cause += (
                f": redirect to {location} refused, so the token goes nowhere else;"
                f" point {GITHUB_API_ENV} / {GITHUB_REPO_ENV} at the final location"
            )
    except (KeyError, TypeError, ValueError) as exc:
        cause = f"unexpected response: {type(exc).__name__}: {exc}"
    except OSError as exc:
        cause = str(exc.reason if isinstance(exc, urllib.error.URLError) else exc)
    else:
        return "\n".join(names)
    raise Stop(FAILURE, redact(f"{LABEL_ERROR} (GET {url}: {cause})"))


def precompiled_choice(inputs: Inputs, paths: list[str]) -> tuple[bool, str, list[str]]:
    """(RUN_ALL, VLLM_USE_PRECOMPILED, log lines), as the script decides them."""
    # The first path that forces building wheels from source, by literal prefix.
    critical = [
        p for p in paths if p.startswith(CRITICAL_PREFIXES) and not p.startswith(NOT_CRITICAL)
    ]
    lines = [f"Found changes: {critical[0]}. Run all tests"] if critical else []
    run_all = inputs.run_all or bool(critical)
    if inputs.use_precompiled:
        lines.append(f"VLLM_USE_PRECOMPILED is already set to: {inputs.use_precompiled}")
        return run_all, inputs.use_precompiled, lines
    if run_all:
        return run_all, "0", [*lines, "Detected critical changes, building wheels from source"]
    return run_all, "1", [*lines, "No critical changes, using precompiled wheels"]


@dataclass(frozen=True)
class AmdBootstrapOutcome:
    """What the bootstrap decided: a pipeline to upload, or nothing (with why)."""

    pipeline: model.Document | None
    kept: tuple[suites.Suite, ...]
    skipped: tuple[tuple[suites.Suite, str], ...]
    annotate: bool = False
    # Why steps are missing (read by `plan`); duplicates are (suite group, label).
    not_mirrored: tuple[str, ...] = ()
    empty_groups: tuple[str, ...] = ()
    duplicates: tuple[tuple[str, str], ...] = ()
    mirror_hw: str = ""
    # The suite selection's notice (`Selection.notice`): set when no label chose a suite
    # and the legacy ready-suite fallback did (`plan` says so; the bootstrap logs it).
    notice: str | None = None


def plan_pipeline(
    repo: Path,
    env: Mapping[str, str],
    labels: str | None = None,
    *,
    diff: Diff | None = None,
    offline: bool = False,
    note: Note = door.note,
    inputs: Inputs | None = None,
) -> AmdBootstrapOutcome:
    """The script's steps up to its upload, in its order (`plan` passes its own `diff`,
    `inputs` and a silent `note`). `labels` given: don't ask GitHub."""
    inputs = inputs or Inputs.from_env(repo, env)
    labels = resolve_labels(inputs, env, labels, offline=offline)
    diff = diff or resolve_diff(repo, env=env, fetch=not offline)  # a dry run fetches nothing
    # Inputs.from_env has refused a bad DEBUG_TEST_YAML: the selection cannot fail here.
    selection = suites.select_suites(inputs.branch, labels, inputs.debug_test_yaml, inputs.nightly)
    if selection.notice:
        note(selection.notice)

    decision = skipci.decision_for(diff)
    gated = [(s, decision.gate("amd", s.level) if s.level else None) for s in selection.suites]
    kept = [suite for suite, word in gated if word is None]
    skipped = [(suite, word) for suite, word in gated if word is not None]
    for suite, word in skipped:
        note(f"Skipping AMD {suite.level} suite due to {word} decision.")
    if not kept:
        annotate = any(word == "skip-all" for _, word in skipped)
        return AmdBootstrapOutcome(None, (), tuple(skipped), annotate, notice=selection.notice)

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
    combined = combine.combine([combine.load_suite(amd_dir, suite) for suite in kept], note)
    pipeline, dropped, empty = render.render_pipeline(
        combined.env, combined.steps, inputs.mirror_hw
    )
    for label in dropped:
        note(f"Not mirrored on {inputs.mirror_hw}: {label}")
    used = render.mirror_values(combined.steps)
    if used and inputs.mirror_hw not in used:
        note(
            f"warning: AMD_MIRROR_HW={inputs.mirror_hw!r} is in no selected step's"
            f" mirror_hardwares (they use: {', '.join(sorted(used))});"
            " only the image step is uploaded"
        )
    require_valid(pipeline, " + ".join(f".buildkite/amd/{s.file}" for s in kept))
    return AmdBootstrapOutcome(
        pipeline,
        tuple(kept),
        tuple(skipped),
        not_mirrored=tuple(dropped),
        empty_groups=tuple(empty),
        duplicates=tuple((s.group, str(step.get("label", ""))) for s, step in combined.dropped),
        mirror_hw=inputs.mirror_hw,
        notice=selection.notice,
    )


PRIVATE_DIR = "<private temp dir>"  # how a dry run shows the directory a run creates


def upload_commands(cwd: str) -> tuple[door.Command, ...]:
    """The script's two calls, argv unchanged, run in `cwd` (the private directory)."""
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
    inputs = Inputs.from_env(repo, source)  # every bad env input at once, the build's too
    # Which build this is, before any request: inside Buildkite a missing commit stops here.
    resolve_build(repo, source)
    for line in suites.label_warnings(labels or ""):  # only the labels given: GitHub's are real
        door.note(line)
    outcome = plan_pipeline(repo, source, labels, offline=dry_run, inputs=inputs)
    if outcome.pipeline is None:
        if outcome.annotate:
            annotate = door.Plan((skipci.annotate_command(),))
            door.execute(annotate, dry_run=dry_run, log_dry_run=True)
        door.note(NOTHING_LEFT)
        return
    text = yamlio.dumps(outcome.pipeline)
    if dry_run:
        sys.stdout.write(text)
        door.note(f"(dry-run) {PIPELINE_FILE} would be written to a new private temp directory")
        door.execute(door.Plan(upload_commands(PRIVATE_DIR)), dry_run=True, log_dry_run=True)
        return
    upload(text)


def upload(text: str) -> None:
    """Upload the pipeline from a new private directory (mode 0700, under TMPDIR), so two
    bootstraps on one checkout cannot mix them up; nothing is written into the checkout."""
    try:
        private = tempfile.TemporaryDirectory(prefix="vllm-omni-ci-amd-")
    except OSError as exc:
        raise Failure(
            f"cannot create a temporary directory for {PIPELINE_FILE}"
            f" (TMPDIR={tempfile.gettempdir()}): {exc.strerror or exc}",
        ) from None
    with private as directory:
        path = Path(directory) / PIPELINE_FILE
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise Failure(f"cannot write {path}: {exc.strerror or exc}") from None
        door.execute(door.Plan(upload_commands(directory)), check=True)
