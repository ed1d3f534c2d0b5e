"""L2 GPU tests: they need an accelerator and are skipped without one.

Hardware comes only through `hardware_test`, never a direct SKU mark.
"""

import pytest
from omni_sample import OmniModel, detect_accelerator

from tests.helpers.mark import hardware_test


@pytest.mark.core_model
@hardware_test(res={"rocm": "MI325"}, num_cards=2)
def test_rocm_two_card_engine(run_level: str) -> None:
    assert detect_accelerator() == "rocm"
    assert OmniModel().embed(run_level)


@pytest.mark.core_model
@hardware_test(res={"cuda": ["L4", "H100"]}, num_cards=1)
def test_cuda_engine(run_level: str) -> None:
    assert detect_accelerator() == "cuda"
    assert OmniModel().embed(run_level)


@pytest.mark.core_model
@hardware_test(res={"cuda": ["L4", "H100"]}, num_cards=1)
def test_cuda_matmul_matches_the_cpu() -> None:
    """Real work on the GPU: a matmul and softmax on `cuda` equal the CPU's result."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(256, 256, generator=generator) for _ in range(2))
    expected = torch.softmax(a @ b, dim=-1)
    on_gpu = torch.softmax(a.to("cuda") @ b.to("cuda"), dim=-1)
    assert on_gpu.device.type == "cuda"
    assert torch.allclose(on_gpu.cpu(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.core_model
@hardware_test(res={"npu": "A2"}, num_cards=1)
def test_npu_a2_engine() -> None:
    assert detect_accelerator() == "npu"


@pytest.mark.core_model
@hardware_test(res={"npu": "A3"}, num_cards=2)
def test_npu_a3_engine() -> None:
    assert detect_accelerator() == "npu"


@pytest.mark.core_model
@hardware_test(res={"xpu": "B60"}, num_cards=1)
def test_xpu_engine() -> None:
    assert detect_accelerator() == "xpu"
