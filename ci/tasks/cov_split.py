"""`cov-split`: per-mode coverage runs of one model's tests (was run_cov_split.sh; ci.covsplit)."""

from __future__ import annotations

from collections.abc import Sequence

from ci.taskdef import task


@task(
    replaces=("run_cov_split.sh",),
    # The script's grammar and messages: a value is the next word, whatever it is; a
    # repeated --model-id wins (the last one); errors say `run_cov_split.sh: …`.
    script="run_cov_split.sh",
    iterable=["offline", "online"],
    help={
        "model_id": "--model-id ID: names the reports: coverage-<id>-{offline,online}-<step "
        "id>.xml.gz (required)",
        "offline": "--offline PATH: one pytest path of the offline half (repeat for more)",
        "online": "--online PATH: one pytest path of the online half (repeat for more)",
    },
)
def cov_split(
    model_id: str = "",
    offline: list[str] | None = None,
    online: list[str] | None = None,
    dry_run: bool = False,
    words: Sequence[str] = (),
) -> None:
    """Run a model's tests once per mode with coverage on weekly main; else one plain pytest.

    Pytest arguments go after `--` and keep their quoting (`-- -m 'a and b'`).
    Coverage only when WEEKLY=1 and BUILDKITE_BRANCH=main; otherwise one
    `pytest -s -v <offline> <online> <args>` whose exit code is passed through
    (5 included). With coverage, per mode: pytest --cov=vllm_omni
    --cov-report=xml:coverage-<id>-<mode>-<BUILDKITE_STEP_ID or local>.xml, then
    gzip -9; then `buildkite-agent artifact upload`; any failure exits 1.
    Argument errors exit 2 with run_cov_split.sh's messages.
    """
    import os

    from ci import covsplit

    paths = tuple(offline or ()), tuple(online or ())
    request = covsplit.Request(model_id, *paths, pytest_args=tuple(words))
    covsplit.run(request, os.environ, dry_run=dry_run)
