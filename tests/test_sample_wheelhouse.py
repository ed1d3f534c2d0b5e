"""`wheelhouse`: the plan (pure), the mirroring into other build contexts, the CLI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ci import wheelhouse as wh
from ci.errors import Failure, UserError
from tests.conftest import ROOT, SAMPLE
from tests.inproc import Outcome, run_task


def options(tmp_path: Path, **kw: object) -> wh.WheelhouseOptions:
    base: dict[str, object] = {
        "root": ROOT,
        "dests": (tmp_path / "a", tmp_path / "b"),
        "machine": "x86_64",
        "python": "/py",
    }
    base.update(kw)
    return wh.WheelhouseOptions(**base)  # type: ignore[arg-type]


def test_plan_builds_our_wheel_then_downloads_for_the_images_python(tmp_path: Path) -> None:
    plan = wh.plan(options(tmp_path), "1.2.3.dev4+gabc")
    build, download = plan.commands
    dest = str(tmp_path / "a")
    assert build.argv == ("/py", "-m", "pip", "wheel", "--no-deps", "--wheel-dir", dest, str(ROOT))
    assert build.env["SOURCE_DATE_EPOCH"] == "315532800"
    assert download.argv == (
        "/py",
        "-m",
        "pip",
        "download",
        "--dest",
        dest,
        "--find-links",
        dest,
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
        "--abi",
        "abi3",
        "--abi",
        "none",
        "--platform",
        "manylinux_2_28_x86_64",
        "--platform",
        "manylinux_2_17_x86_64",
        "--platform",
        "manylinux2014_x86_64",
        "vllm-omni-ci==1.2.3.dev4+gabc",
        "pytest",
    )
    assert dict(plan.facts)["copied to"] == str(tmp_path / "b")


def test_plan_follows_python_version_and_machine(tmp_path: Path) -> None:
    plan = wh.plan(options(tmp_path, python_version="3.12", machine="aarch64"))
    argv = plan.commands[1].argv
    assert argv[argv.index("--python-version") + 1] == "3.12"
    assert argv[argv.index("--abi") + 1] == "cp312"
    assert "manylinux_2_17_aarch64" in argv


def test_offline_variant_only_adds_no_index(tmp_path: Path) -> None:
    download = wh.plan(options(tmp_path)).commands[1]
    offline = wh.offline(download)
    assert offline.argv[:5] == ("/py", "-m", "pip", "download", "--no-index")
    assert tuple(a for a in offline.argv if a != "--no-index") == download.argv


def test_version_is_the_built_wheels(tmp_path: Path) -> None:
    """The pin reads the version from the wheel that was built, not from the installed copy."""
    assert wh.plan(options(tmp_path)).commands[1].argv[-2] == f"vllm-omni-ci=={wh.BUILT}"
    (tmp_path / "vllm_omni_ci-0.1.1.dev2+g1a2b3c4-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "vllm_omni-0.9-py3-none-any.whl").write_bytes(b"")  # another project's
    assert wh.built_version(tmp_path) == "0.1.1.dev2+g1a2b3c4"
    (tmp_path / "vllm_omni_ci-0.1.0-py3-none-any.whl").write_bytes(b"")
    with pytest.raises(Failure, match=r"expected one vllm-omni-ci wheel in .*, found .*0\.1\.0"):
        wh.built_version(tmp_path)


@pytest.mark.parametrize("version", ["3", "3.11.7", "py3.11", ""])
def test_bad_python_version_is_rejected(tmp_path: Path, version: str) -> None:
    with pytest.raises(UserError, match=r"--python-version must look like 3\.11"):
        wh.plan(options(tmp_path, python_version=version))


def test_sync_mirrors_wheels_and_drops_stale_ones(tmp_path: Path) -> None:
    source, other = tmp_path / "src", tmp_path / "other"
    source.mkdir()
    (source / "a-1-py3-none-any.whl").write_bytes(b"new-a")
    (source / "b-1-py3-none-any.whl").write_bytes(b"b")
    other.mkdir()
    (other / "a-1-py3-none-any.whl").write_bytes(b"old-a")  # same size, other bytes
    (other / "stale-0-py3-none-any.whl").write_bytes(b"x")
    (other / "notes.txt").write_text("kept")
    wh.sync(source, (other,))
    assert sorted(p.name for p in other.iterdir()) == [
        "a-1-py3-none-any.whl",
        "b-1-py3-none-any.whl",
        "notes.txt",
    ]
    assert (other / "a-1-py3-none-any.whl").read_bytes() == b"new-a"


def test_cli_dry_run_prints_the_plan_and_creates_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "wheels"
    result = run_task("wheelhouse", "--dest", str(dest), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# plan: wheelhouse\n")
    assert f"--wheel-dir {dest}" in result.stdout
    assert not dest.exists()


def test_cli_defaults_to_this_repo_and_the_sample(tmp_path: Path) -> None:
    result = run_task("wheelhouse", "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"# wheelhouse: {ROOT / 'wheelhouse'}\n" in result.stdout
    assert f"# copied to: {SAMPLE / 'wheelhouse'}\n" in result.stdout


def test_cli_bad_input_exits_2_with_one_error_line() -> None:
    result = run_task("wheelhouse", "--python-version", "3", "--dry-run")
    assert result.returncode == 2
    assert result.stderr == "error: --python-version must look like 3.11, got '3'\n"
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("dest", "message"),
    [
        ("", "error: --dest: an empty path; give a directory (or leave --dest out)\n"),
        ("{file}", "error: --dest: {file} is a file, not a directory\n"),
    ],
    ids=["empty", "file"],
)
def test_cli_bad_dest_exits_2_before_pip(tmp_path: Path, dest: str, message: str) -> None:
    """`--dest ''` was the current directory, and a file failed after the wheel build."""
    taken = tmp_path / "taken"
    taken.write_text("x")
    result = run_task("wheelhouse", "--dest", dest.format(file=taken), "--dry-run", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == message.format(file=taken)
    assert result.stdout == ""


def test_a_dest_name_the_system_refuses_is_no_traceback() -> None:
    """A name too long for the file system (ENAMETOOLONG) raised OSError out of pathlib;
    it is not a file, so the dry run plans it (pip then says why it cannot write there)."""
    options = wh.WheelhouseOptions(ROOT, (Path("x" * 300),), "3.12")
    assert wh.plan(options).commands


def test_a_dest_that_is_a_symlink_loop_is_no_traceback(
    tmp_path: Path, inproc: Callable[..., Outcome]
) -> None:
    """pathlib's resolve raised RuntimeError on a loop; the dry run now plans the path."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    done = inproc("wheelhouse", "--dry-run", "--dest", str(loop), cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert f"# wheelhouse: {loop}\n" in done.stdout
