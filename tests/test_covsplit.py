"""`cov-split` (was run_cov_split.sh): spec runners-and-tiers.md §3, golden scenarios G43-G54.

The planner is checked as data; the task runs for real through the CLI's entry, in
this process (tests/inproc.py), with real pytest and pytest-cov on a tiny tree and a
recording `buildkite-agent`. Only `inv` and the shim script run as processes.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from ci import covsplit
from ci.errors import UserError
from tests.conftest import ROOT, StandIns
from tests.inproc import Outcome, run_inproc
from tests.test_runner import minimal_path

SCRIPT_ENV = ("WEEKLY", "NIGHTLY", "BUILDKITE_BRANCH", "BUILDKITE_STEP_ID", "BUILDKITE")


def clean_env(base: dict[str, str], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in SCRIPT_ENV}
    env.update(extra)
    return env


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A model package and its offline/online tests, failing when COVSPLIT_FAIL names them."""
    root = tmp_path / "repo"
    (root / "vllm_omni").mkdir(parents=True)
    (root / "vllm_omni" / "__init__.py").write_text(
        "def offline():\n    return 'offline'\n\n\ndef online():\n    return 'online'\n"
    )
    tests = root / "tests"
    tests.mkdir()
    for mode in ("offline", "online"):
        (tests / f"test_{mode}.py").write_text(
            textwrap.dedent(
                f"""
                import os

                import pytest

                import vllm_omni


                def test_{mode}():
                    assert "{mode}" not in os.environ.get("COVSPLIT_FAIL", "")
                    assert vllm_omni.{mode}() == "{mode}"


                @pytest.mark.a
                @pytest.mark.b
                def test_{mode}_a_and_b():
                    pass
                """
            )
        )
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    a: a\n    b: b\n")
    return root


def env_for(standins: StandIns, tree: Path, **extra: str) -> dict[str, str]:
    env = clean_env(standins.env(), **extra)
    env["PYTHONPATH"] = str(tree)
    return env


# --------------------------------------------------------------------------- arguments

ARG_ERRORS = [
    # G43
    ((), "run_cov_split.sh: missing --model-id"),
    # G44
    (("--model-id", "m"), "run_cov_split.sh: need at least one of --offline / --online"),
    # G45
    (("--model-id", "m", "--offline", "a.py", "-m", "x"), "run_cov_split.sh: unknown argument: -m"),
    (("--model-id", "m", "stray"), "run_cov_split.sh: unknown argument: stray"),
    (("--offline", "a.py"), "run_cov_split.sh: missing --model-id"),
    # G46 (the script: "unbound variable", exit 1; see docs/differences.md)
    (("--model-id",), "run_cov_split.sh: --model-id needs a value"),
    (("--model-id", "m", "--offline"), "run_cov_split.sh: --offline needs a value"),
    (("--model-id", "m", "--online"), "run_cov_split.sh: --online needs a value"),
    (("--online",), "run_cov_split.sh: --online needs a value"),
    # The script takes the next word as the value, whatever it is.
    (("--model-id", "--offline", "a.py"), "run_cov_split.sh: unknown argument: a.py"),
]


@pytest.mark.parametrize(("args", "message"), ARG_ERRORS)
def test_argument_errors_exit_2_with_the_script_message(
    args: tuple[str, ...], message: str, standins: StandIns, tmp_path: Path
) -> None:
    standins.add("pytest")
    standins.add("buildkite-agent")
    done = run_inproc("cov-split", *args, env=clean_env(standins.env()), cwd=tmp_path)
    assert done.code == 2, done.stderr
    assert done.stderr == f"error: {message}\n"
    assert standins.calls() == []


@pytest.mark.parametrize("model_id", ["../../x;y", "..", ".", "a/b", "m x", "$(id)", "m*"])
def test_a_model_id_must_be_a_name(model_id: str, standins: StandIns, tmp_path: Path) -> None:
    """Issue 23 item 30c: `../../x;y` put report paths and `rm -f` outside the working dir."""
    for name in ("pytest", "gzip", "rm", "buildkite-agent"):
        standins.add(name)
    env = clean_env(standins.env(), WEEKLY="1", BUILDKITE_BRANCH="main")  # coverage: rm -f runs
    done = run_inproc(
        "cov-split", "--model-id", model_id, "--offline", "a.py", env=env, cwd=tmp_path
    )
    assert done.code == 2, done.stderr
    assert done.stderr == (
        f"error: --model-id: {model_id!r} is not a model name: "
        "use letters, digits, '.', '_' and '-' only, not '.' or '..'\n"
    )
    assert standins.calls() == []


def test_a_model_id_with_dots_dashes_and_underscores_is_fine(standins: StandIns) -> None:
    env = clean_env(standins.env(), WEEKLY="1", BUILDKITE_BRANCH="main")
    done = run_inproc(
        "cov-split", "--model-id", "Qwen2.5-Omni_7B", "--offline", "a", "--dry-run", env=env
    )
    assert done.code == 0, done.stderr
    assert "coverage-Qwen2.5-Omni_7B-offline-local.xml" in done.stdout


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--model-id",), "run_cov_split.sh: --model-id needs a value"),  # G46
        (
            ("--model-id", "m", "--offline", "a.py", "-m", "x"),
            "run_cov_split.sh: unknown argument: -m",
        ),
        (("--model-id", "m"), "run_cov_split.sh: need at least one of --offline / --online"),
    ],
    ids=["G46", "G45", "G44"],
)
def test_argument_errors_under_inv_too(
    args: tuple[str, ...], message: str, standins: StandIns
) -> None:
    """`inv cov-split` in the repo root: exit 2 and one `error:` line, not Invoke's 1. A word
    Invoke's parser refuses is said in Invoke's words; the task's own checks, in the script's."""
    standins.add("pytest")
    done = subprocess.run(
        ["inv", "cov-split", *args],
        cwd=ROOT,
        env=clean_env(standins.env()),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1
    if "need at least one" in message:
        assert done.stderr == f"error: {message}\n"
    assert standins.calls() == []


def test_help_states_the_gate_and_the_exit_rules() -> None:
    text = " ".join(run_inproc("cov-split", "--help").stdout.split())
    assert "Coverage only when WEEKLY=1 and BUILDKITE_BRANCH=main" in text
    assert "exit code is passed through (5 included)" in text
    assert "any failure exits 1" in text
    assert "--offline PATH" in text and "--online PATH" in text


def test_missing_pytest_says_so(tmp_path: Path) -> None:
    env = clean_env(dict(os.environ), PATH=minimal_path(tmp_path))
    done = run_inproc("cov-split", "--model-id", "m", "--offline", "a", env=env, cwd=tmp_path)
    assert done.code == 127
    assert "error: command not found: pytest" in done.stderr.splitlines()


def test_the_script_grammar_stops_at_dashdash() -> None:
    from ci.cli import parse_line

    def parse(*words: str) -> dict[str, object]:
        (call,) = parse_line(["cov-split", *words]).calls
        return call.task.arguments(call.values)

    assert parse("--model-id", "m", "--offline", "a", "--", "-m", "x")["offline"] == ["a"]
    assert parse("--model-id=m", "--online=a", "--dry-run") == {
        "model_id": "m", "offline": [], "online": ["a"], "dry_run": True,
    }  # fmt: skip
    with pytest.raises(UserError) as caught:
        parse("-m", "x")
    assert caught.value.problems == ("run_cov_split.sh: unknown argument: -m",)


# --------------------------------------------------------------------------- planner


def test_gate_needs_weekly_1_and_main() -> None:
    assert covsplit.coverage_gate({"WEEKLY": "1", "BUILDKITE_BRANCH": "main"})
    for env in (
        {"WEEKLY": "1", "BUILDKITE_BRANCH": "feat"},  # G53
        {"NIGHTLY": "1", "BUILDKITE_BRANCH": "main"},  # G53
        {"WEEKLY": "true", "BUILDKITE_BRANCH": "main"},
        {"BUILDKITE_BRANCH": "main"},
        {},
    ):
        assert not covsplit.coverage_gate(env), env


def test_plan_without_coverage_is_one_combined_pytest() -> None:
    request = covsplit.Request(
        "m",
        offline=("a", "a2"),
        online=("b",),
        pytest_args=("-m", "advanced_model and cuda", "--run-level", "advanced_model"),
    )
    plan = covsplit.make_plan(request, {"WEEKLY": "1", "BUILDKITE_BRANCH": "feat"}).plan()
    assert [c.argv for c in plan.commands] == [
        (
            "pytest",
            *("-s", "-v", "a", "a2", "b"),
            *("-m", "advanced_model and cuda", "--run-level", "advanced_model"),
        )
    ]
    assert plan.commands[0].description == "pytest (no coverage): m"


def test_plan_with_coverage_cleans_both_modes_and_runs_only_requested() -> None:
    request = covsplit.Request("m", online=("b",), pytest_args=("-x",))
    env = {"WEEKLY": "1", "BUILDKITE_BRANCH": "main", "BUILDKITE_STEP_ID": "abc"}
    assert [c.argv for c in covsplit.make_plan(request, env).plan().commands] == [
        (
            "rm",
            "-f",
            "coverage-m-offline-abc.xml",
            "coverage-m-online-abc.xml",
            "coverage-m-offline-abc.xml.gz",
            "coverage-m-online-abc.xml.gz",
        ),
        (
            *("pytest", "-s", "-v", "b", "-x"),
            *("--cov=vllm_omni", "--cov-report=xml:coverage-m-online-abc.xml"),
        ),
        ("gzip", "-9", "-f", "coverage-m-online-abc.xml"),
        ("buildkite-agent", "artifact", "upload", "coverage-m-*-abc.xml.gz"),
    ]


def test_plan_suffix_is_local_without_step_id() -> None:  # G54
    """The suffix names every file: those removed, written, compressed and uploaded.

    (The CLI's way from an environment without a step id to this plan is
    `test_a_model_id_with_dots_dashes_and_underscores_is_fine`; running a plan with
    coverage for real is `test_both_modes_write_gzip_and_upload_per_mode_reports`.)
    """
    request = covsplit.Request("m", offline=("a",))
    for env in (
        {"WEEKLY": "1", "BUILDKITE_BRANCH": "main"},
        {"WEEKLY": "1", "BUILDKITE_BRANCH": "main", "BUILDKITE_STEP_ID": ""},
    ):
        assert [c.argv for c in covsplit.make_plan(request, env).commands] == [
            (
                *("rm", "-f", "coverage-m-offline-local.xml", "coverage-m-online-local.xml"),
                *("coverage-m-offline-local.xml.gz", "coverage-m-online-local.xml.gz"),
            ),
            (
                *("pytest", "-s", "-v", "a"),
                *("--cov=vllm_omni", "--cov-report=xml:coverage-m-offline-local.xml"),
            ),
            ("gzip", "-9", "-f", "coverage-m-offline-local.xml"),
            ("buildkite-agent", "artifact", "upload", "coverage-m-*-local.xml.gz"),
        ]


def test_dry_run_prints_the_plan_and_runs_nothing(standins: StandIns, tmp_path: Path) -> None:
    standins.add("pytest")
    standins.add("buildkite-agent")
    env = clean_env(standins.env(), WEEKLY="1", BUILDKITE_BRANCH="main", BUILDKITE_STEP_ID="s")
    done = run_inproc(
        "cov-split", "--model-id", "m", "--offline", "a", "--dry-run", "--", "-m", "a and b",
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.code == 0, done.stderr
    assert "pytest -s -v a -m 'a and b' --cov=vllm_omni" in done.stdout
    assert "buildkite-agent artifact upload 'coverage-m-*-s.xml.gz'" in done.stdout
    assert standins.calls() == []


# --------------------------------------------------------------------------- gate closed


def test_gate_closed_forwards_args_with_quoting_intact(standins: StandIns, tmp_path: Path) -> None:
    """G47, with a stand-in to see the exact argv."""
    standins.add("pytest", "exit 0")
    done = run_inproc(
        "cov-split", "--model-id", "m", "--offline", "a", "--online", "b",
        "--", "-m", "advanced_model and cuda", "--run-level", "advanced_model",
        env=clean_env(standins.env()), cwd=tmp_path,
    )  # fmt: skip
    assert done.code == 0, done.stderr
    assert standins.argvs("pytest") == [
        ["-s", "-v", "a", "b", "-m", "advanced_model and cuda", "--run-level", "advanced_model"]
    ]
    assert "pytest (no coverage): m" in done.stderr


@pytest.mark.parametrize(
    ("fail", "pytest_args", "code"),
    [
        ("", ["-m", "a and b"], 0),  # only the two a-and-b tests run: one argument
        ("offline", [], 1),
        ("", ["-m", "nothing_matches"], 5),  # G48: 5 passes through exactly
    ],
)
def test_gate_closed_real_pytest_exit_code_passes_through(
    tree: Path, standins: StandIns, fail: str, pytest_args: list[str], code: int
) -> None:
    standins.add("buildkite-agent")
    env = env_for(standins, tree, COVSPLIT_FAIL=fail, WEEKLY="1", BUILDKITE_BRANCH="feat")
    done = run_inproc(
        "cov-split", "--model-id", "m", "--offline", "tests/test_offline.py",
        "--online", "tests/test_online.py", "--", *pytest_args,
        env=env, cwd=tree,
    )  # fmt: skip
    assert done.code == code, done.stderr
    if pytest_args[:2] == ["-m", "a and b"]:
        assert "2 passed, 2 deselected" in done.stderr
    assert not list(tree.glob("coverage-*"))
    assert standins.calls() == []


# --------------------------------------------------------------------------- gate open


def coverage_xml(path: Path) -> str:
    with gzip.open(path, "rt") as fh:
        return fh.read()


GATE = {"WEEKLY": "1", "BUILDKITE_BRANCH": "main", "BUILDKITE_STEP_ID": "abc"}
# The stand-in agent lists what its glob matches, so the test sees what would be uploaded.
LIST_UPLOAD = 'for f in $4; do echo "uploading $f"; done; ls $4 >/dev/null'


def run_both(tree: Path, env: dict[str, str], *extra: str) -> Outcome:
    return run_inproc(
        "cov-split", "--model-id", "m", "--offline", "tests/test_offline.py",
        "--online", "tests/test_online.py", "--", "-m", "a or not a", *extra,
        env=env, cwd=tree,
    )  # fmt: skip


def test_both_modes_write_gzip_and_upload_per_mode_reports(tree: Path, standins: StandIns) -> None:
    """G49."""
    standins.add("buildkite-agent", LIST_UPLOAD)
    done = run_both(tree, env_for(standins, tree, **GATE))
    assert done.code == 0, done.stderr
    assert sorted(p.name for p in tree.glob("coverage-*")) == [
        "coverage-m-offline-abc.xml.gz",
        "coverage-m-online-abc.xml.gz",
    ]
    offline = coverage_xml(tree / "coverage-m-offline-abc.xml.gz")
    assert "<coverage" in offline and "vllm_omni" in offline
    assert standins.argvs("buildkite-agent") == [["artifact", "upload", "coverage-m-*-abc.xml.gz"]]
    assert "coverage: m offline" in done.stderr
    assert "coverage: m online" in done.stderr


def test_stale_report_of_a_mode_not_run_is_removed(tree: Path, standins: StandIns) -> None:
    standins.add("buildkite-agent", LIST_UPLOAD)
    (tree / "coverage-m-online-abc.xml.gz").write_bytes(b"stale")
    (tree / "coverage-m-online-abc.xml").write_text("stale")
    done = run_inproc(
        "cov-split", "--model-id", "m", "--offline", "tests/test_offline.py",
        env=env_for(standins, tree, **GATE), cwd=tree,
    )  # fmt: skip
    assert done.code == 0, done.stderr
    assert sorted(p.name for p in tree.glob("coverage-*")) == ["coverage-m-offline-abc.xml.gz"]


@pytest.mark.parametrize(
    ("fail", "extra"),
    [
        ("offline", ()),  # a failing half
        ("", ("--deselect", "tests/test_offline.py::test_offline", "-k", "online")),  # G50: 5
    ],
)
def test_a_failing_half_gives_1_and_the_other_half_still_runs(
    tree: Path, standins: StandIns, fail: str, extra: tuple[str, ...]
) -> None:
    standins.add("buildkite-agent", LIST_UPLOAD)
    done = run_both(tree, env_for(standins, tree, COVSPLIT_FAIL=fail, **GATE), *extra)
    assert done.code == 1, done.stderr
    assert (tree / "coverage-m-online-abc.xml.gz").is_file()
    assert "offline half failed" in done.stderr
    assert standins.argvs("buildkite-agent") == [["artifact", "upload", "coverage-m-*-abc.xml.gz"]]


def test_missing_report_fails_its_half_through_gzip(tree: Path, standins: StandIns) -> None:
    """G51: pytest-cov disabled, so no report is written and gzip fails."""
    standins.add("buildkite-agent")
    env = env_for(standins, tree, **GATE)
    env["PYTEST_ADDOPTS"] = "--no-cov"
    done = run_inproc(
        "cov-split", "--model-id", "m", "--online", "tests/test_online.py",
        env=env, cwd=tree,
    )  # fmt: skip
    assert done.code == 1, done.stderr
    assert "online half failed (pytest exit 0, gzip exit 1)" in done.stderr


def test_failing_upload_gives_1(tree: Path, standins: StandIns) -> None:
    """G52."""
    standins.add("buildkite-agent", "exit 7")
    done = run_both(tree, env_for(standins, tree, **GATE))
    assert done.code == 1, done.stderr
    assert "artifact upload failed" in done.stderr


@pytest.mark.process
def test_shim_script_keeps_the_old_command_line(standins: StandIns, tmp_path: Path) -> None:
    standins.add("pytest", "exit 5")
    shim = Path(__file__).resolve().parents[1] / "scripts" / "common" / "run_cov_split.sh"
    done = subprocess.run(
        [str(shim), "--model-id", "m", "--online", "b", "--", "-m", "a and b"],
        env=clean_env(standins.env()),
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 5, done.stderr
    assert standins.argvs("pytest") == [["-s", "-v", "b", "-m", "a and b"]]


def test_the_printed_plan_masks_a_secrets_value_in_its_title(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`cov-split --model-id X -n` printed `# plan: cov-split X` in clear (issue 32, item 4)."""
    secret = "s3cr3t-model"
    monkeypatch.setenv("HF_TOKEN", secret)
    request = covsplit.Request(secret, offline=("a",))
    text = covsplit.make_plan(request, {}).plan().render()
    assert secret not in text
    assert text.startswith("# plan: cov-split [REDACTED]\n")
