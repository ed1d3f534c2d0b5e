"""L1 CPU tests of the marker registry that drives `hardware_test`."""

import pytest

from tests.helpers.mark import hardware_marks, registry

pytestmark = [pytest.mark.core_model, pytest.mark.cpu]


def test_registry_groups_markers_by_tag() -> None:
    reg = registry()
    assert reg.levels == ("core_model", "advanced_model", "full_model", "local_model", "slow")
    assert "cpu" in reg.platforms and "cpu" not in reg.gpu_platforms
    assert set(reg.gpu_platforms) == {"cuda", "rocm", "xpu"}
    assert reg.skus["rocm"] == ("MI325",)
    assert reg.skus["npu"] == ("A2", "A3", "A5", "310P")
    assert reg.cards == (1, 2, 4, 8)


def test_hardware_marks_add_platform_gpu_sku_and_cards() -> None:
    names = [mark.name for mark in hardware_marks(res={"rocm": "MI325"}, num_cards=2)]
    assert names == ["rocm", "gpu", "MI325", "cards_2", "skipif"]


@pytest.mark.parametrize(
    ("res", "cards", "message"),
    [
        ({"cpu": "X"}, 1, "not a platform with SKUs"),
        ({"rocm": ["MI325"]}, 1, "only cuda takes a list"),
        ({"cuda": "MI325"}, 1, "not a registered cuda SKU"),
        ({"cuda": "L4"}, 3, "cards_3 is not registered"),
    ],
)
def test_hardware_marks_reject_bad_requests(res: dict, cards: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        hardware_marks(res=res, num_cards=cards)
