"""The README's promises (and docs/contributing.md's, docs/reference.md's): the adopter's
path first, the main job as steps that run, the test command CI runs, a complete
task/session table.

The table (docs/reference.md) must name every task (`vllm-omni-ci --list`) and every nox
session (`nox -l`), so a task added without a line fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, SAMPLE

README = (ROOT / "README.md").read_text()
CONTRIBUTING = (ROOT / "docs" / "contributing.md").read_text()
REFERENCE = (ROOT / "docs" / "reference.md").read_text()
# Where the README hands over to docs/: everything an adopter needs comes before it.
HAND_OVER = "\n## More\n"


def fenced_bash(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def table_rows(kind: str) -> set[str]:
    return set(table_names(kind))


def table_names(kind: str) -> list[str]:
    return re.findall(rf"^\| {kind} \| `([^`]+)` \|", REFERENCE, re.MULTILINE)


def task_names() -> set[str]:
    from ci.tasks import definitions

    return set(definitions())


def session_names() -> set[str]:
    """Every session `nox -l` shows, selected by default (`*`) or not (`-`)."""
    listing = subprocess.run(["nox", "-l"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    return set(re.findall(r"^[*-] (\S+)", listing.stdout, re.MULTILINE))


def test_the_adopters_path_comes_first_and_fits_200_lines() -> None:
    """What it is, install, the five commands, a checkout, adopting, exit codes; then docs/."""
    adopter = README.split(HAND_OVER, 1)[0]
    assert len(adopter.splitlines()) < 200
    headings = re.findall(r"^## (.+)$", adopter, re.MULTILINE)
    assert headings[:2] == ["Install", "Five commands a maintainer uses"]
    assert {"Adopting it", "Exit codes", "Running on a vLLM-Omni checkout"} <= set(headings)


def test_the_test_command_is_what_ci_runs() -> None:
    ci_run = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    (tests,) = fenced_bash(README.split("\n## Contributing\n", 1)[1].split("\n## ", 1)[0])
    assert ci_run[-1] == tests.strip() == "nox -s lint mypy shellcheck tests"


def main_job_steps() -> list[str]:
    """The main job (docs/contributing.md's first block): one command per line, each line's
    `#` comment dropped."""
    block = fenced_bash(CONTRIBUTING)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_main_job_installs_builds_the_sample_image_and_runs_its_ready_tier() -> None:
    assert main_job_steps() == [
        "python3 -m pip install -e '.[dev]'",
        "vllm-omni-ci sandbox up",
        "vllm-omni-ci wheelhouse",
        "vllm-omni-ci build-image --platform rocm --repo examples/omni-sample"
        " --builder buildx --buildx-builder default --no-push",
        "nox -s ready -- --platform rocm --repo examples/omni-sample",
    ]


@pytest.mark.docker
def test_main_job_runs_as_written(docker_cli: str) -> None:
    """The README's main job, minus the install this test already runs under.

    The commit is pinned so that the image the build tags is the one the tier
    looks up, even if HEAD moves meanwhile; the image is removed afterwards.
    The docker client is not pinned: doctor's auto-detection must find one.
    """
    steps = main_job_steps()[1:]
    commit = f"readme-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "BUILDKITE_COMMIT": commit}
    # As written: the docker client is the one doctor auto-detects, as in .ci/run.
    env.pop("VLLM_OMNI_CI_DOCKER", None)
    env.pop("BUILDKITE", None)
    try:
        result = subprocess.run(
            ["bash", "-c", " && ".join(steps)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
        )
    finally:
        subprocess.run([docker_cli, "rmi", "-f", f"rocm/vllm-omni:{commit}"], capture_output=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = result.stdout + result.stderr
    assert "Shard 1/2" in summary and "Shard 2/2" in summary
    assert re.search(r"soft failure\s+\[rocm\] Simple · Advanced CPU Test", summary)
    assert re.search(r"needs mi300_2(: [^\n]*?)?\s+\[rocm\] Engine · Two-GPU Test", summary)


def test_table_lists_every_task_and_session() -> None:
    assert table_rows("task") == task_names()
    assert table_rows("session") == session_names()


@pytest.mark.parametrize("kind", ["task", "session"])
def test_table_has_one_row_per_name(kind: str) -> None:
    names = table_names(kind)
    assert sorted(names) == sorted(set(names)), [n for n in names if names.count(n) > 1]


def test_has_a_section_for_vllm_omni_checkouts() -> None:
    assert "\n## Running on a vLLM-Omni checkout\n" in README


def checkout_commands() -> list[str]:
    """The lines of the "Running on a vLLM-Omni checkout" block that need no image build."""
    section = README.split("\n## Running on a vLLM-Omni checkout\n", 1)[1]
    block = re.search(r"^```bash\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert block is not None
    skipped = ("pip install ", "cd ", "#", "vllm-omni-ci build-image", "vllm-omni-ci tier")
    return [ln for ln in block.group(1).splitlines() if ln and not ln.startswith(skipped)]


def checkout_command_params() -> list[Any]:
    """`checkout_commands`, with doctor's line a Docker test: it checks the engine and registry."""
    return [
        pytest.param(ln, marks=pytest.mark.docker) if ln.startswith("vllm-omni-ci doctor") else ln
        for ln in checkout_commands()
    ]


def checkout_block() -> list[str]:
    section = README.split("\n## Running on a vLLM-Omni checkout\n", 1)[1]
    block = re.search(r"^```bash\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert block is not None
    return [ln for ln in block.group(1).splitlines() if ln and not ln.startswith("#")]


def test_checkout_block_needs_no_noxfile() -> None:
    """A vLLM-Omni checkout has no noxfile of ours, and nox runs from the noxfile's
    directory (so `--repo .` would be vllm-omni-ci itself): the block uses the CLI."""
    assert not [ln for ln in checkout_block() if ln.startswith("nox ") or " nox " in ln]


def test_checkout_tier_line_runs_with_list(checkout: Path) -> None:
    """The tier line needs an image to run; with `--list` it proves the command line
    and that the repo defaults to the current checkout."""
    lines = [ln for ln in checkout_block() if ln.startswith("vllm-omni-ci tier ")]
    assert lines
    for line in lines:
        command = line.split("  #", 1)[0].strip() + " --list"
        done = subprocess.run(
            ["bash", "-c", command], cwd=checkout, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        platform = re.search(r"--platform (\w+)", command)
        assert platform, command
        files = {
            "rocm": ".buildkite/amd/test-amd-ready.yml",
            "cuda": ".buildkite/cuda/test-ready.yml",
        }
        name = platform.group(1)
        assert f"# ready tier for {name}: {files[name]}" in done.stdout


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample as a vLLM-Omni checkout: its own repo, main pushed, a change on a branch."""
    from tests.gitrepo import sample_checkout

    root = tmp_path_factory.mktemp("readme-checkout")
    repo = sample_checkout(root / "vllm-omni", SAMPLE)
    repo.branch("my-branch")
    repo.commit_files({"omni_sample/extra.py": "VALUE = 1\n"}, "a change")
    return repo.path


def test_checkout_block_has_the_everyday_commands() -> None:
    lines = checkout_commands()
    for task in ("doctor", "plan", "skip-ci", "upload-pipeline", "bootstrap", "check-marks"):
        assert any(f"vllm-omni-ci {task}" in ln for ln in lines), task


@pytest.mark.parametrize("line", checkout_command_params())
def test_checkout_command_runs_as_written(line: str, checkout: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BUILDKITE", "VLLM_CI_"))}
    env.pop("CI", None)
    done = subprocess.run(
        ["bash", "-c", line], cwd=checkout, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr


CLOSED_READER = (
    "python3 -c 'import os, subprocess, sys; r, w = os.pipe(); os.close(r); "
    "sys.exit(subprocess.run(sys.argv[1:], stdout=w).returncode)' %s"
)

# One command per row of the README's exit-code table, run in a scratch directory:
# a row added without an example here fails, and so does a row that stops being true.
EXIT_EXAMPLES = {
    "0": (0, "vllm-omni-ci --list >/dev/null"),
    "1": (1, "vllm-omni-ci skip-ci --platform cuda --level l2 --repo ."),
    "2": (2, "vllm-omni-ci skip-ci --platform tpu --level l2"),
    "N": (7, "vllm-omni-ci step -- bash -c 'exit 7'"),
    "124, 137": (124, "vllm-omni-ci step --timeout 1s -- sleep 30"),
    "126, 127": (127, "vllm-omni-ci step -- no-such-program-here"),
    "128+N": (134, "vllm-omni-ci step -- bash -c 'kill -ABRT $$'"),
    # `| head -1` races: head may read the line and leave only after our last write
    # (exit 0, seen in CI). Here the reader has already gone before our first write.
    "141": (141, CLOSED_READER % "vllm-omni-ci --list"),
    "74": (74, "vllm-omni-ci --list > /dev/full"),
}


def exit_code_rows() -> list[str]:
    section = README.split("\nExit codes", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| ([^|]+?) \| ", section, re.MULTILINE)[1:]  # [0] is the header


def test_exit_code_table_rows_have_examples() -> None:
    assert exit_code_rows() == list(EXIT_EXAMPLES)


@pytest.mark.parametrize("row", list(EXIT_EXAMPLES))
def test_exit_code_table_row_is_true(row: str, tmp_path: Path) -> None:
    from tests.gitrepo import GitRepo, buildkite_env

    GitRepo.create(tmp_path / "repo", origin=False).commit("empty")
    code, command = EXIT_EXAMPLES[row]
    env = buildkite_env()
    env.pop("CI", None)
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path / "repo",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == code, (done.stdout[-1000:], done.stderr[-1000:])
    assert "Traceback" not in done.stderr
