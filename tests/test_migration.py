"""docs/migration.md covers every vLLM-Omni script the specs name, in the agreed columns.

The specs (../shared/spec/*.md) are read at test time: a script named there
without a row here fails, so the guide cannot silently fall behind them.
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT, SHARED, need_shared, shared_params

GUIDE = (ROOT / "docs" / "migration.md").read_text()
HEADER = "| script | old job command | new job command | vLLM-Omni must | status |"
STATUSES = {"done", "partial", "planned", "kept", "dropped", "out of scope"}

# Names in the specs that are not CI scripts: paths inside golden-scenario
# tables and diff examples, vLLM-Omni sources and tests that CI merely runs.
NOT_SCRIPTS = {
    "setup.py",  # a cache-key input and a diff path, not a CI script
    "conftest.py",
    "mark.py",  # tests/helpers/mark.py: the marker helper check-marks reads
    "x.py",
    "a.py",
    "_test.py",
    "foo.py",
    "foobar.py",
    "unrelated.py",
    "__init__.py",
    "transformer.py",
    "snake_activation.py",
    "hipify.py",  # cmake/hipify.py: a path prefix in the AMD diff filter
    "serving_speech.py",  # the file check_tts_adapter.py reads
    "run_benchmark.py",  # a test command inside a YAML step
    "pytest_run_args.py",
}


def spec_scripts() -> set[str]:
    names: set[str] = set()
    for spec in sorted(need_shared(SHARED / "spec").glob("*.md")):
        for path in re.findall(r"[A-Za-z0-9_./-]+\.(?:sh|py)\b", spec.read_text()):
            name = path.rsplit("/", 1)[-1]
            if (
                name.startswith("test_")
                and "/buildkite/" not in path
                and not name.startswith(
                    ("test_skip_ci", "test_amd_", "test_upload_pipeline", "test_rocm_dockerfile")
                )
            ):
                continue  # a vLLM-Omni test file used as an example path
            names.add(name)
    return names - NOT_SCRIPTS


def rows() -> list[list[str]]:
    table = [line for line in GUIDE.splitlines() if line.startswith("| ")]
    assert table[0] == HEADER
    return [re.split(r"(?<!\\)\|", line)[1:-1] for line in table[2:]]


def test_the_specs_name_scripts_at_all() -> None:
    found = spec_scripts()
    assert {"skip_ci.py", "upload_pipeline.py", "run-amd-test.sh", "build-npu-image.sh"} <= found


@pytest.mark.parametrize("script", shared_params(lambda: sorted(spec_scripts())))
def test_every_script_named_in_the_specs_has_a_row(script: str) -> None:
    first_cells = [row[0] for row in rows()]
    assert any(script in cell for cell in first_cells), f"no row for {script}"


def test_every_row_has_the_five_columns_and_a_known_status() -> None:
    for row in rows():
        assert len(row) == 5, row
        assert all(cell.strip() for cell in row), row
        assert row[4].strip().split(" (")[0] in STATUSES, row


def test_the_pinned_install_row_names_every_ci_dockerfile() -> None:
    row = next(r for r in rows() if "pinned install of vllm-omni-ci" in r[0])
    for dockerfile in ("Dockerfile.rocm", "Dockerfile.ci", "Dockerfile.npu.ci", "Dockerfile.xpu"):
        assert dockerfile in row[3]
    assert "vllm-omni-ci==" in row[3]
