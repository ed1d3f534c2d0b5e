"""The in-process runner (tests/inproc.py) against the console script: the one place the
two are compared. Same exit code, same stdout, for tasks that read a checkout, run a
command and refuse input; and the runner leaves the process as it found it."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SAMPLE, run_cli
from tests.gitrepo import buildkite_env, sample_checkout
from tests.inproc import Outcome


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample_checkout(tmp_path_factory.mktemp("inproc") / "repo", SAMPLE).path


CASES = {
    "skip-ci": ("skip-ci", "--platform", "cuda", "--level", "l2", "--repo", "{repo}"),
    "plan-json": ("plan", "--repo", "{repo}", "--format", "json"),
    "step": ("step", "--", "sh", "-c", "echo 'a  b'; exit 3"),
    "usage-error": ("plan", "--repo", "{repo}", "--format", "nope"),
}


@pytest.mark.parametrize("case", CASES)
def test_same_code_and_stdout_as_the_console_script(
    case: str, checkout: Path, tmp_path: Path, inproc: Callable[..., Outcome]
) -> None:
    argv = [word.format(repo=checkout) for word in CASES[case]]
    env = buildkite_env()
    inside = inproc(*argv, env=env, cwd=tmp_path)
    outside = run_cli(*argv, env=env, cwd=tmp_path)
    assert (inside.code, inside.stdout) == (outside.returncode, outside.stdout)
    # The first line of stderr (the echoed command, the `local build:` line, an error).
    assert inside.stderr.splitlines()[:1] == outside.stderr.splitlines()[:1]


def test_the_process_is_left_as_found(tmp_path: Path, inproc: Callable[..., Outcome]) -> None:
    before = (
        dict(os.environ),
        os.getcwd(),
        sys.argv,
        sys.stdout,
        sys.stderr,
        sys.stdin,
        {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)},
    )
    done = inproc("step", "--", "true", env={**os.environ, "X_FUZZ": "1"}, cwd=tmp_path)
    assert done.code == 0
    after = (
        dict(os.environ),
        os.getcwd(),
        sys.argv,
        sys.stdout,
        sys.stderr,
        sys.stdin,
        {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)},
    )
    assert after == before


def test_a_secret_learnt_in_one_call_is_forgotten(inproc: Callable[..., Outcome]) -> None:
    """Each call starts as cold as a new process: nothing remembered from the one before."""
    from ci import redact

    redact.remember("learnt-secret-value")
    inproc("--version")
    assert not redact._remembered
