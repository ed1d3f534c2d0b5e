"""L1 CPU tests of the toy model's captions (the "Diffusion" lane)."""

import pytest
from omni_sample import OmniModel

pytestmark = [pytest.mark.core_model, pytest.mark.cpu, pytest.mark.diffusion]


def test_single_character_is_loud() -> None:
    assert OmniModel().caption("A") == "loud"


def test_spread_text_is_calm() -> None:
    assert OmniModel().caption("abcdefghabcdefgh") == "calm"
