"""This repository's own release: its Buildkite pipeline, `--version`, and the CHANGELOG.

The pipeline is checked by our own gates, as a vLLM-Omni pipeline would be; the
version is the installed distribution's (setuptools-scm wrote it from the git tags);
and the newest `v*` tag has its CHANGELOG entry.
"""

from __future__ import annotations

import re
import subprocess
from importlib import metadata

import pytest

from ci import yamlio
from ci.pipeline.commands import command_text
from tests.conftest import ROOT, run_cli

PIPELINE = ROOT / ".buildkite" / "pipeline.yml"
TAG_ONLY = "build.tag =~ /^v[0-9]/"


def test_the_release_pipeline_passes_lint_and_the_schema() -> None:
    done = run_cli("lint-pipelines", "--repo", str(ROOT))
    assert done.returncode == 0, done.stderr
    # The file was linted (a non-test YAML gets the consumer and schema checks only).
    assert re.search(r"^ok +\.buildkite/pipeline\.yml: \d+ step\(s\), 0 problem", done.stdout, re.M)
    shell = run_cli("shellcheck-steps", "--repo", str(ROOT))
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


def test_version_prints_the_installed_distributions_version() -> None:
    done = run_cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"vllm-omni-ci {metadata.version('vllm-omni-ci')}\n"
    assert re.fullmatch(r"vllm-omni-ci \d+\.\d+\S*\n", done.stdout)


def test_the_changelog_has_an_entry_for_the_newest_tag() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert headings[0] == "Unreleased"
    described = subprocess.run(
        ["git", "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if described.returncode != 0:
        pytest.skip(f"no v* tag reachable from HEAD (a clone without tags): {described.stderr}")
    assert described.stdout.strip().removeprefix("v") in headings[1:]
