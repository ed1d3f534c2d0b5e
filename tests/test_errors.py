"""The two kinds of problem a task ends with (issue 34, item 5): `UserError`, bad input,
exit 2, and `Failure`, a check that found problems or something outside that failed, exit 1.
The type says which, so the README's exit-code table follows from the raise."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ci.errors import Failure, ProgramMissing, TaskError, Unavailable, UserError
from tests.inproc import Outcome


def test_each_type_has_its_own_code_and_neither_is_the_other() -> None:
    assert (UserError("x").code, Failure("x").code, ProgramMissing("x").code) == (2, 1, 127)
    assert issubclass(UserError, TaskError) and issubclass(Failure, TaskError)
    assert not issubclass(Failure, UserError) and not issubclass(UserError, Failure)
    assert issubclass(ProgramMissing, Failure)  # a missing program fails the task: not input


@pytest.mark.parametrize("kind", [UserError, Failure])
def test_collect_raises_once_for_all_problems_and_not_at_all_for_none(
    kind: type[TaskError],
) -> None:
    kind.collect([])
    kind.collect(p for p in ())
    with pytest.raises(kind) as caught:
        kind.collect(iter(["first", "second"]))
    assert type(caught.value) is kind
    assert caught.value.problems == ("first", "second")


def test_unavailable_is_an_input_error() -> None:
    missing = Unavailable("no ready tier for xpu")
    assert isinstance(missing, UserError) and missing.code == 2
    assert missing.reason == "no ready tier for xpu"


def test_a_task_exits_2_for_bad_input_and_1_for_a_failed_check(
    tmp_path: Path, inproc: Callable[..., Outcome]
) -> None:
    """One task, both types: a checkout with nothing to lint is the wrong input; a pipeline
    that does not pass is what the check is for."""
    folder = tmp_path / ".buildkite" / "cuda"
    folder.mkdir(parents=True)
    empty = inproc("lint-pipelines", "--repo", str(tmp_path), cwd=tmp_path)
    assert empty.code == 2, empty.stderr
    assert empty.stderr.startswith(f"error: --repo: {tmp_path} has no test pipelines"), empty.stderr
    (folder / "test-ready.yml").write_text(
        "steps:\n  - label: A\n    commands: [echo hi]\n    parallelism: 0\n", encoding="utf-8"
    )
    failed = inproc("lint-pipelines", "--repo", str(tmp_path), cwd=tmp_path)
    assert failed.code == 1, failed.stderr
    assert failed.stderr.startswith(f"error: {folder}/test-ready.yml: step 'A': `parallelism`")
