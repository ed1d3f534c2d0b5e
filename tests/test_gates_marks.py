"""`check-marks`: the check-mark gate over fixture trees and the sample (spec §6, G71)."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

from ci.errors import UserError
from ci.gates import marks
from ci.pipeline.markers import MarkerRegistry, parse_marker_lines
from tests.conftest import SAMPLE
from tests.inproc import run_inproc

# The registry of MARKERS.md (vLLM-Omni 03ce05ed), as pyproject lines with tags.
MARKER_LINES = [
    "core_model: L1&L2 tests (run in each PR) [ci-level]",
    "advanced_model: L3 level tests (run on each merge) [ci-level]",
    "full_model: L4 level tests (run nightly) [ci-level]",
    "local_model: tests (run locally) [ci-level]",
    "diffusion: Diffusion model tests",
    "omni: Omni model tests",
    "cpu: Tests that run on CPU [hardware-platform]",
    "gpu: Tests that run on GPU (auto-added) [hardware-platform]",
    "cuda: Tests that run on CUDA (auto-added) [hardware-platform] [gpu]",
    "rocm: Tests that run on AMD/ROCm (auto-added) [hardware-platform] [gpu]",
    "xpu: Tests that run on XPU (auto-added) [hardware-platform] [gpu]",
    "npu: Tests that run on NPU/Ascend (auto-added) [hardware-platform]",
    "musa: Tests that run on MUSA/Moore Threads (auto-added) [hardware-platform] [gpu]",
    "H100: Tests that require H100 GPU [hardware-resource] [cuda]",
    "L4: Tests that require L4 GPU [hardware-resource] [cuda]",
    "B200: Tests that require B200 GPU [hardware-resource] [cuda]",
    "MI325: Tests that require MI325 GPU (AMD/ROCm) [hardware-resource] [rocm]",
    "B60: Tests that require Intel Arc Pro B60 XPU [hardware-resource] [xpu]",
    "S5000: Tests that require S5000 GPU (Moore Threads/MUSA) [hardware-resource] [musa]",
    "A2: Tests that require A2 NPU [hardware-resource] [npu]",
    "A3: Tests that require A3 NPU [hardware-resource] [npu]",
    *[f"cards_{n}: Tests that require {n} accelerator cards [hardware-cards]" for n in range(1, 9)],
    "slow: Slow tests (may skip in quick CI) [ci-level]",
    "benchmark: Benchmark tests",
]

GOOD = """\
import pytest
from tests.helpers.mark import hardware_test

pytestmark = [pytest.mark.core_model]


@pytest.mark.cpu
def test_cpu_only():
    assert True


@hardware_test(res={"cuda": ["L4", "H100"], "rocm": "MI325"}, num_cards={"cuda": 2, "rocm": 4})
def test_gpu():
    assert True
"""


def registry() -> MarkerRegistry:
    return parse_marker_lines(MARKER_LINES, "<markers>")


def problems(source: str, rel: str = "tests/unit/test_x.py") -> list[marks.Problem]:
    return marks.scan_source(textwrap.dedent(source), rel, registry())


def kinds(source: str, rel: str = "tests/unit/test_x.py") -> list[str]:
    return [p.kind for p in problems(source, rel)]


def make_repo(tmp_path: Path, files: dict[str, str], *, markers: list[str] | None = None) -> Path:
    repo = tmp_path / "target"
    repo.mkdir()
    lines = ",\n".join(f"    {line!r}" for line in (MARKER_LINES if markers is None else markers))
    (repo / "pyproject.toml").write_text(
        f'[project]\nname = "t"\n\n[tool.pytest.ini_options]\nmarkers = [\n{lines}\n]\n'
    )
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return repo


# --------------------------------------------------------------------------- registry


def test_registry_derives_the_sets_of_markers_md() -> None:
    reg = registry()
    assert reg.levels == {"core_model", "advanced_model", "full_model", "local_model", "slow"}
    assert reg.platforms == {"cpu", "gpu", "cuda", "rocm", "xpu", "npu", "musa"}
    assert reg.gpu_platforms == {"cuda", "rocm", "xpu", "musa"}
    assert reg.res_keys == {"cuda", "rocm", "xpu", "npu", "musa"}
    assert reg.skus_for("cuda") == ("H100", "L4", "B200")
    assert reg.skus_for("npu") == ("A2", "A3")
    assert set(reg.card_counts) == set(range(1, 9))


def test_registry_missing_or_untagged_fails_closed_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(
        UserError, match=r"missing pytest marker registry: .*pyproject\.toml"
    ) as caught:
        marks.load_registry(tmp_path)
    assert caught.value.code == 2
    repo = make_repo(
        tmp_path, {}, markers=["core_model: L1&L2 [ci-level]", "cards_1: one [hardware-cards]"]
    )
    with pytest.raises(UserError) as caught:
        marks.load_registry(repo)
    assert "[ci-level], [hardware-platform], [hardware-resource]" not in caught.value.problems[0]
    assert "[hardware-platform], [hardware-resource]" in caught.value.problems[0]
    assert str(repo / "pyproject.toml") in caught.value.problems[0]
    assert caught.value.code == 2


# --------------------------------------------------------------------------- rules


def test_a_well_marked_file_passes() -> None:
    assert problems(GOOD) == []


def test_direct_sku_marker_is_rejected_with_its_line() -> None:
    found = problems(
        """\
        import pytest

        @pytest.mark.core_model
        @pytest.mark.cuda
        @pytest.mark.H100
        def test_x():
            pass
        """
    )
    assert [p.kind for p in found] == ["Direct SKU"]
    assert found[0].detail.startswith("line 5: pytest.mark.H100;")
    assert 'hardware_test(res={"cuda": "H100"})' in found[0].detail


def test_direct_sku_inside_a_param_and_in_non_test_files_is_rejected() -> None:
    source = """\
        import pytest
        CASES = [pytest.param(1, marks=pytest.mark.MI325)]
        """
    assert kinds(source, "tests/helpers/cases.py") == ["Direct SKU"]
    # The helper module itself is where SKU marks are made.
    assert kinds(source, "tests/helpers/mark.py") == []


def test_missing_level_marker_fails() -> None:
    assert kinds("import pytest\n\n@pytest.mark.cpu\ndef test_x():\n    pass\n") == ["Level"]


def test_missing_hardware_marker_fails() -> None:
    found = problems("import pytest\n\n@pytest.mark.core_model\ndef test_x():\n    pass\n")
    assert [p.kind for p in found] == ["Hardware"]
    assert "hardware_test(...) / hardware_marks(...)" in found[0].detail


def test_a_helper_call_counts_as_hardware() -> None:
    source = """\
        import pytest
        from tests.helpers import mark as m

        pytestmark = pytest.mark.full_model

        @m.hardware_test(res={"npu": "A3"})
        def test_x():
            pass
        """
    assert kinds(source) == []


def test_level_and_hardware_apply_only_to_test_files() -> None:
    assert kinds("X = 1\n", "tests/helpers/util.py") == []
    assert kinds("X = 1\n", "tests/conftest.py") == []
    assert kinds("X = 1\n", "tests/e2e/qwen_test.py") == ["Level", "Hardware"]


def test_from_pytest_import_mark_and_module_variables_are_understood() -> None:
    source = """\
        from pytest import mark
        MARKS = [mark.advanced_model, mark.rocm]
        pytestmark = MARKS
        def test_x():
            pass
        """
    assert kinds(source) == []


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ('hardware_test(res={"cpu": "H100"})', "res key 'cpu' is not a hardware platform"),
        ('hardware_test(res={"rocm": "H100"})', "'H100' is not a registered rocm SKU"),
        ('hardware_test(res={"rocm": ["MI325"]})', "only cuda accepts a list of SKUs"),
        ('hardware_test(res={"cuda": ["L4", "X9"]})', "'X9' is not a registered cuda SKU"),
        ('hardware_test(res={"cuda": "L4"}, num_cards=9)', "num_cards=9 has no registered"),
        ('hardware_test(res={"cuda": "L4"}, num_cards={"npu": 2})', "num_cards key 'npu'"),
        ("hardware_test()", "needs res={platform: SKU}"),
    ],
)
def test_invalid_helper_arguments(call: str, expected: str) -> None:
    source = (
        f"import pytest\npytestmark = pytest.mark.core_model\n\n@{call}\ndef test_x():\n    pass\n"
    )
    found = problems(source)
    assert [p.kind for p in found] == ["Invalid hardware helper"], found
    assert expected in found[0].detail


def test_hardware_marks_is_not_a_decorator_and_cannot_mix_counts() -> None:
    source = """\
        import pytest
        pytestmark = pytest.mark.core_model

        @hardware_marks(res={"cuda": "L4"})
        def test_a():
            pass

        @pytest.mark.parametrize("n", [
            pytest.param(1, marks=hardware_marks(
                res={"cuda": "L4", "rocm": "MI325"}, num_cards={"cuda": 2, "rocm": 4})),
        ])
        def test_b(n):
            pass
        """
    found = problems(source)
    assert [p.kind for p in found] == ["Invalid hardware helper"] * 2
    details = " ".join(p.detail for p in found)
    assert "line 4: hardware_marks(...) is not a decorator" in details
    assert "hardware_marks cannot mix card counts (cuda: 2, rocm: 4)" in details


def test_non_literal_helper_arguments_are_not_guessed() -> None:
    source = """\
        import pytest
        pytestmark = pytest.mark.core_model
        RES = {"cuda": "L4"}

        @hardware_test(res=RES, num_cards=COUNT)
        def test_x():
            pass
        """
    assert kinds(source) == []


def test_a_test_inheriting_cpu_and_a_gpu_mark_conflicts() -> None:
    source = """\
        import pytest
        pytestmark = [pytest.mark.core_model, pytest.mark.cpu]

        class TestThings:
            @hardware_test(res={"rocm": "MI325"})
            def test_gpu(self):
                pass

            def test_plain(self):
                pass

        @pytest.mark.parametrize("x", [1, pytest.param(2, marks=pytest.mark.cuda)])
        def test_param(x):
            pass

        @pytest.mark.npu
        def test_npu():
            pass
        """
    found = problems(source)
    assert [p.kind for p in found] == ["Conflicting CPU/GPU marks"] * 2
    assert found[0].detail.startswith("line 6: test_gpu has both cpu and GPU marks (gpu, rocm)")
    assert found[1].detail.startswith("line 12: test_param has both cpu and GPU marks (cuda)")


def test_class_level_marks_are_inherited() -> None:
    source = """\
        import pytest

        @pytest.mark.cuda
        class TestGpu:
            pytestmark = [pytest.mark.advanced_model]

            @pytest.mark.cpu
            def test_x(self):
                pass
        """
    assert kinds(source) == ["Conflicting CPU/GPU marks"]


def test_unparsable_file_is_a_problem_not_a_crash() -> None:
    assert kinds("def test_x(:\n") == ["Syntax"]


# --------------------------------------------------------------------------- the task


def test_cli_clean_tree_exits_0(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {"tests/unit/test_ok.py": GOOD, "tests/conftest.py": "X = 1\n"})
    done = run_inproc("check-marks", "--repo", str(repo))
    assert done.code == 0, done.stderr
    assert done.stdout == ""
    assert "1 test files, 2 files scanned: OK" in done.stderr


def test_the_scan_imports_nothing_from_the_tests(tmp_path: Path) -> None:
    """Importing vLLM-Omni's tests would import torch: the gate must only read them."""
    witness = tmp_path / "imported"
    side_effect = f"open({str(witness)!r}, 'w').close()\nimport torch  # not installed here\n"
    repo = make_repo(
        tmp_path,
        {
            "tests/conftest.py": side_effect,
            "tests/helpers/__init__.py": side_effect,
            "tests/unit/test_ok.py": side_effect + GOOD,
        },
    )
    done = run_inproc("check-marks", "--repo", str(repo))
    assert done.code == 0, done.stdout + done.stderr
    assert not witness.exists()
    assert "1 test files, 3 files scanned: OK" in done.stderr


def test_cli_reports_each_problem_per_file_and_exits_1(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path,
        {
            "tests/unit/test_ok.py": GOOD,
            "tests/unit/test_sku.py": (
                "import pytest\n\n@pytest.mark.core_model\n@pytest.mark.cuda\n"
                "@pytest.mark.H100\ndef test_x():\n    pass\n"
            ),
            "tests/e2e/test_nolevel.py": (
                "import pytest\n\n@pytest.mark.cpu\ndef test_x():\n    pass\n"
            ),
            "tests/e2e/test_nohw.py": (
                "import pytest\n\n@pytest.mark.core_model\ndef test_x():\n    pass\n"
            ),
        },
    )
    done = run_inproc("check-marks", "--repo", str(repo))
    assert done.code == 1, done.stderr
    assert done.stdout.splitlines() == [
        "tests/e2e/test_nohw.py:",
        "  Hardware: no hardware platform marker (cpu, cuda, gpu, musa, npu, rocm, xpu) "
        "and no hardware_test(...) / hardware_marks(...) call",
        "tests/e2e/test_nolevel.py:",
        "  Level: no CI level marker; mark the tests with one of: "
        "advanced_model, core_model, full_model, local_model, slow",
        "tests/unit/test_sku.py:",
        '  Direct SKU: line 5: pytest.mark.H100; apply SKUs through hardware_test(res={"cuda": '
        '"H100"}) or hardware_marks(...), which also attach cards_<n>',
    ]
    assert done.stderr.splitlines()[-2:] == [
        "check-marks: 3 problem(s) in 3 of 4 files (4 test files)",
        "To skip: SKIP=check-mark git commit ...",
    ]


def test_cli_checks_only_the_files_after_dashdash(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path,
        {
            "tests/test_ok.py": GOOD,
            "tests/test_bad.py": "def test_x():\n    pass\n",
            "docs/notes.py": "X = 1\n",
        },
    )
    ok = run_inproc("check-marks", "--repo", str(repo), "--", "tests/test_ok.py", "docs/notes.py")
    assert ok.code == 0, ok.stderr
    bad = run_inproc("check-marks", "--", "tests/test_bad.py", cwd=repo)
    assert bad.code == 2  # no --repo and not a git checkout
    bad = run_inproc("check-marks", "--repo", ".", "--", "tests/test_bad.py", cwd=repo)
    assert bad.code == 1
    assert bad.stdout.startswith("tests/test_bad.py:\n  Level:")
    missing = run_inproc("check-marks", "--repo", str(repo), "--", "tests/nope.py")
    assert missing.code == 2
    assert missing.stderr.startswith("error: tests/nope.py: no such file")


def test_cli_input_errors_exit_2(tmp_path: Path) -> None:
    no_tests = make_repo(tmp_path, {})
    done = run_inproc("check-marks", "--repo", str(no_tests))
    assert (done.code, done.stderr) == (
        2,
        f"error: --repo: {no_tests} has no tests/ directory\n",
    )
    (no_tests / "pyproject.toml").unlink()
    (no_tests / "tests").mkdir()
    done = run_inproc("check-marks", "--repo", str(no_tests))
    assert done.code == 2
    assert done.stderr == f"error: missing pytest marker registry: {no_tests / 'pyproject.toml'}\n"
    assert "Traceback" not in done.stderr


def test_the_sample_passes_and_a_sku_mark_in_it_fails(tmp_path: Path) -> None:
    done = run_inproc("check-marks", "--repo", str(SAMPLE))
    assert done.code == 0, done.stdout + done.stderr
    assert re.search(r"check-marks: [1-9]\d* test files, \d+ files scanned: OK", done.stderr)
    copy = tmp_path / "sample"
    shutil.copytree(SAMPLE / "tests", copy / "tests")
    shutil.copy(SAMPLE / "pyproject.toml", copy / "pyproject.toml")
    gpu = copy / "tests" / "engine" / "test_engine_gpu.py"
    gpu.write_text(
        gpu.read_text() + "\n\n@pytest.mark.core_model\n@pytest.mark.L4\ndef test_x():\n    pass\n"
    )
    broken = run_inproc("check-marks", "--repo", str(copy))
    assert broken.code == 1
    assert broken.stdout.startswith("tests/engine/test_engine_gpu.py:\n  Direct SKU: line ")
    assert "pytest.mark.L4;" in broken.stdout


def test_from_ref_checks_only_the_changed_test_files(tmp_path: Path) -> None:
    from tests.gitrepo import GitRepo

    repo = make_repo(tmp_path, {"tests/test_ok.py": GOOD, "tests/test_old.py": "X = 1\n"})
    git = GitRepo.create(repo, origin=False)
    git.commit("base: test_old.py is already mis-marked")
    git.branch("feature")
    git.commit_files(
        {"tests/test_new.py": "import pytest\n\n@pytest.mark.cpu\ndef test_x(): ...\n"}
    )
    done = run_inproc("check-marks", "--repo", str(repo), "--from-ref", "main")
    assert done.code == 1, done.stderr
    assert done.stdout.splitlines()[0] == "tests/test_new.py:"
    assert "test_old.py" not in done.stdout
    clean = run_inproc("check-marks", "--repo", str(repo), "--from-ref", "HEAD")
    assert clean.code == 0, clean.stderr
    assert "no changed .py file under tests/ since HEAD" in clean.stderr
    git.write("tests/test_wip.py", "def test_x(): ...\n")
    wip = run_inproc(
        "check-marks", "--repo", str(repo), "--from-ref", "HEAD", "--to-ref", "WORKTREE"
    )
    assert wip.code == 1
    assert wip.stdout.startswith("tests/test_wip.py:\n  Level:")
    bad = run_inproc("check-marks", "--repo", str(repo), "--from-ref", "no-such-ref")
    assert bad.code == 2
    both = run_inproc("check-marks", "--repo", str(repo), "--from-ref", "main", "--", "tests/x.py")
    assert (both.code, both.stderr) == (
        2,
        "error: give files after `--` or --from-ref, not both\n",
    )


@pytest.mark.process
def test_nox_session_runs_the_gate_over_a_repo(tmp_path: Path) -> None:
    """`nox -s check-marks` (no venv): the sample by default, `--repo` otherwise."""
    import subprocess

    from tests.conftest import ROOT

    def nox(*args: str) -> subprocess.CompletedProcess[str]:
        argv = ["nox", "-s", "check-marks", *(["--", *args] if args else [])]
        return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)

    sample = nox()
    assert sample.returncode == 0, sample.stderr
    # nox passes the command's stderr through on its stdout.
    assert "check-marks: 6 test files, 14 files scanned: OK" in sample.stdout + sample.stderr
    repo = make_repo(tmp_path, {"tests/test_bad.py": "def test_x():\n    pass\n"})
    bad = nox("--repo", str(repo))
    assert bad.returncode == 1
    assert "tests/test_bad.py:\n  Level: no CI level marker" in bad.stdout
