"""L2 GPU end-to-end smoke of the toy model (dummy weights at core_model)."""

import pytest
from omni_sample import OmniModel

from tests.helpers.mark import hardware_test


@pytest.mark.core_model
@pytest.mark.omni
@hardware_test(res={"cuda": ["L4", "H100"]}, num_cards=1)
def test_serving_smoke_cuda(run_level: str) -> None:
    assert OmniModel().caption(run_level) in {"calm", "loud"}


@pytest.mark.core_model
@pytest.mark.omni
@hardware_test(res={"npu": "A3"}, num_cards=2)
def test_serving_smoke_npu(run_level: str) -> None:
    assert OmniModel().caption(run_level) in {"calm", "loud"}
