"""L3/L4 tests. The `advanced_model and cpu` test fails on purpose.

It is the sample's known-bad test: the ready tier runs it in a NonBlocking
step, so tools must report that step as a soft failure while the tier passes.
"""

import pytest
from omni_sample import OmniModel

from tests.helpers.mark import hardware_test


@pytest.mark.advanced_model
@pytest.mark.cpu
def test_advanced_cpu_caption_is_deliberately_wrong(run_level: str) -> None:
    caption = OmniModel().caption("A")
    assert caption == "calm", (
        f"deliberate failure (run-level {run_level}): the sample's quarantined test must fail"
    )


@pytest.mark.advanced_model
@hardware_test(res={"cuda": "H100"}, num_cards=1)
def test_advanced_cuda_real_weights(run_level: str) -> None:
    assert run_level == "advanced_model"


@pytest.mark.advanced_model
@hardware_test(res={"rocm": "MI325"}, num_cards=1)
def test_advanced_rocm_real_weights(run_level: str) -> None:
    assert run_level == "advanced_model"


@pytest.mark.full_model
@hardware_test(res={"rocm": "MI325"}, num_cards=2)
def test_full_rocm_accuracy(run_level: str) -> None:
    assert run_level == "full_model"
