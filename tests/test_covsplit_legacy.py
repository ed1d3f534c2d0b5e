"""The original run_cov_split.sh, run next to `cov-split` on the same inputs.

The seed holds the script whole (tests/seeds.py rebuilds it at test time). Both
run against the same recording stand-ins: a `pytest` that writes the report
named by `--cov-report=xml:FILE` and exits with the code the test asks for per
half, and a `buildkite-agent`; `gzip` and `rm` are real. For every scenario the
exit code, the pytest and agent argv and the files left behind must match; the
only difference is G46 (docs/differences.md "A flag without its value is a
usage error (exit 2)").
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from tests.conftest import StandIns
from tests.inproc import run_task
from tests.seeds import RUN_COV_SPLIT, write_script
from tests.test_covsplit import ARG_ERRORS, clean_env

# Exit code per half from PYTEST_OFF / PYTEST_ON (the paths are off.py / on.py);
# NO_REPORT=1 leaves the coverage report unwritten (G51).
FAKE_PYTEST = """\
code=0
report=""
for a in "$@"; do
    case "$a" in
        --cov-report=xml:*) report="${a#--cov-report=xml:}" ;;
        off.py) code="${PYTEST_OFF:-0}" ;;
        on.py) if [ "$code" = 0 ]; then code="${PYTEST_ON:-0}"; fi ;;
    esac
done
if [ -n "$report" ] && [ -z "${NO_REPORT:-}" ]; then echo '<coverage/>' > "$report"; fi
exit "$code"
"""


@pytest.fixture(scope="module")
def legacy_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_script(RUN_COV_SPLIT, tmp_path_factory.mktemp("legacy") / "run_cov_split.sh")


@pytest.fixture
def fakes(standins: StandIns) -> StandIns:
    standins.add("pytest", FAKE_PYTEST)
    standins.add("buildkite-agent", 'ls $4 >/dev/null 2>&1 || exit 1; exit "${AGENT_EXIT:-0}"')
    return standins


def outcome(
    done: subprocess.CompletedProcess[str], standins: StandIns, cwd: Path
) -> tuple[int, list[list[str]], list[list[str]], list[str]]:
    result = (
        done.returncode,
        standins.argvs("pytest"),
        standins.argvs("buildkite-agent"),
        sorted(p.name for p in cwd.iterdir()),
    )
    standins.log.unlink(missing_ok=True)
    return result


def both(
    legacy_script: Path,
    standins: StandIns,
    tmp_path: Path,
    args: Sequence[str],
    env: Mapping[str, str],
    stale: Sequence[str] = (),
) -> tuple[tuple[object, ...], tuple[object, ...], str, str]:
    """Run the original, then ours, each in a fresh directory; return both outcomes."""
    results = []
    errs = []
    for name in ("old", "new"):
        cwd = tmp_path / name
        shutil.rmtree(cwd, ignore_errors=True)
        cwd.mkdir()
        for file in stale:
            (cwd / file).write_text("stale")
        full = clean_env(standins.env(), **env)
        if name == "old":
            done = subprocess.run(
                ["/bin/bash", str(legacy_script), *args],
                env=full,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=120,
            )
        else:
            done = run_task("cov-split", *args, env=full, cwd=cwd)
        results.append(outcome(done, standins, cwd))
        errs.append(done.stderr)
    return results[0], results[1], errs[0], errs[1]


GATE = {"WEEKLY": "1", "BUILDKITE_BRANCH": "main", "BUILDKITE_STEP_ID": "abc"}
BOTH = ("--model-id", "m", "--offline", "off.py", "--online", "on.py")
FORWARD = ("--", "-m", "advanced_model and cuda", "--run-level", "advanced_model")

SCENARIOS = [
    ("G47", BOTH + FORWARD, {}),
    ("G47-fails", BOTH + FORWARD, {"PYTEST_OFF": "1"}),
    ("G48", BOTH + FORWARD, {"PYTEST_OFF": "5"}),
    ("G49", BOTH + FORWARD, GATE),
    ("G50", BOTH + FORWARD, {**GATE, "PYTEST_OFF": "5"}),
    ("G50-online", BOTH + FORWARD, {**GATE, "PYTEST_ON": "2"}),
    ("G51", BOTH, {**GATE, "NO_REPORT": "1"}),
    ("G52", BOTH, {**GATE, "AGENT_EXIT": "7"}),
    ("G53-branch", BOTH, {"WEEKLY": "1", "BUILDKITE_BRANCH": "feat"}),
    ("G53-nightly", BOTH, {"NIGHTLY": "1", "BUILDKITE_BRANCH": "main"}),
    ("G53-weekly-true", BOTH, {"WEEKLY": "true", "BUILDKITE_BRANCH": "main"}),
    ("G54", BOTH, {"WEEKLY": "1", "BUILDKITE_BRANCH": "main"}),
    ("online-only", ("--model-id", "m", "--online", "on.py", "--", "-x"), GATE),
    ("offline-twice", ("--model-id", "m", "--offline", "off.py", "--offline", "b.py"), GATE),
    ("no-args-after-dashdash", (*BOTH, "--"), {}),
    ("model-id-twice", ("--model-id", "x", *BOTH), GATE),  # the last one wins
]


@pytest.mark.parametrize(("args", "env"), [s[1:] for s in SCENARIOS], ids=[s[0] for s in SCENARIOS])
def test_same_as_the_original(
    args: tuple[str, ...],
    env: dict[str, str],
    legacy_script: Path,
    fakes: StandIns,
    tmp_path: Path,
) -> None:
    """Exit code, pytest argv (quoting intact), upload argv and the files left: all the same."""
    stale = [
        f"coverage-m-{mode}-abc.xml{gz}" for mode in ("offline", "online") for gz in ("", ".gz")
    ]
    old, new, _, _ = both(legacy_script, fakes, tmp_path, args, env, stale=stale)
    assert old[1], old  # pytest ran: the comparison is not between two empty runs
    assert new == old


@pytest.mark.parametrize(("args", "message"), ARG_ERRORS, ids=[" ".join(a) for a, _ in ARG_ERRORS])
def test_argument_errors_same_as_the_original(
    args: tuple[str, ...], message: str, legacy_script: Path, fakes: StandIns, tmp_path: Path
) -> None:
    old, new, old_err, new_err = both(legacy_script, fakes, tmp_path, args, {})
    assert new[1:] == old[1:] == ([], [], [])  # nothing ran
    assert new[0] == 2
    assert new_err == f"error: {message}\n"
    if message.endswith("needs a value"):
        # G46: the original died on `set -u` (exit 1); ours is a usage error.
        assert old[0] == 1
        assert "unbound variable" in old_err
    else:
        assert old[0] == 2
        assert old_err == f"{message}\n"
