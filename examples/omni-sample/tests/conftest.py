"""Test options of the sample, as vLLM-Omni's test plugin defines them.

`--run-level` selects behaviour (dummy vs real weights), `-m` selects tests.
`--num-shards`/`--shard-id` are implemented here rather than by pytest-shard,
which is not installable offline: after `-m` deselection, shard `i` of `n`
keeps every n-th remaining test starting at i, in collection order.
"""

from __future__ import annotations

import pytest

RUN_LEVELS = ("core_model", "advanced_model", "full_model")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("omni-sample")
    group.addoption(
        "--run-level",
        action="store",
        default="core_model",
        choices=RUN_LEVELS,
        help="behaviour level: core_model (dummy weights), advanced_model, full_model",
    )
    group.addoption("--num-shards", type=int, default=1, help="split the run into N shards")
    group.addoption("--shard-id", type=int, default=0, help="which shard to run (0-based)")


def pytest_configure(config: pytest.Config) -> None:
    shards = config.getoption("--num-shards")
    shard = config.getoption("--shard-id")
    if shards < 1:
        raise pytest.UsageError(f"--num-shards must be at least 1, got {shards}")
    if not 0 <= shard < shards:
        raise pytest.UsageError(f"--shard-id must be in [0, {shards}), got {shard}")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shards = config.getoption("--num-shards")
    if shards == 1:
        return
    shard = config.getoption("--shard-id")
    keep = [item for index, item in enumerate(items) if index % shards == shard]
    dropped = [item for index, item in enumerate(items) if index % shards != shard]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_report_header(config: pytest.Config) -> str:
    shards = config.getoption("--num-shards")
    shard = config.getoption("--shard-id")
    return f"omni-sample: run-level={config.getoption('--run-level')} shard={shard}/{shards}"


@pytest.fixture(scope="session")
def run_level(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--run-level"))
