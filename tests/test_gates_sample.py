"""The embedded sample passes every gate this project ships (issue 23, item 11).

`examples/omni-sample` is what a vLLM-Omni checkout should look like, so
`check-marks`, `lint-pipelines` and `shellcheck-steps` (real shellcheck, all
severities) must all exit 0 on it. Its CUDA bootstrap YAML used to test
`"${WEEKLY:-}"` and `"${BUILDKITE_BRANCH}"` in shell `if`s: Buildkite fills in
single-`$` references at upload, so the job shell saw `[ "1" = "1" ]`, a
constant (4 x SC2050). The sample now writes `$${…}`, so the job shell decides.
"""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLE
from tests.gitrepo import buildkite_env
from tests.inproc import run_task


@pytest.mark.parametrize("gate", ["check-marks", "lint-pipelines", "shellcheck-steps"])
def test_the_sample_passes_every_gate(gate: str) -> None:
    env = buildkite_env()
    env.pop("MIRROR_HW", None)
    done = run_task(gate, "--repo", str(SAMPLE), env=env, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "error:" not in done.stderr
    if gate == "shellcheck-steps":
        assert done.stdout == ""
        assert "shellcheck-steps: 0 finding(s)" in done.stderr
