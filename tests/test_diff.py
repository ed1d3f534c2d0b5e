"""The shared diff resolver (spec §2.6), against real git repositories with real commits."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci import diff as diffmod
from ci.diff import WORKTREE, resolve_diff
from ci.errors import UserError
from tests.gitrepo import GitRepo, buildkite_env, git_counter


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    diffmod.clear_cache()
    yield
    diffmod.clear_cache()


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """main (pushed to a real bare origin) with two commits, then branch `feature` with one."""
    made = GitRepo.create(tmp_path / "repo")
    made.commit_files({"README.md": "hi\n", "src/a.py": "a = 1\n", "src/b.py": "b = 1\n"}, "one")
    made.commit_files({"src/a.py": "a = 2\n"}, "two")
    made.push("main")
    made.branch("feature")
    made.commit_files({"src/b.py": "b = 2\n", "docs/new.md": "new\n"}, "feature work")
    return made


def env(**values: str) -> dict[str, str]:
    return buildkite_env(**values)


# --------------------------------------------------------------------------- PR builds


def test_pr_build_diffs_origin_base_three_dots(repo: GitRepo) -> None:  # S21
    head = repo.sha()
    got = resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="7", BUILDKITE_COMMIT=head))
    assert got.range == f"origin/main...{head}"
    assert got.kind == "pr"
    assert got.paths == ("docs/new.md", "src/b.py")
    assert got.reason == f"PR build #7: origin/main...{head}"


def test_pr_build_three_dots_ignore_base_moving_on(repo: GitRepo) -> None:
    head = repo.sha()
    repo.git("checkout", "-q", "main")
    repo.commit_files({"src/a.py": "a = 3\n"}, "main moves on")
    repo.push("main")
    got = resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="7", BUILDKITE_COMMIT=head))
    assert got.paths == ("docs/new.md", "src/b.py")


def test_pr_build_honours_base_branch(repo: GitRepo) -> None:
    head = repo.sha()
    repo.git("checkout", "-q", "-b", "release", "main~1")
    repo.push("release")
    got = resolve_diff(
        repo.path,
        env=env(
            BUILDKITE_PULL_REQUEST="9",
            BUILDKITE_PULL_REQUEST_BASE_BRANCH="release",
            BUILDKITE_COMMIT=head,
        ),
    )
    assert got.range == f"origin/release...{head}"
    assert got.paths == ("docs/new.md", "src/a.py", "src/b.py")


def test_pr_build_fetches_a_missing_base_from_origin(
    repo: GitRepo, capfd: pytest.CaptureFixture[str]
) -> None:
    repo.git("update-ref", "-d", "refs/remotes/origin/main")
    head = repo.sha()
    got = resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="7", BUILDKITE_COMMIT=head))
    assert "[diff]: origin/main not found locally; trying fetch" in capfd.readouterr().err
    assert got.range == f"origin/main...{head}"
    assert got.paths == ("docs/new.md", "src/b.py")
    assert repo.sha("origin/main") == repo.sha("main")


def test_pr_build_falls_back_to_a_local_base(repo: GitRepo) -> None:
    repo.git("update-ref", "-d", "refs/remotes/origin/main")
    repo.git("remote", "set-url", "origin", str(repo.path.parent / "gone.git"))
    head = repo.sha()
    got = resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="7", BUILDKITE_COMMIT=head))
    assert got.range == f"main...{head}"
    assert got.paths == ("docs/new.md", "src/b.py")


def test_pr_build_without_any_base_uses_safe_defaults(
    repo: GitRepo, capfd: pytest.CaptureFixture[str]
) -> None:
    got = resolve_diff(
        repo.path,
        env=env(BUILDKITE_PULL_REQUEST="7", BUILDKITE_PULL_REQUEST_BASE_BRANCH="nope"),
    )
    assert got.paths is None and got.range is None
    assert got.reason == "cannot resolve PR base nope; using safe defaults"
    assert "[diff]: cannot resolve PR base nope; using safe defaults" in capfd.readouterr().err


def test_pr_build_with_unknown_commit_is_safe_defaults(
    repo: GitRepo, capfd: pytest.CaptureFixture[str]
) -> None:
    got = resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="7", BUILDKITE_COMMIT="0" * 40))
    assert got.paths is None
    assert f"git diff failed (origin/main...{'0' * 40}); using safe defaults" in got.reason
    assert "using safe defaults" in capfd.readouterr().err


def test_pr_false_is_not_a_pr_build(repo: GitRepo) -> None:
    got = resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="false"))
    assert got.paths is None


def test_empty_commit_means_head(repo: GitRepo) -> None:
    got = resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="7"))
    assert got.range == "origin/main...HEAD"
    assert got.paths == ("docs/new.md", "src/b.py")


# --------------------------------------------------------------------------- main builds


def test_main_build_diffs_commit_parent_two_dots(repo: GitRepo) -> None:  # S22
    repo.git("checkout", "-q", "main")
    head = repo.sha()
    got = resolve_diff(
        repo.path,
        env=env(BUILDKITE_PULL_REQUEST="false", BUILDKITE_BRANCH="main", BUILDKITE_COMMIT=head),
    )
    assert got.range == f"{head}^..{head}"
    assert got.kind == "main"
    assert got.paths == ("src/a.py",)


def test_main_build_is_one_git_call(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The diff alone: its parent is asked only when it fails (issue 34: every upload job
    of main pays each git start)."""
    repo.git("checkout", "-q", "main")
    head = repo.sha()
    bin_dir, log = git_counter(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    got = resolve_diff(
        repo.path,
        env=env(BUILDKITE_PULL_REQUEST="false", BUILDKITE_BRANCH="main", BUILDKITE_COMMIT=head),
    )
    assert got.paths == ("src/a.py",)
    calls = log.read_text().splitlines()
    assert [c.split()[2] for c in calls] == ["diff"], calls


def test_main_build_of_a_root_commit_uses_safe_defaults(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    root = GitRepo.create(tmp_path / "r", origin=False)
    head = root.commit_files({"a.txt": "a\n"}, "root")
    got = resolve_diff(root.path, env=env(BUILDKITE_BRANCH="main", BUILDKITE_COMMIT=head))
    assert got.paths is None
    assert got.reason == "main commit has no parent; using safe defaults"
    assert "[diff]: main commit has no parent; using safe defaults" in capfd.readouterr().err


def test_other_branch_has_no_range(repo: GitRepo, capfd: pytest.CaptureFixture[str]) -> None:  # S23
    got = resolve_diff(
        repo.path, env=env(BUILDKITE_PULL_REQUEST="false", BUILDKITE_BRANCH="feature")
    )
    assert (got.paths, got.range) == (None, None)
    assert got.reason == "not PR/main build; using safe defaults"
    assert "[diff]: not PR/main build; using safe defaults" in capfd.readouterr().err


def test_changed_count_is_logged(repo: GitRepo, capfd: pytest.CaptureFixture[str]) -> None:
    resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="7"))
    assert "[diff]: 2 changed file(s) (PR build #7: origin/main...HEAD)\n" in capfd.readouterr().err


# --------------------------------------------------------------------------- explicit ranges


def test_explicit_range_is_a_pr_style_three_dot_diff(repo: GitRepo) -> None:
    # The env says "not a PR build"; an explicit range ignores that.
    got = resolve_diff(repo.path, "main", "feature", env=env(BUILDKITE_BRANCH="x"))
    assert got.range == "main...feature"
    assert got.kind == "explicit"
    assert got.paths == ("docs/new.md", "src/b.py")


def test_explicit_base_defaults_head_to_HEAD(repo: GitRepo) -> None:
    got = resolve_diff(repo.path, "main~1", env=env())
    assert got.range == "main~1...HEAD"
    assert got.paths == ("docs/new.md", "src/a.py", "src/b.py")


def test_explicit_head_defaults_base_to_origin_main(repo: GitRepo) -> None:
    got = resolve_diff(repo.path, None, "feature", env=env())
    assert got.range == "origin/main...feature"


def test_explicit_bad_revisions_are_user_errors(repo: GitRepo) -> None:
    with pytest.raises(UserError) as caught:
        resolve_diff(repo.path, "no-such-base", "no-such-head", env=env())
    assert caught.value.problems == (
        f"base revision 'no-such-base' does not name a commit in {repo.path}",
        f"head revision 'no-such-head' does not name a commit in {repo.path}",
    )


# --------------------------------------------------------------------------- worktree


def test_worktree_includes_staged_unstaged_untracked_and_deleted(repo: GitRepo) -> None:
    repo.write("src/a.py", "a = 99\n")  # unstaged
    repo.write("src/staged.py", "s = 1\n")
    repo.git("add", "src/staged.py")
    repo.write("notes/untracked.txt", "u\n")
    repo.write(".gitignore", "*.log\n")
    repo.write("ignored.log", "ignored\n")
    repo.remove("README.md")
    got = resolve_diff(repo.path, "main", WORKTREE, env=env())
    assert got.kind == "worktree"
    assert got.range == "main...(worktree)"
    assert got.paths == (
        ".gitignore",
        "README.md",
        "docs/new.md",
        "notes/untracked.txt",
        "src/a.py",
        "src/b.py",
        "src/staged.py",
    )


def test_worktree_patch_and_text_of_an_untracked_test(repo: GitRepo) -> None:
    repo.write("tests/test_new.py", "import pytest\npytestmark = pytest.mark.skip\n")
    got = resolve_diff(repo.path, "main", WORKTREE, env=env())
    patch = got.patch("tests/test_new.py")
    assert patch is not None and "new file mode" in patch
    assert "+pytestmark = pytest.mark.skip\n" in patch
    assert got.new_text("tests/test_new.py") == "import pytest\npytestmark = pytest.mark.skip\n"


def test_worktree_mode_change_is_not_read_as_a_new_file(repo: GitRepo) -> None:
    repo.commit_files({"tests/test_m.py": "def test_m():\n    pass\n"}, "add test")
    (repo.path / "tests/test_m.py").chmod(0o755)
    got = resolve_diff(repo.path, "HEAD", WORKTREE, env=env())
    assert got.paths == ("tests/test_m.py",) and got.untracked == ()
    patch = got.patch("tests/test_m.py") or ""
    assert "new mode 100755" in patch and "new file mode" not in patch


# --------------------------------------------------------------------------- subfolder


@pytest.fixture
def nested(tmp_path: Path) -> GitRepo:
    """A larger repository whose `omni/` folder is the target repo."""
    outer = GitRepo.create(tmp_path / "mono")
    outer.commit_files(
        {"omni/tests/test_x.py": "def test_x():\n    assert 1\n", "other/z.txt": "z\n"}, "base"
    )
    outer.push("main")
    outer.branch("feature")
    outer.commit_files(
        {
            "omni/tests/test_x.py": "import pytest\n\n@pytest.mark.skip(reason='r')\n"
            "def test_x():\n    assert 1\n",
            "omni/docs/a.md": "a\n",
            "other/z.txt": "zz\n",
        },
        "mixed",
    )
    return outer


def test_subfolder_paths_are_relative_to_the_target(nested: GitRepo) -> None:
    target = nested.path / "omni"
    got = resolve_diff(target, env=env(BUILDKITE_PULL_REQUEST="3"))
    assert got.paths == ("docs/a.md", "tests/test_x.py")
    patch = got.patch("tests/test_x.py")
    assert patch is not None and "+++ b/tests/test_x.py" in patch
    assert got.new_text("tests/test_x.py") is not None
    assert "@pytest.mark.skip(reason='r')" in (got.new_text("tests/test_x.py") or "")


def test_subfolder_worktree(nested: GitRepo) -> None:
    target = nested.path / "omni"
    nested.write("omni/new.txt", "n\n")
    nested.write("other/new.txt", "n\n")
    got = resolve_diff(target, "main", WORKTREE, env=env())
    assert got.paths == ("docs/a.md", "new.txt", "tests/test_x.py")


# --------------------------------------------------------------------------- per-file details


def test_patches_of_all_changed_tests_come_from_one_batch(repo: GitRepo) -> None:
    repo.commit_files(
        {
            "tests/test_a.py": "a = 1\n",
            "tests/sub/test b.py": "b = 1\n",  # a space: still one batch
            "tests/test_ü.py": "u = 1\n",
        },
        "tests",
    )
    got = resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="7"))
    assert got.paths == (
        "docs/new.md",
        "src/b.py",
        "tests/sub/test b.py",
        "tests/test_a.py",
        "tests/test_ü.py",
    )
    patch_a = got.patch("tests/test_a.py")
    assert patch_a is not None and patch_a.startswith("diff --git a/tests/test_a.py ")
    assert "+a = 1" in patch_a and "+b = 1" not in patch_a
    assert set(got._patches) == {"tests/test_a.py", "tests/sub/test b.py", "tests/test_ü.py"}
    assert "+b = 1" in (got.patch("tests/sub/test b.py") or "")
    assert "+u = 1" in (got.patch("tests/test_ü.py") or "")


def test_renamed_test_reads_as_a_new_file(repo: GitRepo) -> None:
    repo.commit_files({"tests/test_old.py": "def test_x():\n    assert 1\n"}, "add")
    repo.push("feature")
    repo.git("mv", "tests/test_old.py", "tests/test_new.py")
    repo.commit("rename")
    got = resolve_diff(repo.path, "HEAD~1", "HEAD", env=env())
    assert got.paths == ("tests/test_new.py",)
    assert "new file mode" in (got.patch("tests/test_new.py") or "")


def test_no_range_has_no_details(repo: GitRepo) -> None:
    got = resolve_diff(repo.path, env=env(BUILDKITE_BRANCH="feature"))
    assert got.patch("src/b.py") is None and got.new_text("src/b.py") is None


# --------------------------------------------------------------------------- cache


def test_resolution_is_shared_per_process(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, _ = git_counter(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    pr = env(BUILDKITE_PULL_REQUEST="7")
    first = resolve_diff(repo.path, env=pr)
    calls = (tmp_path / "git-calls").read_text().splitlines()
    assert len(calls) == 2  # verify origin/main, diff --name-only
    assert resolve_diff(str(repo.path) + "/", env=dict(pr)) is first
    assert (tmp_path / "git-calls").read_text().splitlines() == calls
    # A different env is a different build: resolved again.
    assert resolve_diff(repo.path, env=env(BUILDKITE_BRANCH="x")) is not first


# Issue 32, item 8: the new side of every changed test file, read by a fixed number of gits.
NEW_FILES = {
    "tests/test_plain.py": "import pytest\n\npytestmark = pytest.mark.skip\n",
    "tests/sub dir/test with space.py": "x = 'espacé'\n",
    "tests/ünï/test_ç.py": "# ☃\nvalue = 3\n",
    "tests/test_no_newline.py": "last = 1",
    "tests/test_empty.py": "",
    "tests/test_crlf.py": "a = 1\r\nb = 2\r\n",
}


def test_new_texts_are_read_right_by_a_fixed_number_of_git_calls(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = {f"tests/bulk/test_{i}.py": f"n = {i}\n" for i in range(40)}
    repo.commit_files({**NEW_FILES, **many, "tests/test_gone.py": "old\n"}, "tests")
    repo.remove("tests/test_gone.py")
    repo.commit("remove one")
    bin_dir, log = git_counter(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    diff = resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="7"))
    assert diff.paths is not None and set(NEW_FILES) <= set(diff.paths)
    before = len(log.read_text().splitlines())
    for path, text in {**NEW_FILES, **many}.items():
        assert diff.new_text(path) == text, path
    calls = log.read_text().splitlines()[before:]
    assert [c.split()[0] for c in calls] == ["ls-tree", "cat-file"], calls
    assert diff.new_text("tests/test_gone.py") is None  # not there at the head
    # And the patches of them all: one `git diff`.
    before = len(log.read_text().splitlines())
    for path in NEW_FILES:
        assert (diff.patch(path) or "").startswith(f"diff --git a/{path} b/{path}\n"), path
    assert len(log.read_text().splitlines()) - before == 1


def test_a_large_diff_reads_patches_of_the_whole_test_tree_at_once(repo: GitRepo) -> None:
    """More test files than fit one command line: `git diff -- tests`, cut per file."""
    many = {f"tests/t/test_{i}.py": f"n = {i}\n" for i in range(diffmod._PATHSPEC_LIMIT + 5)}
    repo.commit_files({**many, "tests/data.txt": "not a test\n"}, "many tests")
    diff = resolve_diff(repo.path, env=env(BUILDKITE_PULL_REQUEST="7"))
    for i, path in enumerate(many):
        patch = diff.patch(path) or ""
        assert patch.startswith(f"diff --git a/{path} b/{path}\n") and f"+n = {i}\n" in patch
