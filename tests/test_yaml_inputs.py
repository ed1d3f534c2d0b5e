"""Pipeline YAML inputs every task must refuse with one line (issue 23: items 19, 20, 21).

Alias bombs, nesting that crashes libyaml, duplicate keys and `command` values
that are no shell text, each put into the file a task reads, through the CLI:
one `error:` line naming the file (and the step), the task's exit code, never
a traceback or a hang. The generous timeouts only catch a hang.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ci import yamlio
from ci.errors import Failure
from tests.conftest import SAMPLE, SHARED, need_shared, shared_params
from tests.gitrepo import GitRepo, buildkite_env, sample_checkout
from tests.inproc import run_task

CUDA = ".buildkite/cuda/test-ready.yml"
AMD = ".buildkite/amd/test-amd-ready.yml"
CUDA_STEP = "Simple · Model Executor Test"
AMD_STEP = "Simple · Model Executor Test · Shard %N/%t"
HANG = 120  # seconds: only a hang (or an alias bomb being expanded) takes this long

# Every task that reads a pipeline YAML, and the file it reads (R: the repo).
TASKS: dict[str, tuple[list[str], str]] = {
    "upload-pipeline": (
        ["upload-pipeline", CUDA, "--dry-run", "--scope", "all", "--repo", "R"],
        CUDA,
    ),
    "lint-pipelines": (["lint-pipelines", "--repo", "R"], CUDA),
    "shellcheck-steps": (["shellcheck-steps", "--dry-run", "--repo", "R"], CUDA),
    "tier": (["tier", "ready", "--platform", "cuda", "--list", "--repo", "R"], CUDA),
    "bootstrap": (["bootstrap", "--platform", "rocm", "--dry-run", "--repo", "R"], AMD),
    "plan": (
        [
            "plan",
            "--repo",
            "R",
            "--worktree",
            "--branch",
            "pr",
            "--labels",
            "ready",
            "--platform",
            "rocm",
        ],
        AMD,
    ),
}


def laughs(fanout: int, levels: int) -> str:
    """Nested aliases: `fanout ** levels` nodes once expanded, a few hundred bytes written."""
    lines = [f"x-l0: &l0 [{', '.join(['lol'] * fanout)}]"]
    for level in range(1, levels + 1):
        lines.append(f"x-l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * fanout)}]")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    return sample_checkout(tmp_path_factory.mktemp("yaml-inputs") / "repo", SAMPLE)


def target(sample: GitRepo, tmp_path: Path, rel: str, edit: str | bytes) -> Path:
    """A copy of the sample checkout whose `rel` is replaced by `edit` (uncommitted)."""
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(sample.path, repo, symlinks=True)
    path = repo / rel
    if isinstance(edit, bytes):
        path.write_bytes(edit)
    else:
        path.write_text(edit)
    return repo


def run_named(name: str, repo: Path) -> tuple[int, str, str]:
    args, _file = TASKS[name]
    env = buildkite_env(DEBUG_TEST_YAML="ready")
    for unset in ("MIRROR_HW", "NIGHTLY", "CI"):
        env.pop(unset, None)
    done = run_task(*(str(repo) if a == "R" else a for a in args), env=env, timeout=HANG)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


def shown(repo: Path, rel: str) -> tuple[str, str]:
    """The two spellings of a file in messages: repo-relative, absolute."""
    return rel, str(repo / rel)


def error_lines(stdout: str, stderr: str) -> list[str]:
    return [line.strip() for line in (stdout + stderr).splitlines() if "error: " in line]


# --------------------------------------------------------------------- 19: alias bombs


def test_a_billion_laughs_is_refused_before_it_is_expanded() -> None:
    bomb = laughs(9, 9)  # 9**9 ≈ 387 million leaves
    assert len(bomb) < 1024
    with pytest.raises(Failure) as caught:
        yamlio.loads(bomb, source="laughs.yml")
    (problem,) = caught.value.problems
    assert problem.startswith("laughs.yml: YAML aliases expand 30 written nodes to ")
    assert problem.endswith("(at most 100,000 more are allowed); refusing an alias bomb")
    assert caught.value.code == 1
    # The same anchors, used a few times, are ordinary YAML.
    assert yamlio.loads(laughs(3, 3), source="ok.yml")["x-l3"][2][2][2] == ["lol"] * 3


@pytest.mark.parametrize("task", list(TASKS))
def test_an_alias_bomb_stops_every_task_with_one_line(
    sample: GitRepo, tmp_path: Path, task: str
) -> None:
    """A ~400-byte file of nested aliases (10**6 nodes) used to hang these tasks, or end
    them with MemoryError, when the first walk, copy or dump expanded it."""
    rel = TASKS[task][1]
    repo = target(sample, tmp_path, rel, laughs(10, 6) + (sample.path / rel).read_text())
    code, out, err = run_named(task, repo)
    assert code == 1, err
    errors = [line for line in error_lines(out, err) if "alias bomb" in line]
    assert len(errors) == 1, err
    assert any(name in errors[0] for name in shown(repo, rel)), errors


def test_deep_nesting_is_refused_not_a_crash(sample: GitRepo, tmp_path: Path) -> None:
    """30,000 nested `[` (60 KB) killed the process in libyaml's composer (SIGSEGV)."""
    deep = "steps: " + "[" * 30_000 + "]" * 30_000 + "\n"
    repo = target(sample, tmp_path, CUDA, deep)
    code, _out, err = run_named("lint-pipelines", repo)
    assert code == 1, (code, err)
    assert f"error: {repo / CUDA}: YAML nested deeper than 100 levels (at line 1)" in err
    with pytest.raises(Failure, match="nested deeper than 100 levels"):
        yamlio.loads("[" * 101 + "]" * 101)
    assert yamlio.loads("[" * 100 + "]" * 100) is not None


@pytest.mark.parametrize(
    "rel",
    shared_params(
        lambda: sorted(p.relative_to(SHARED) for p in SHARED.glob("vllm-omni/.buildkite/**/*.yml"))
    ),
)
def test_the_corpus_loads_as_before(rel: Path) -> None:
    """Real files with ordinary anchors (the registries use dozens) load unchanged."""
    text = need_shared(SHARED / rel).read_text()
    assert yamlio.loads_all(text, source=str(rel)) == list(
        yaml.load_all(text, Loader=yaml.CSafeLoader)
    )


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(Failure) as caught:
        yamlio.loads("steps: &s\n  - *s\n", source="r.yml")
    assert caught.value.problems == (
        "r.yml: a YAML alias refers to the node that contains it (line 1)",
    )


# ------------------------------------------------------------------- 20: duplicate keys

TWICE = """\
steps:
  - label: "twice"
    command: echo first
    command: echo second
"""


@pytest.mark.parametrize("task", ["lint-pipelines", "shellcheck-steps", "upload-pipeline", "tier"])
def test_a_duplicate_key_is_an_error_naming_file_line_and_key(
    sample: GitRepo, tmp_path: Path, task: str
) -> None:
    """`lint-pipelines` passed a step with two `command:` keys; YAML kept the second."""
    repo = target(sample, tmp_path, CUDA, TWICE)
    code, out, err = run_named(task, repo)
    assert code == 1, err
    (line,) = [e for e in error_lines(out, err) if "duplicate key" in e]
    assert "duplicate key 'command' at line 4, column 5 (first at line 3)" in line
    assert any(name in line for name in shown(repo, CUDA)), line


def test_duplicate_keys_anywhere_and_merge_keys() -> None:
    text = "env:\n  A: 1\n  B: 2\n  A: 3\nx: &x {k: 1}\ny:\n  <<: *x\n  k: 2\n"
    with pytest.raises(Failure) as caught:
        yamlio.loads(text, source="d.yml")
    assert caught.value.problems == (
        "d.yml: duplicate key 'A' at line 4, column 3 (first at line 2)",
    )
    # A `<<` merge is overridden on purpose; `1` and `true` are one key to Python.
    assert yamlio.loads(text.replace("  A: 3\n", ""), source="d.yml")["y"] == {"k": 2}
    with pytest.raises(Failure, match="duplicate key 'true' at line 1"):
        yamlio.loads("{1: a, true: b}", source="d.yml")


def test_a_duplicate_key_in_a_registry_names_the_registry(sample: GitRepo, tmp_path: Path) -> None:
    rel = ".buildkite/common/ci_mirror_hardwares.yml"
    text = (sample.path / rel).read_text()
    repo = target(
        sample,
        tmp_path,
        rel,
        text.replace("mirror_hardwares:\n", "mirror_hardwares:\nmirror_hardwares:\n", 1),
    )
    code, _out, err = run_named("upload-pipeline", repo)
    assert code == 1
    assert (
        f"error: invalid CI mirror_hardwares registry: {repo / rel} "
        "(duplicate key 'mirror_hardwares'"
    ) in err


# ---------------------------------------------------------------- 21: command types


def with_command(text: str, value: str) -> str:
    """The first step's commands replaced by `value` (a YAML flow value)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "commands:")
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    end = start + 1
    while end < len(lines) and lines[end].startswith(indent + "  "):
        end += 1
    field = "command" if value.startswith("{") else "commands"
    return "\n".join([*lines[:start], f"{indent}{field}: {value}", *lines[end:]]) + "\n"


@pytest.mark.parametrize(
    ("value", "field", "got"),
    [("{a: b}", "command", "a mapping"), ("5", "commands", "a number")],
)
@pytest.mark.parametrize("task", list(TASKS))
def test_a_command_that_is_no_shell_text_stops_every_task(
    sample: GitRepo, tmp_path: Path, task: str, value: str, field: str, got: str
) -> None:
    """`command: {a: b}` ran as the shell text "{'a': 'b'}" (tier, shellcheck-steps) or
    uploaded a job without test commands (AMD bootstrap); `commands: 5` ran as `5` or
    raised TypeError (bootstrap, plan)."""
    rel = TASKS[task][1]
    amd = rel == AMD
    repo = target(sample, tmp_path, rel, with_command((sample.path / rel).read_text(), value))
    code, out, err = run_named(task, repo)
    assert code == 1, (code, out, err)
    step = AMD_STEP if amd else CUDA_STEP
    message = f"step '{step}': `{field}` must be a string or a list of strings, got {got}"
    lines = [e for e in error_lines(out, err) if message in e]
    assert lines, err
    if task not in ("bootstrap", "plan"):  # the AMD suite loader does not pass the file on
        assert any(name in lines[0] for name in shown(repo, rel)), lines


def test_a_list_item_that_is_no_string_is_named() -> None:
    from ci.pipeline.commands import problems, step_commands

    step = {"label": "l", "key": "k", "commands": ["echo", None, {"x": 1}]}
    assert problems(step, "f.yml") == [
        "f.yml: step 'l' (key 'k'): `commands` item 2 must be a string, got null",
        "f.yml: step 'l' (key 'k'): `commands` item 3 must be a string, got a mapping",
    ]
    assert step_commands({"command": "a", "commands": ["b"]}) == ("a",)
    assert step_commands({"commands": ["a", "b"]}) == ("a", "b")
    assert step_commands({"label": "wait"}) == ()


def test_the_uploader_scans_commands_whenever_it_is_written() -> None:
    """The uploader read `step.get("commands", step.get("command"))`: a `commands` key wins
    even when it is null, and `command` counts only when `commands` is absent."""
    from ci.pipeline.commands import command_text

    assert command_text({"commands": None, "command": "pytest -m gpu"}) == ""
    assert command_text({"command": "pytest -m gpu"}) == "pytest -m gpu"
    assert command_text({"commands": ["a", None, "b"], "command": "x"}) == "a\nb"


# ------------------------------------------------- issue 32 item 11: huge integers

HUGE = "1" * 5_000  # past Python's 4,300-digit int-string limit


@pytest.mark.parametrize("task", list(TASKS))
def test_a_huge_integer_stops_every_task_with_one_line(
    sample: GitRepo, tmp_path: Path, task: str
) -> None:
    """A 5,000-digit YAML integer raised ValueError (int-string conversion limit) with a
    traceback in lint-pipelines, upload-pipeline, plan and shellcheck-steps."""
    rel = TASKS[task][1]
    repo = target(sample, tmp_path, rel, f"x-big: {HUGE}\n" + (sample.path / rel).read_text())
    code, out, err = run_named(task, repo)
    assert code == 1, (code, err)
    (line,) = [e for e in error_lines(out, err) if "a YAML integer of 5,000 characters" in e]
    assert "at line 1, column 8 (at most 1,000;" in line
    assert any(name in line for name in shown(repo, rel)), line


@pytest.mark.parametrize(
    "text",
    [
        f"a: {HUGE}",  # a value
        f"a: [1, {HUGE}]",  # an item
        HUGE,  # the whole document
        f"? {HUGE}\n: x\n? 1\n: y\n",  # a key (non-string keys are compared for duplicates)
        "a: 0x" + "f" * 4_000,  # hex builds, then fails wherever it is printed in decimal
        "a: !!int " + "9" * 1_001,
    ],
)
def test_a_huge_integer_is_refused_wherever_it_is_written(text: str) -> None:
    with pytest.raises(Failure) as caught:
        yamlio.loads(text, source="big.yml")
    (problem,) = caught.value.problems
    assert problem.startswith("big.yml: a YAML integer of ")
    assert caught.value.code == 1


def test_long_numbers_that_are_text_or_short_enough_still_load() -> None:
    assert yamlio.loads(f'a: "{HUGE}"')["a"] == HUGE
    assert yamlio.loads("a: " + "9" * 1_000)["a"] == int("9" * 1_000)
    assert yamlio.loads("a: 1." + "1" * 5_000)["a"] > 1  # a float has no digit limit


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a: 2001-13-45", "at line 1, column 4: cannot read '2001-13-45' as !!timestamp"),
        ("a: !!int abc", "at line 1, column 4: cannot read 'abc' as !!int"),
        ("a: !!int", "at line 1, column 4: cannot read '' as !!int"),
        ("a: !!bool maybe", "at line 1, column 4: cannot read 'maybe' as !!bool"),
        ("a: !!timestamp x", "at line 1, column 4: cannot read 'x' as !!timestamp"),
        ("a: !!float _", "at line 1, column 4: cannot read '_' as !!float"),
        ("{1: a, !!int x: b}", "at line 1, column 8: cannot read 'x' as !!int"),
    ],
)
def test_a_scalar_its_tag_cannot_build_is_one_located_line(text: str, where: str) -> None:
    """The same class as the huge integer: the constructors' ValueError, IndexError,
    KeyError and AttributeError escaped as tracebacks."""
    with pytest.raises(yamlio.InvalidYAML) as caught:
        yamlio.loads(text, source="t.yml")
    (problem,) = caught.value.problems
    assert problem.startswith(f"t.yml: invalid YAML {where}"), problem
    assert caught.value.code == 1  # as every other invalid YAML (was 2: an input error)


# --------------------------------------------- issue 32 item 12: parallelism, one bound


def with_parallelism(text: str, value: str) -> str:
    """The first step's `parallelism` set to `value` (added above its `commands:`)."""
    if "parallelism:" in text:
        return re.sub(r"parallelism: .*", f"parallelism: {value}", text, count=1)
    lines = text.splitlines()
    at = next(i for i, item in enumerate(lines) if item.strip() == "commands:")
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    return "\n".join([*lines[:at], f"{indent}parallelism: {value}", *lines[at:]]) + "\n"


@pytest.mark.parametrize("value", ["1000000000", "0"])
@pytest.mark.parametrize("task", list(TASKS))
def test_parallelism_out_of_range_stops_every_task(
    sample: GitRepo, tmp_path: Path, task: str, value: str
) -> None:
    """`parallelism: 1000000000` passed lint-pipelines, and a local tier planned a job per
    shard until it ran out of memory; every consumer now refuses it the same way."""
    rel = TASKS[task][1]
    text = with_parallelism((sample.path / rel).read_text(), value)
    repo = target(sample, tmp_path, rel, text)
    code, out, err = run_named(task, repo)
    assert code == 1, (code, out, err)
    step = AMD_STEP if rel == AMD else CUDA_STEP
    message = f"step '{step}': `parallelism` must be a whole number of jobs from 1 to 1000"
    assert [e for e in error_lines(out, err) if message in e], err
