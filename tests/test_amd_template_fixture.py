"""The seed-era AMD template, rebuilt for tests (tests/fixtures/amd/test-template-amd-omni.j2),
rendered as bootstrap-amd-omni.sh rendered it.

The script ran `minijinja-cli test-template.j2 SUITE.yml -D …` (2.3.1) in `.buildkite/amd`
and deleted every whitespace-only line (`sed '/^[[:space:]]*$/d'`). Here the `minijinja`
package (the same engine) stands in for the binary, with the CLI's settings (see
`minijinja_cli`). The T rows (pipeline spec §5.3) pin the template to the spec; the corpus
renders pin it to Buildkite's schema and to `bootstrap --platform rocm --dry-run`, which
must give the same document except where docs/differences.md says why, plus one order
the CLI imposed that it does not mention (`as_old`).
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci.migrate import standins
from ci.schema import schema_problems
from tests.conftest import ROOT, SHARED, need_shared
from tests.gitrepo import GitRepo, buildkite_env
from tests.inproc import run_task
from tests.test_amd_bootstrap import CONTAINER, GPU, T, step
from tests.test_amd_bootstrap import T_ROWS as RENDER_ROWS

TEMPLATE = Path(__file__).parent / "fixtures" / "amd" / "test-template-amd-omni.j2"
CORPUS_AMD = SHARED / "vllm-omni" / ".buildkite" / "amd"
SUITES = ("ready", "merge", "nightly")

OLD_RUN = "bash .buildkite/amd/scripts/run-amd-test.sh"
OLD_BUILD = "bash .buildkite/amd/scripts/build-ci-image.sh"
NEW_RUN = "vllm-omni-ci run-tests --platform rocm"
NEW_BUILD = "vllm-omni-ci build-image --platform rocm"
HEAD = "(command rocm-smi || true) && cd /app/vllm-omni"

# The -D values bootstrap-amd-omni.sh passes (a PR build of `feature`, no critical files).
# The template reads only mirror_hw; the rest must be accepted and change nothing.
DEFINES = {
    "branch": "feature",
    "list_file_diff": "vllm_omni/model.py",
    "run_all": "0",
    "nightly": "0",
    "mirror_hw": "amdproduction",
    "fail_fast": "true",
    "vllm_use_precompiled": "1",
    "vllm_merge_base_commit": "0" * 40,
    "cov_enabled": "0",
    "vllm_ci_branch": "main",
}


# --------------------------------------------------------------------------- the old render

_STAND_INS: list[Path] = []


def minijinja_cli(template: Path, data: Path, defines: Mapping[str, str]) -> str:
    """The stdout of `minijinja-cli TEMPLATE DATA -D k=v …` run in TEMPLATE's folder: the
    stand-in `migrate --check` puts on PATH (ci/migrate/standins.py says how it follows
    minijinja-cli 2.3.1: sorted maps, lenient undefined values, one trailing newline)."""
    if not _STAND_INS:
        _STAND_INS.append(Path(tempfile.mkdtemp(prefix="stand-ins-")))
        standins.install(_STAND_INS[0])
    argv = [str(_STAND_INS[0] / "minijinja-cli"), template.name, str(data)]
    for key, value in defines.items():
        argv += ["-D", f"{key}={value}"]
    done = subprocess.run(argv, cwd=template.parent, capture_output=True, text=True, check=True)
    return done.stdout


def without_blank_lines(text: str) -> str:
    """`sed '/^[[:space:]]*$/d'`: every line of only spaces, tabs, CR, VT or FF goes."""
    return re.sub(r"(?m)^[ \t\r\f\v]*\n", "", text)


def old_render(amd_dir: Path, suite_file: str, **defines: str) -> dict[str, Any]:
    """What the script uploaded for one suite file in `amd_dir` (a `.buildkite/amd`)."""
    template = amd_dir / "test-template.j2"  # the script's copy of the Omni template
    shutil.copyfile(TEMPLATE, template)
    text = without_blank_lines(
        minijinja_cli(template, amd_dir / suite_file, {**DEFINES, **defines})
    )
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def leaves(steps: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for entry in steps:
        out.extend((entry.get("steps") or []) if "group" in entry else [entry])
    return out


# --------------------------------------------------------------------------- T rows


# The render test's rows (tests/test_amd_bootstrap.py), with the template's own values
# where docs/differences.md says our render differs.
T_ROWS: dict[str, T] = {
    **RENDER_ROWS,
    # The data file's `depends_on` is ignored: the template hard-codes amd-build.
    "T1-depends_on": T(step(depends_on="something-else"), {("depends_on",): "amd-build"}),
    # The pool is undefined: it prints as nothing, and its last character (a slice of
    # an undefined value) as an empty list.
    "T3": T(step(agent_pool=None), {
        ("agents",): {"queue": "amd_mi300_1"},
        ("label",): ": X",
        (*GPU, "limits", "amd.com/gpu"): "[]",
        ("env", "VLLM_CI_EXPECTED_GPU_COUNT"): "[]",
    }),
    # minijinja-cli 2.3.1 walks maps in sorted order (the stand-in sorts maps): the suite's
    # exports, then the step's, each sorted by name; the job env is a mapping, so its order
    # is moot.
    "T6-order": T(
        step(env={"Y": "1", "B": "2"}),
        {
            ("env", "TEST_COMMANDS"): "\n".join([
                HEAD, 'export A="4"', 'export Z="3"', 'export B="2"', 'export Y="1"', "c1", "c2",
            ]),
        },
        suite_env={"Z": "3", "A": "4"},
    ),
    # The output filter also deletes the blank line inside a command block (spec W11).
    "T6-command-block": T(step(commands=None, command="a \\\n  --x\n\nb\n"), {
        ("env", "TEST_COMMANDS"): "\n".join([HEAD, "a \\", "  --x", "b"]),
    }),
    "T8-group": T(step(mirror_hardwares=["amdtentative"]), {}, grouped=True),
    "T9": T(step(), {
        (*CONTAINER, "image"): "rocm/vllm-omni:$BUILDKITE_COMMIT",
        ("command",): OLD_RUN,
    }),
}  # fmt: skip

FIXED_JOB_ENV = {
    "AMD_CI_RUNTIME": "native",
    "NATIVE_CI": "true",
    "VLLM_CI_DOCKER_DISABLED": "1",
    "VLLM_CI_EXPECTED_GPU_COUNT": "4",
    "VLLM_CI_REQUIRE_PERSISTENT_HF_CACHE": "1",
    "HF_HOME": "/home/buildkite-agent/huggingface",
    "HF_HUB_DOWNLOAD_TIMEOUT": "300",
    "HF_HUB_ETAG_TIMEOUT": "60",
    "MIOPEN_DEBUG_CONV_DIRECT": "0",
    "MIOPEN_DEBUG_CONV_GEMM": "0",
    "VLLM_ROCM_USE_AITER": "0",
    "PYTORCH_ROCM_ARCH": "",
}


def dig(data: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


def check_image_group(pipeline: dict[str, Any]) -> None:
    """T9: the first entry is a group holding the `amd-build` image step, as the spec says."""
    (image,) = pipeline["steps"][0]["steps"]
    assert pipeline["steps"][0]["group"] == ":docker: AMD image"
    assert image["key"] == "amd-build"
    assert image["depends_on"] is None and image["soft_fail"] is False
    assert image["commands"] == [OLD_BUILD]
    assert image["env"] == {
        "DOCKER_BUILDKIT": "1",
        "PYTORCH_ROCM_ARCH": "gfx942",
        "ROCM_CI_IMAGE_REGISTRY": "rocm/vllm-omni",
    }
    assert image["retry"]["automatic"][0] == {"exit_status": -1, "limit": 1}


@pytest.mark.parametrize("name", list(T_ROWS))
def test_t_rows(name: str, tmp_path: Path) -> None:
    row = T_ROWS[name]
    entry = {"group": "g", "steps": [row.data]} if row.grouped else row.data
    data = {"env": row.suite_env, "steps": [entry]}
    (tmp_path / "suite.yml").write_text(yaml.safe_dump(data, sort_keys=False))
    pipeline = old_render(tmp_path, "suite.yml", mirror_hw=row.mirror_hw)

    check_image_group(pipeline)
    assert pipeline.get("env", {}) == row.suite_env  # no env block for an empty env
    rest = pipeline["steps"][1:]
    if not row.expect:  # T8: filtered by mirror_hardwares, silently
        # A group is kept with no steps (Buildkite rejects it; B17).
        assert rest == ([{"group": "g", "steps": None}] if row.grouped else [])
        return
    if row.grouped:
        assert [g["group"] for g in rest] == ["g"]
    (got,) = leaves(rest)
    for path, value in row.expect.items():
        assert dig(got, path) == value, path
    if row.data.get("agent_pool") == "mi300_4":
        step_env = row.data.get("env") or {}
        assert got["env"] == {
            **FIXED_JOB_ENV,
            **step_env,
            "TEST_COMMANDS": got["env"]["TEST_COMMANDS"],
        }


def test_the_other_defines_change_nothing(tmp_path: Path) -> None:
    """Spec: only env, steps and mirror_hw are read; the rest is accepted and unused."""
    data = {"env": {"E": "1"}, "steps": [step()]}
    (tmp_path / "suite.yml").write_text(yaml.safe_dump(data))
    plain = old_render(tmp_path, "suite.yml")
    other = {k: "other" for k in DEFINES if k != "mirror_hw"}
    assert old_render(tmp_path, "suite.yml", **other) == plain


# --------------------------------------------------------------------------- real suites


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """A PR checkout (`feature` off a pushed `main`) holding the real AMD suites and a
    product change, so that the ready and merge suites pass skip-ci."""
    repo = GitRepo.create(tmp_path_factory.mktemp("amd-template") / "omni")
    amd_dir = repo.path / ".buildkite" / "amd"
    amd_dir.mkdir(parents=True)
    for name in SUITES:
        shutil.copyfile(
            need_shared(CORPUS_AMD / f"test-amd-{name}.yml"), amd_dir / f"test-amd-{name}.yml"
        )
    repo.commit_files({"vllm_omni/model.py": "x = 1\n"}, "init")
    repo.push("main")
    repo.branch("feature")
    repo.commit_files({"vllm_omni/model.py": "x = 2\n"}, "product change")
    return repo


def old_of(repo: GitRepo, suite: str, tmp_path: Path) -> dict[str, Any]:
    """The old render, in a copy of the checkout's `.buildkite/amd` (the script wrote there)."""
    amd_dir = tmp_path / "amd"
    shutil.copytree(repo.path / ".buildkite" / "amd", amd_dir)
    base = repo.git("merge-base", "origin/main", "HEAD").strip()
    return old_render(amd_dir, f"test-amd-{suite}.yml", vllm_merge_base_commit=base)


def new_of(repo: GitRepo, suite: str) -> dict[str, Any]:
    env = buildkite_env()
    for key in ("NIGHTLY", "AMD_MIRROR_HW", "VLLM_USE_PRECOMPILED", "RUN_ALL", "DEBUG_TEST_YAML"):
        env.pop(key, None)
    env["DEBUG_TEST_YAML"] = suite
    done = run_task(
        "bootstrap", "--platform", "rocm", "--repo", str(repo.path), "--dry-run", env=env
    )
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = yaml.safe_load(done.stdout)
    return loaded


def shape(pipeline: dict[str, Any]) -> list[Any]:
    """Each top-level entry: a group's own fields and step count, or "step"."""
    return [
        ({k: v for k, v in e.items() if k != "steps"}, len(e["steps"])) if "group" in e else "step"
        for e in pipeline["steps"]
    ]


def step_diffs(old: dict[str, Any], new: dict[str, Any], at: str = "") -> set[str]:
    """The dotted paths inside a step whose values differ (list items by index)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {
            path
            for key in old.keys() | new.keys()
            for path in (
                step_diffs(old[key], new[key], f"{at}{key}.")
                if key in old and key in new
                else {f"{at}{key}"}
            )
        }
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return {
            p
            for i, (o, n) in enumerate(zip(old, new, strict=True))
            for p in step_diffs(o, n, f"{at}{i}.")
        }
    return set() if old == new else {at.rstrip(".")}


def name(export_line: str) -> str:
    return export_line.removeprefix("export ").split("=", 1)[0]


def sorted_export_runs(commands: str, source: dict[str, Any], suite_env: dict[str, Any]) -> str:
    """TEST_COMMANDS with the suite's, then the step's, export lines each sorted by name."""
    lines = commands.split("\n")
    start, middle = 1, 1 + len(suite_env)
    end = middle + len(source.get("env") or {})
    return "\n".join(
        [
            *lines[:start],
            *sorted(lines[start:middle], key=name),
            *sorted(lines[middle:end], key=name),
            *lines[end:],
        ]
    )


def as_old(new: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """Our render with each difference from the old one undone:

    - docs/differences.md "AMD render: data, not a template": the image step runs
      `vllm-omni-ci build-image --platform rocm`, each test step `vllm-omni-ci run-tests
      --platform rocm`, instead of the two scripts;
    - NOT in docs/differences.md: minijinja-cli 2.3.1 walked the suite's and each step's
      `env` in sorted order (the stand-in sorts maps), so its `export` lines in TEST_COMMANDS
      came sorted; we keep the YAML's order. Same names and values, other order.
    """
    doc = copy.deepcopy(new)
    (image,) = doc["steps"][0]["steps"]
    assert image["commands"] == [NEW_BUILD]
    image["commands"] = [OLD_BUILD]
    suite_env = source.get("env") or {}
    tests = leaves(doc["steps"][1:])
    sources = leaves(source["steps"])
    assert len(tests) == len(sources)  # one suite, every step on amdproduction
    for got, src in zip(tests, sources, strict=True):
        assert got["command"] == NEW_RUN
        got["command"] = OLD_RUN
        got["env"]["TEST_COMMANDS"] = sorted_export_runs(
            got["env"]["TEST_COMMANDS"], src, suite_env
        )
    return doc


@pytest.mark.parametrize("suite", SUITES)
def test_the_old_render_of_a_real_suite_passes_the_schema(
    suite: str, checkout: GitRepo, tmp_path: Path
) -> None:
    old = old_of(checkout, suite, tmp_path)
    assert schema_problems(old) == []
    source = yaml.safe_load(
        (checkout.path / ".buildkite" / "amd" / f"test-amd-{suite}.yml").read_text()
    )
    assert len(leaves(old["steps"][1:])) == len(leaves(source["steps"]))


@pytest.mark.parametrize("suite", SUITES)
def test_old_and_new_renders_differ_only_where_explained(
    suite: str, checkout: GitRepo, tmp_path: Path
) -> None:
    old = old_of(checkout, suite, tmp_path)
    new = new_of(checkout, suite)
    source = yaml.safe_load(
        (checkout.path / ".buildkite" / "amd" / f"test-amd-{suite}.yml").read_text()
    )

    # Which fields differ at all: outside the steps nothing, the image step's command
    # and each test step's command and TEST_COMMANDS (the export order).
    assert old.keys() == new.keys() == {"env", "steps"}
    assert old["env"] == new["env"]
    assert shape(old) == shape(new)
    assert step_diffs(old["steps"][0], new["steps"][0]) == {"steps.0.commands.0"}
    per_step = set().union(
        *(
            step_diffs(o, n)
            for o, n in zip(leaves(old["steps"][1:]), leaves(new["steps"][1:]), strict=True)
        )
    )
    assert per_step == {"command", "env.TEST_COMMANDS"}
    # ... and exactly how.
    assert as_old(new, source) == old
    differences = (ROOT / "docs" / "differences.md").read_text(encoding="utf-8")
    assert "\n### AMD render: data, not a template\n" in differences
