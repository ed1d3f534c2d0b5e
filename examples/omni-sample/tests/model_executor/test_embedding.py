"""L1 CPU tests of the toy model's embedding (the sharded "Model Executor" lane)."""

import math

import pytest
from omni_sample import OmniModel

pytestmark = [pytest.mark.core_model, pytest.mark.cpu]


def test_embedding_has_model_dim() -> None:
    assert len(OmniModel(dim=8).embed("hello")) == 8


def test_embedding_is_unit_length() -> None:
    vector = OmniModel().embed("vLLM-Omni")
    assert math.isclose(sum(v * v for v in vector), 1.0, rel_tol=1e-9)


def test_embedding_is_deterministic() -> None:
    assert OmniModel().embed("same") == OmniModel().embed("same")


def test_empty_text_embeds_to_zeros() -> None:
    assert OmniModel(dim=4).embed("") == [0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("dim", [1, 2, 16])
def test_embedding_respects_any_dim(dim: int) -> None:
    assert len(OmniModel(dim=dim).embed("abc")) == dim


@pytest.mark.omni
def test_omni_processor_round_trip(run_level: str) -> None:
    assert run_level == "core_model"
    assert OmniModel().caption("a quiet afternoon") in {"calm", "loud"}
