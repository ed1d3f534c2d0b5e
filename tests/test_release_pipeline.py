"""This repository's own release: its Buildkite pipeline, `--version`, and the CHANGELOG.

The pipeline is checked by our own gates, as a vLLM-Omni pipeline would be; the
version is VERSION's one line, which a clone without tags knows too, a tag build
refuses a tag that names another version, and the CHANGELOG has VERSION's entry.
"""

from __future__ import annotations

import re
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from ci import yamlio
from ci.pipeline.commands import command_text
from tests.conftest import ROOT
from tests.inproc import run_task

PIPELINE = ROOT / ".buildkite" / "pipeline.yml"
TAG_ONLY = "build.tag =~ /^v[0-9]/"


def test_the_release_pipeline_passes_lint_and_the_schema() -> None:
    done = run_task("lint-pipelines", "--repo", str(ROOT))
    assert done.returncode == 0, done.stderr
    # The file was linted (a non-test YAML gets the consumer and schema checks only).
    assert re.search(r"^ok +\.buildkite/pipeline\.yml: \d+ step\(s\), 0 problem", done.stdout, re.M)
    shell = run_task("shellcheck-steps", "--repo", str(ROOT))
    assert shell.returncode == 0, shell.stdout + shell.stderr


def test_only_a_tag_build_publishes_and_only_after_the_tests() -> None:
    steps = yamlio.load(PIPELINE)["steps"]
    keys = {step.get("key") for step in steps}
    assert {"lint", "tests", "dist", "tools-image"} <= keys
    publishing = [s for s in steps if re.search(r"twine upload|docker push", command_text(s))]
    assert len(publishing) == 2
    for step in publishing:
        assert step["if"] == TAG_ONLY
        assert {"lint", "tests", "dist", "tools-image"} <= set(step["depends_on"])
    pushed = next(command_text(s) for s in publishing if "docker push" in command_text(s))
    assert 'docker push "vllm-omni-ci/tools:$${BUILDKITE_TAG#v}"' in pushed


VERSION = (ROOT / "VERSION").read_text(encoding="utf-8").strip()


def test_version_prints_the_version_files_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:(?:a|b|rc|\.dev)\d+)?", VERSION), VERSION
    done = run_task("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"vllm-omni-ci {VERSION}\n"
    assert metadata.version("vllm-omni-ci") == VERSION


def dist_version_guard() -> str:
    """The dist step's tag check, as the job's shell gets it (Buildkite turns `$$` into `$`)."""
    (dist,) = [s for s in yamlio.load(PIPELINE)["steps"] if s.get("key") == "dist"]
    (guard,) = [c for c in dist["commands"] if "VERSION" in c]
    return str(guard).replace("$$", "$")


@pytest.mark.parametrize(
    ("tag", "code"), [("", 0), (f"v{VERSION}", 0), ("v99.0.0", 1), (f"v{VERSION}.post1", 1)]
)
def test_a_tag_build_stops_unless_the_tag_names_the_version_file(
    tag: str, code: int, tmp_path: Path
) -> None:
    (tmp_path / "VERSION").write_text(f"{VERSION}\n")
    env = {"PATH": "/usr/bin:/bin", "BUILDKITE_TAG": tag}
    done = subprocess.run(
        ["bash", "-euc", dist_version_guard()], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    assert done.stderr.startswith("error: tag ") == bool(code)


def test_the_changelog_has_an_entry_for_the_version_file() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert headings[0] == "Unreleased"
    assert VERSION in headings[1:]
