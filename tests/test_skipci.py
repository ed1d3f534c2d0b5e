"""skip-ci (spec §2, golden rows S1-S25) against real git repositories with real commits.

Each S row is checked twice where the spec allows: the pure decision over the
path list without a diff range (as the spec's rows are written), and the same
change committed on a PR branch and resolved through git (`decision(repo)`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ci import skipci, topology
from ci.diff import WORKTREE, resolve_diff
from ci.errors import UserError
from ci.platforms import Platform
from ci.skipci import Decision, decide, decision, decision_for
from tests.gitrepo import GitRepo, buildkite_env, copy_repo
from tests.inproc import run_task

ALL = {(p, lvl) for p in skipci.PLATFORMS for lvl in skipci.LEVELS}

BASE_FILES = {
    "README.md": "readme\n",
    "mkdocs.yml": "site_name: x\n",
    "docs/foo.md": "foo\n",
    "docs/a.md": "a\n",
    "vllm_omni/foo.py": "x = 1\n",
    "tests/foo/test_bar.py": "def test_bar():\n    assert 1 == 1\n",
    ".buildkite/cuda/pipeline.yml": "steps: []\n",
    **{row.file: "steps: []\n" for row in topology.TABLE},
}


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    skipci.clear_cache()
    yield
    skipci.clear_cache()


# Built repositories by their base files, in a folder of the module's (`_templates`):
# each base is committed and pushed once, and every test gets its own copy.
_TEMPLATES: dict[tuple[tuple[str, str], ...], GitRepo] = {}
_TEMPLATE_FOLDER: list[Path] = []


@pytest.fixture(scope="module", autouse=True)
def _templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    _TEMPLATE_FOLDER[:] = [tmp_path_factory.mktemp("skipci-templates")]
    yield
    _TEMPLATES.clear()


def make_repo(tmp_path: Path, base: dict[str, str] | None = None) -> GitRepo:
    """main with BASE_FILES (or `base`) pushed to a real origin, then branch `pr` checked out:
    a copy of the template for those files, built on first use."""
    files = base or BASE_FILES
    key = tuple(sorted(files.items()))
    if key not in _TEMPLATES:
        folder = _TEMPLATE_FOLDER[0] / str(len(_TEMPLATES))
        template = GitRepo.create(folder / "repo")
        template.commit_files(files, "base")
        template.push("main")
        template.branch("pr")
        _TEMPLATES[key] = template
    return copy_repo(_TEMPLATES[key], tmp_path)


def pr_env(repo: GitRepo, **extra: str) -> dict[str, str]:
    return buildkite_env(
        BUILDKITE_PULL_REQUEST="42", BUILDKITE_BRANCH="pr", BUILDKITE_COMMIT=repo.sha(), **extra
    )


def touch(repo: GitRepo, paths: list[str]) -> str:
    for path in paths:
        old = (repo.path / path).read_text() if (repo.path / path).exists() else ""
        repo.write(path, old + "# changed\n" if path.endswith(".py") else old + "changed\n")
    return repo.commit("pr change")


# --------------------------------------------------------------------------- S1-S16


@dataclass(frozen=True)
class Row:
    files: list[str] | None
    kind: str  # skip_all | normal | yaml
    runs: frozenset[tuple[str, str]] = frozenset()
    message: str = ""  # exact, or a prefix when it ends with "…"


def on(*pairs: str) -> frozenset[tuple[str, str]]:
    """`on("cuda/l2")` → {("cuda", "l2")}."""
    return frozenset((p.split("/")[0], p.split("/")[1]) for p in pairs)


S3_MESSAGE = (
    "only CI config YAML changed — changed: L2=[.buildkite/cuda/test-ready.yml]; run: cuda/l2; "
    "skip: cuda/l3, amd/l2, amd/l3, intel/l2, intel/l3, npu/l2, npu/l3"
)

ROWS: dict[str, Row] = {
    "S1": Row(
        ["docs/foo.md", "README.md", "mkdocs.yml"],
        "skip_all",
        message="CI skipped — docs or pytest skip-mark changes only",
    ),
    "S2": Row(["docs/foo.md", "vllm_omni/foo.py"], "normal"),
    "S3": Row([".buildkite/cuda/test-ready.yml"], "yaml", on("cuda/l2"), S3_MESSAGE),
    "S4": Row(
        [".buildkite/cuda/test-ready.yml", ".buildkite/amd/test-amd-merge.yml"],
        "yaml",
        on("cuda/l2", "amd/l3"),
    ),
    "S5": Row(
        [".buildkite/cuda/test-ready.yml", ".buildkite/cuda/test-merge.yml"],
        "yaml",
        on("cuda/l2", "cuda/l3"),
    ),
    "S6": Row([".buildkite/cuda/test-nightly.yml"], "yaml"),
    "S7": Row([".buildkite/amd/test-amd-nightly.yml"], "yaml"),
    "S8": Row(
        [".buildkite/cuda/test-ready.yml", ".buildkite/cuda/test-nightly.yml"],
        "yaml",
        on("cuda/l2"),
    ),
    "S9": Row(
        [".buildkite/cuda/test-merge.yml", ".buildkite/npu/test-npu-nightly.yml"],
        "yaml",
        on("cuda/l3"),
    ),
    "S10": Row([".buildkite/intel/pipeline-intel.yml"], "yaml", on("intel/l2")),
    "S11": Row([".buildkite/cuda/test-ready.yml", ".buildkite/cuda/pipeline.yml"], "normal"),
    "S12": Row(
        ["docs/a.md", ".buildkite/cuda/test-ready.yml"],
        "yaml",
        on("cuda/l2"),
        "CI config YAML + docs/skip-mark changed — follow CI YAML gating; …",
    ),
    "S13": Row(["docs/a.md", ".buildkite/cuda/test-nightly.yml"], "yaml"),
    # S14: the spec's decision (normal CI), said as it is (docs/differences.md).
    "S14": Row([], "normal", message="no changed files in the diff; run normal CI"),
    "S15": Row(None, "normal", message="could not resolve changed files; run normal CI"),
    "S16": Row(["tests/foo/test_bar.py"], "normal"),
}


def check(row: Row, got: Decision) -> None:
    assert got.skip_all == (row.kind == "skip_all")
    assert got.yaml_gated == (row.kind == "yaml")
    if row.kind == "yaml":
        assert got.runs == row.runs
        for platform, level in ALL:
            expected = (platform, level) in row.runs
            assert got.is_run(platform, level) is expected
            assert got.gate(platform, level) == (None if expected else "skip-l23")
    elif row.kind == "skip_all":
        assert all(got.gate(p, lvl) == "skip-all" for p, lvl in ALL)
        assert not any(got.is_run(p, lvl) for p, lvl in ALL)
    else:
        assert got.normal
        assert all(got.is_run(p, lvl) and got.gate(p, lvl) is None for p, lvl in ALL)
    if row.message.endswith("…"):
        assert got.message.startswith(row.message[:-1])
    elif row.message:
        assert got.message == row.message
    elif row.kind == "normal":
        assert got.message == skipci.MSG_NORMAL


@pytest.mark.parametrize("name", list(ROWS))
def test_golden_rows_on_the_path_list(name: str) -> None:
    row = ROWS[name]
    check(row, decide(row.files))


@pytest.mark.parametrize("name", list(ROWS))
def test_golden_rows_through_real_git(name: str, tmp_path: Path) -> None:
    row = ROWS[name]
    repo = make_repo(tmp_path)
    if row.files is None:  # S15: a build with no range (not a PR, not main)
        touch(repo, ["vllm_omni/foo.py"])
        env = buildkite_env(BUILDKITE_PULL_REQUEST="false", BUILDKITE_BRANCH="pr")
    else:
        touch(repo, row.files)  # S14: an empty commit
        env = pr_env(repo)
    made = decision(repo.path, env=env)
    check(row, made)
    bucketed = [path for group in vars(made.buckets).values() for path in group]
    assert sorted(bucketed) == sorted(row.files or [])


@pytest.mark.parametrize("row", ["S21", "S22", "S23"])
def test_golden_range_rows(row: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """S21-S23: the range comes from the Buildkite env (spec §2.6), resolved by real git."""
    repo = make_repo(tmp_path)
    if row == "S22":
        repo.git("checkout", "-q", "main")
    commit = touch(repo, ["vllm_omni/foo.py"])
    env = {
        "S21": buildkite_env(BUILDKITE_PULL_REQUEST="7", BUILDKITE_COMMIT=commit),
        "S22": buildkite_env(
            BUILDKITE_PULL_REQUEST="false", BUILDKITE_BRANCH="main", BUILDKITE_COMMIT=commit
        ),
        "S23": buildkite_env(BUILDKITE_PULL_REQUEST="false", BUILDKITE_BRANCH="feature"),
    }[row]
    got = resolve_diff(repo.path, env=env)
    expected = {"S21": f"origin/main...{commit}", "S22": f"{commit}^..{commit}", "S23": None}
    assert got.range == expected[row]
    made = decision_for(got)
    assert made.normal
    if row == "S23":
        assert got.paths is None and made.message == skipci.MSG_UNKNOWN
        assert "[diff]: not PR/main build; using safe defaults" in capfd.readouterr().err
    else:
        assert got.paths == ("vllm_omni/foo.py",) and made.message == skipci.MSG_NORMAL


def test_yaml_gated_intel_and_npu_l3_never_run() -> None:
    every = [row.file for row in topology.TABLE]
    got = decide(every)
    assert got.runs == ALL - {("intel", "l3"), ("npu", "l3")}
    assert got.message == (
        "only CI config YAML changed — changed: L2=[.buildkite/amd/test-amd-ready.yml, "
        ".buildkite/cuda/test-ready.yml, .buildkite/intel/pipeline-intel.yml, "
        ".buildkite/npu/test-npu-ready.yml]; L3=[.buildkite/amd/test-amd-merge.yml, "
        ".buildkite/cuda/test-merge.yml]; L4/L5=[.buildkite/amd/test-amd-nightly.yml, "
        ".buildkite/cuda/test-nightly.yml, .buildkite/cuda/test-weekly.yml, "
        ".buildkite/npu/test-npu-nightly.yml]; run: cuda/l2, cuda/l3, amd/l2, amd/l3, "
        "intel/l2, npu/l2; skip: intel/l3, npu/l3"
    )


def test_l45_only_message_runs_none() -> None:
    got = decide([".buildkite/cuda/test-weekly.yml"])
    assert got.message.endswith(
        "changed: L4/L5=[.buildkite/cuda/test-weekly.yml]; run: none; "
        "skip: cuda/l2, cuda/l3, amd/l2, amd/l3, intel/l2, intel/l3, "
        "npu/l2, npu/l3"
    )


@pytest.mark.parametrize(
    ("path", "bucket"),
    [
        ("docs/x.py", "docs"),
        ("tests/README.md", "docs"),
        ("a/b/c.md", "docs"),
        ("mkdocs.yml", "docs"),
        ("sub/mkdocs.yml", "other"),
        ("tests.py", "other"),
        ("tests/data.json", "other"),
        ("ci_mirror_hardwares.yml", "other"),
        (".buildkite/common/scripts/skip_ci.py", "other"),
        (".buildkite/cuda/test-ready.yml", "l2"),
        (".buildkite/amd/test-amd-merge.yml", "l3"),
        (".buildkite/npu/test-npu-nightly.yml", "l45"),
    ],
)
def test_buckets(path: str, bucket: str) -> None:
    buckets, _ = skipci.classify([path, "  ", ""])
    found = {k: v for k, v in vars(buckets).items() if v}
    assert found == {bucket: (path,)}


# --------------------------------------------------------------------------- S17-S20: skip marks

TEST_FILE = "import pytest\n\n\ndef test_a():\n    assert 1 == 1\n"
SKIPPED = 'import pytest\n\n\n@pytest.mark.skip(reason="{r}")\ndef test_a():\n    assert 1 == 1\n'
# S17 as written: the decorator and a blank line are the only added lines.
S17_AFTER = (
    'import pytest\n\n\n@pytest.mark.skip(reason="temp")\n\ndef test_a():\n    assert 1 == 1\n'
)


def skip_verdict(tmp_path: Path, before: str | None, after: str | None) -> tuple[bool, Decision]:
    """Commit `before` on main and `after` on the PR; is tests/test_m.py skip-mark-only?"""
    base = {"README.md": "r\n"} | ({"tests/test_m.py": before} if before is not None else {})
    repo = make_repo(tmp_path, base)
    if after is None:
        repo.remove("tests/test_m.py")
    else:
        repo.write("tests/test_m.py", after)
    repo.commit("pr")
    got = decision(repo.path, env=pr_env(repo))
    verdict = "tests/test_m.py" in got.buckets.skip_tests
    assert verdict == ("tests/test_m.py" not in got.buckets.other)
    return verdict, got


@pytest.mark.parametrize(
    ("name", "before", "after", "expected"),
    [
        ("S17 add a skip and a blank line", TEST_FILE, S17_AFTER, True),
        ("S17 add a skip", TEST_FILE, SKIPPED.format(r="temp"), True),
        ("S18 remove a skip", SKIPPED.format(r="temp"), TEST_FILE, False),
        ("S19 change the reason", SKIPPED.format(r="old"), SKIPPED.format(r="new"), True),
        ("S20 change an assert", TEST_FILE, TEST_FILE.replace("1 == 1", "1 == 2"), False),
        (
            "multi-line skipif, continuation lines absorbed",
            TEST_FILE,
            TEST_FILE.replace(
                "def test_a",
                "@pytest.mark.skipif(\n    True,\n    reason='x',\n)\ndef test_a",
            ),
            True,
        ),
        (
            "pytest.skip( call",
            TEST_FILE,
            TEST_FILE.replace("assert", "pytest.skip('x')\n    assert"),
            True,
        ),
        (
            "skip plus another mark and a comment",
            TEST_FILE,
            TEST_FILE.replace(
                "def test_a", "# flaky\n@pytest.mark.skip\n@pytest.mark.cuda\ndef test_a"
            ),
            True,
        ),
        ("skip plus code", TEST_FILE, SKIPPED.format(r="x") + "X = 1\n", False),
        ("deleting a test file", TEST_FILE, None, False),
        (
            "existing file gets a one-line pytestmark",
            TEST_FILE,
            TEST_FILE.replace("\n\n\n", '\n\npytestmark = [pytest.mark.skip(reason="x")]\n\n', 1),
            True,
        ),
    ],
)
def test_skip_mark_only_through_git(
    name: str, before: str, after: str | None, expected: bool, tmp_path: Path
) -> None:
    verdict, got = skip_verdict(tmp_path, before, after)
    assert verdict is expected
    # README is unchanged, so the test file alone decides skip-all vs normal.
    assert got.skip_all is expected


NEW_HEAD = "import pytest\n\n"
NEW_TAIL = "\n\ndef test_new():\n    assert compute() == 3\n"


@pytest.mark.parametrize(
    ("name", "marks", "expected"),
    [
        ("one-line list", 'pytestmark = [pytest.mark.skip(reason="wip")]', True),
        (
            "multi-line list",
            "pytestmark = [\n    pytest.mark.cuda,\n    pytest.mark.skip,\n]",
            True,
        ),
        ("direct", 'pytestmark = pytest.mark.skip(reason="wip")', True),
        ("direct skipif (kept quirk)", "pytestmark = pytest.mark.skipif(True, reason='x')", True),
        ("annotated", "pytestmark: list = [pytest.mark.skip]", True),
        ("list without skip", "pytestmark = [pytest.mark.cuda]", False),
        ("none", "", False),
        ("inside a function", "def f():\n    pytestmark = pytest.mark.skip", False),
        ("tuple is not a list", "pytestmark = (pytest.mark.skip,)", False),
    ],
)
def test_new_test_files(
    name: str, marks: str, expected: bool, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    verdict, _ = skip_verdict(tmp_path, None, NEW_HEAD + marks + NEW_TAIL)
    assert verdict is expected
    note = "[skip-ci]: skip-mark-only: new test file without module-level pytest.mark.skip: "
    assert (note + "tests/test_m.py" in capfd.readouterr().err) is not expected


def test_without_a_range_a_skip_only_edit_is_product_code(tmp_path: Path) -> None:
    """S16 with git: the same edit counts as skip-only with a range, as product without."""
    repo = make_repo(tmp_path, {"tests/test_m.py": TEST_FILE})
    repo.write("tests/test_m.py", SKIPPED.format(r="t"))
    repo.commit("pr")
    with_range = decision(repo.path, env=pr_env(repo))
    assert with_range.skip_all
    skipci.clear_cache()
    no_range = decision(repo.path, env=buildkite_env(BUILDKITE_BRANCH="pr"))
    assert no_range.normal and no_range.message == skipci.MSG_UNKNOWN
    assert decide(["tests/test_m.py"]).normal


def test_an_empty_per_file_diff_is_not_skip_only(tmp_path: Path) -> None:
    """Mode-only change: listed by --name-only, but the patch has no hunk."""
    repo = make_repo(tmp_path, {"tests/test_m.py": TEST_FILE})
    (repo.path / "tests/test_m.py").chmod(0o755)
    repo.commit("chmod")
    got = decision(repo.path, env=pr_env(repo))
    assert got.buckets.other == ("tests/test_m.py",)


def test_worktree_skip_only_edit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {"tests/test_m.py": TEST_FILE, "docs/a.md": "a\n"})
    repo.write("tests/test_m.py", SKIPPED.format(r="local"))
    repo.write("docs/a.md", "b\n")
    got = decision_for(resolve_diff(repo.path, "main", WORKTREE, env=buildkite_env()))
    assert got.skip_all
    assert got.buckets.skip_tests == ("tests/test_m.py",)


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ("@@ -1 +1 @@\n+@pytest.mark.skip(\n+    reason=(\n@@ -9 +9 @@\n+x = 1\n", False),
        ("@@ -1 +1 @@\n+@pytest.mark.skip(\n+    reason=(\n+        'a'\n+    ))\n+[\n", True),
        ("@@ -1 +1 @@\n-@pytest.mark.skip\n", False),
        ("", False),
        ("@@ -1 +1 @@\n+pytestmark = [\n+    pytest.mark.skip,\n+]\n", True),
        ("@@ -1 +1 @@\n+pytestmark = [\n+    pytest.mark.skip,\n+],\n", False),
        # Kept quirks: a removed "-- x" line reads as a "---" header; a mark after code counts.
        ("@@ -1 +1 @@\n+@pytest.mark.skip\n--- x = 1\n", True),
        ("@@ -1 +1 @@\n+x = 1  # pytest.skip(\n", True),
    ],
)
def test_scanner_rules(patch: str, expected: bool) -> None:
    """Hunk headers reset the pending depth; only `[`/`]` alone are neutral."""
    assert skipci.patch_is_skip_mark_only(patch) is expected


# --------------------------------------------------------------------------- is_run / API


def test_is_run_accepts_both_platform_spellings() -> None:
    got = decide([".buildkite/amd/test-amd-ready.yml", ".buildkite/intel/pipeline-intel.yml"])
    assert got.is_run("rocm", "l2") and got.is_run("amd", "l2") and got.is_run(Platform.ROCM, "l2")
    assert got.is_run("xpu", "l2") and got.is_run("intel", "l2")
    assert not got.is_run("cuda", "l2") and not got.is_run("amd", "l3")
    assert got.is_run("cuda", "l4")  # nightly and beyond are never yaml-gated
    with pytest.raises(UserError):
        got.is_run("foo", "l2")


def test_as_dict_for_json_output() -> None:
    assert decide(ROWS["S4"].files).as_dict() == {
        "mode": "yaml-gated",
        "message": decide(ROWS["S4"].files).message,
        "run": ["cuda/l2", "amd/l3"],
        "buckets": {
            "l2": [".buildkite/cuda/test-ready.yml"],
            "l3": [".buildkite/amd/test-amd-merge.yml"],
        },
    }
    assert decide(["docs/a.md"]).as_dict()["run"] == []
    assert decide(None).as_dict() == {
        "mode": "normal",
        "message": skipci.MSG_UNKNOWN,
        "run": [
            "cuda/l2",
            "cuda/l3",
            "amd/l2",
            "amd/l3",
            "intel/l2",
            "intel/l3",
            "npu/l2",
            "npu/l3",
        ],
        "buckets": {},
    }
    assert decide([".buildkite/cuda/test-nightly.yml"]).as_dict()["run"] == []


def test_skip_all_also_stops_other_levels() -> None:
    assert not decide(["docs/a.md"]).is_run("amd", "l4")


def test_decision_is_computed_and_logged_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path)
    touch(repo, ["docs/a.md"])
    env = pr_env(repo)
    first = decision(repo.path, env=env)
    assert decision(repo.path, env=env) is first
    assert decision_for(resolve_diff(repo.path, env=env)) is first
    err = capfd.readouterr().err
    assert err.count("[skip-ci]: CI skipped — docs or pytest skip-mark changes only") == 1


# --------------------------------------------------------------------------- CLI


def cli(repo: GitRepo, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    done = run_task("skip-ci", *args, env=env, cwd=repo.path)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    ("files", "platform", "level", "code", "word"),
    [
        (ROWS["S1"].files, "cuda", "l2", 0, "skip-all"),
        (ROWS["S1"].files, "rocm", "l3", 0, "skip-all"),
        (ROWS["S2"].files, "cuda", "l2", 1, ""),
        (ROWS["S3"].files, "cuda", "l3", 0, "skip-l23"),
        (ROWS["S3"].files, "cuda", "l2", 1, ""),
        (ROWS["S10"].files, "xpu", "l2", 1, ""),
        (ROWS["S10"].files, "intel", "l3", 0, "skip-l23"),
    ],
    ids=["S1-cuda-l2", "S1-rocm-l3", "S2", "S3-cuda-l3", "S3-cuda-l2", "S10-xpu-l2", "S10-l3"],
)
def test_cli_gate(
    files: list[str], platform: str, level: str, code: int, word: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path)
    touch(repo, files)
    rc, out, err = cli(repo, pr_env(repo), "--platform", platform, "--level", level)
    assert (rc, out) == (code, f"{word}\n" if word else "")
    # The decision and its reason: one line, the spec's `[skip-ci]: <message>` plus the verdict.
    message = decide(files).message
    verdict = f"{skipci.spec_platform(platform)}/{level}: {word or 'run'}"
    assert [ln for ln in err.splitlines() if ln.startswith("[skip-ci]")] == [
        f"[skip-ci]: {message} ({verdict})"
    ], err
    assert all(ln.startswith(("[skip-ci]: ", "[diff]: ")) for ln in err.splitlines()), err


def test_cli_without_range_runs(tmp_path: Path) -> None:  # S15/S23 end to end
    repo = make_repo(tmp_path)
    touch(repo, ["docs/a.md"])
    rc, out, err = cli(
        repo, buildkite_env(BUILDKITE_BRANCH="pr"), "--platform", "cuda", "--level", "l2"
    )
    assert (rc, out) == (1, "")
    assert "[diff]: not PR/main build; using safe defaults" in err
    assert "[skip-ci]: could not resolve changed files; run normal CI" in err


def test_cli_repo_option_on_a_subfolder(tmp_path: Path) -> None:
    outer = GitRepo.create(tmp_path / "mono")
    outer.commit_files({"omni/docs/a.md": "a\n", "omni/x.py": "x\n", "y.py": "y\n"}, "base")
    outer.push("main")
    outer.branch("pr")
    outer.commit_files({"omni/docs/a.md": "b\n", "y.py": "z\n"}, "docs here, code outside")
    done = run_task(
        "skip-ci",
        "--platform",
        "cuda",
        "--level",
        "l2",
        "--repo",
        "omni",
        env=pr_env(outer),
        cwd=outer.path,
    )
    assert (done.returncode, done.stdout) == (0, "skip-all\n")


@pytest.mark.parametrize(
    ("level", "hint"),
    [("l4", ""), ("L2", "; did you mean 'l2'?"), ("nightly", "")],
    ids=["S24", "S24-case", "S24-name"],
)
def test_s24_unknown_level_exits_2(level: str, hint: str, tmp_path: Path) -> None:
    """The script's argparse refused `L2` as well; ours refuses it with a guess (issue 35)."""
    repo = make_repo(tmp_path)
    rc, out, err = cli(repo, pr_env(repo), "--platform", "cuda", "--level", level)
    assert (rc, out) == (2, "")
    assert err == f"error: --level: unknown level {level!r}{hint}: allowed values are l2, l3\n"


@pytest.mark.parametrize("files", [ROWS["S3"].files, ROWS["S2"].files], ids=["S25", "S25-normal"])
def test_s25_unknown_platform_exits_2(files: list[str], tmp_path: Path) -> None:
    """Deliberate change (docs/differences.md, "skip-ci: an unknown platform is an error"):
    the original answered `skip-l23` for a yaml-gated diff and 1 otherwise."""
    repo = make_repo(tmp_path)
    touch(repo, files)
    rc, out, err = cli(repo, pr_env(repo), "--platform", "foo", "--level", "l2")
    assert (rc, out) == (2, "")
    assert err.startswith("error: --platform: unknown platform 'foo'")
    assert "[skip-ci]" not in err  # validated before any git work


def test_missing_arguments_are_reported_together(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    rc, out, err = cli(repo, pr_env(repo))
    assert (rc, out) == (2, "")
    assert err.splitlines() == [
        "error: --platform is required: rocm (amd), cuda, npu or xpu (intel)",
        "error: --level is required: l2 or l3",
    ]


def test_cli_empty_diff_says_there_are_no_changes(tmp_path: Path) -> None:
    """Item 6: an empty PR diff runs normal CI (exit 1), as the original decided, but the
    reason is "no changed files", not "product or non-whitelisted changes present"."""
    repo = make_repo(tmp_path)
    repo.commit("nothing changed")
    rc, out, err = cli(repo, pr_env(repo), "--platform", "cuda", "--level", "l2")
    assert (rc, out) == (1, "")
    assert "[diff]: 0 changed file(s) (PR build #42: " in err
    assert [ln for ln in err.splitlines() if ln.startswith("[skip-ci]")] == [
        "[skip-ci]: no changed files in the diff; run normal CI (cuda/l2: run)"
    ]
