"""The README's promises: two opening commands, a complete task/session table.

The table must name every task (`inv --list`) and every nox session (`nox -l`),
so a task added without a README line fails here.
"""

from __future__ import annotations

import re
import shlex
import subprocess

from tests.conftest import ROOT, run_cli

README = (ROOT / "README.md").read_text()


def fenced_bash() -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```$", README, re.MULTILINE | re.DOTALL)


def table_rows(kind: str) -> set[str]:
    return set(re.findall(rf"^\| {kind} \| `([^`]+)` \|", README, re.MULTILINE))


def task_names() -> set[str]:
    from ci.tasks import ns

    return set(ns.task_names)


def session_names() -> set[str]:
    """Every session `nox -l` shows, selected by default (`*`) or not (`-`)."""
    listing = subprocess.run(["nox", "-l"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    return set(re.findall(r"^[*-] (\S+)", listing.stdout, re.MULTILINE))


def test_readme_opens_with_exactly_two_commands() -> None:
    before_table = README.split("## Tasks and sessions")[0]
    blocks = re.findall(r"^```bash\n(.*?)^```$", before_table, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 2
    assert all(len(block.strip().splitlines()) == 1 for block in blocks)
    main_job, tests = (block.strip() for block in blocks)
    assert main_job.startswith("python3 -m pip install -e '.[dev]' && ")
    assert "build-image --platform rocm --repo examples/omni-sample --builder engine" in main_job
    assert tests == "nox -s lint mypy shellcheck tests"


def test_the_test_command_is_what_ci_runs() -> None:
    ci_run = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    tests = fenced_bash()[1].strip()
    assert ci_run[-1] == tests


def test_main_job_build_step_prints_the_sample_plan_and_says_so() -> None:
    """Runs the README's build-image step as written (it is a dry-run for now)."""
    steps = [s.strip() for s in fenced_bash()[0].split("&&")]
    (build,) = [s for s in steps if "build-image" in s]
    argv = shlex.split(build)
    assert argv[0] == "vllm-omni-ci"
    result = run_cli(*argv[1:])
    assert result.returncode == 0, result.stderr
    if "--dry-run" in argv:
        assert result.stdout.startswith("# plan: ROCm CI image")
        assert "--target test" in result.stdout
        assert "examples/omni-sample" in result.stdout
        assert any("echo" in s and "dry-run" in s for s in steps), "must say it is a dry-run"


def test_table_lists_every_task_and_session() -> None:
    assert table_rows("task") == task_names()
    assert table_rows("session") == session_names()


def test_has_a_section_for_vllm_omni_checkouts() -> None:
    assert "\n## Running on a vLLM-Omni checkout\n" in README
