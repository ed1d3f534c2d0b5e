"""Bootstrap mode of `upload-pipeline`: the U-row golden scenarios (pipeline spec §5.5).

The expected `if` strings are built here from the spec's named-expression table
by textual substitution (each name replaced by its text in parentheses, as
§3.2 says), independently of `ci.pipeline.bootstrap_mode`, which builds them
as `ifexpr` trees. The renderer runs on the real CUDA and NPU bootstrap files
of the vLLM-Omni corpus (read from ../shared at test time).
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci import skipci
from ci.errors import Failure, UserError
from ci.pipeline import bootstrap_mode, ifexpr
from ci.pipeline import scope as scopes
from ci.pipeline.bootstrap_mode import render_bootstrap
from ci.schema import schema_problems
from tests.conftest import ROOT, SHARED, need_shared
from tests.gitrepo import GitRepo, buildkite_env
from tests.inproc import run_inproc

CORPUS = SHARED / "vllm-omni" / ".buildkite"
CUDA_FILE = CORPUS / "cuda" / "bootstrap-upload-steps.yml"
NPU_FILE = CORPUS / "npu" / "bootstrap-upload-steps.yml"
NPU_IMAGES = ("image-build-a2", "image-build-a3", "image-build-a5", "image-build-310p")

# Spec §3.2, "Named expressions (exact text)", with the names still in place.
SPEC_NAMES = {
    "NIGHTLY_MAIN": 'build.branch == "main" && build.env("NIGHTLY") == "1"',
    "NIGHTLY_LABEL": '(NIGHTLY_MAIN) || (build.branch != "main" && '
    'build.pull_request.labels includes "nightly-test")',
    "WEEKLY_E2E": 'build.branch == "main" && build.env("WEEKLY") == "1"',
    "WEEKLY_MAIN": 'build.branch == "main" && (build.env("WEEKLY") == "1" || '
    'build.env("NON_CRITICAL") == "1")',
    "WEEKLY_LABEL": '(WEEKLY_MAIN) || (build.branch != "main" && '
    'build.pull_request.labels includes "weekly-test")',
    "READY_LABEL": 'build.branch != "main" && build.pull_request.labels includes "ready"',
    "MERGE_LABEL": 'build.branch != "main" && build.pull_request.labels includes "merge-test"',
    "MERGE_MAIN": 'build.branch == "main" && build.env("NIGHTLY") != "1" && '
    'build.env("WEEKLY") != "1" && build.env("NON_CRITICAL") != "1"',
    "READY_UPLOAD": "(WEEKLY_E2E) || (READY_LABEL)",
    "MERGE_UPLOAD": "(WEEKLY_E2E) || ((MERGE_MAIN) || (MERGE_LABEL))",
}
_NAME = re.compile(r"\b(" + "|".join(sorted(SPEC_NAMES, key=len, reverse=True)) + r")\b")


def expand(text: str) -> str:
    """Replace every name by its expanded text (each reference keeps its parentheses)."""
    while _NAME.search(text):
        text = _NAME.sub(lambda m: SPEC_NAMES[m.group(1)], text)
    return text


def wrapped(text: str) -> str:
    """The final extra pair of parentheses every non-bare expression gets."""
    return f"({expand(text)})"


def load(path: Path) -> dict[str, Any]:
    """A bootstrap file of the corpus in ../shared."""
    document = yaml.safe_load(need_shared(path).read_text())
    assert isinstance(document, dict)
    return document


def render(path: Path, paths: list[str] | None, platform: str = "") -> dict[str, Any]:
    decision = skipci.decide(paths)
    chosen = bootstrap_mode.parse_bootstrap_platform(platform, path)
    return render_bootstrap(load(path), decision, chosen).pipeline


def by_key(pipeline: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}

    def walk(steps: list[Any]) -> None:
        for step in steps:
            if isinstance(step, dict) and isinstance(step.get("steps"), list):
                walk(step["steps"])
            elif isinstance(step, dict):
                found[str(step.get("key", step.get("label", "?")))] = step

    walk(pipeline["steps"])
    return found


PRODUCT = ["vllm_omni/model.py"]
DOCS = ["docs/a.md", "README.md"]


# --------------------------------------------------------------------------- expressions


@pytest.mark.parametrize("name", sorted(SPEC_NAMES))
def test_named_expressions_render_the_spec_text(name: str) -> None:
    built = getattr(bootstrap_mode, name)
    assert ifexpr.render(built) == expand(SPEC_NAMES[name])
    # The if module reads back what it wrote (same tree, so `plan` agrees with the gate).
    assert ifexpr.render(ifexpr.parse(ifexpr.render(built))) == expand(SPEC_NAMES[name])
    assert ifexpr.is_evaluable(ifexpr.parse(ifexpr.render(built)))


def test_no_removed_nightly_labels_anywhere() -> None:
    texts = [ifexpr.render(getattr(bootstrap_mode, n)) for n in SPEC_NAMES]
    for removed in ("omni-test", "tts-test", "diffusion-x2iat-test", "diffusion-x2v-test"):
        assert not any(removed in t for t in texts)


# --------------------------------------------------------------------------- U rows


def test_u1_cuda_product_diff() -> None:
    steps = by_key(render(CUDA_FILE, PRODUCT))
    assert "if" not in steps["image-build"]
    assert steps["upload-ready-pipeline"]["if"] == (
        '((build.branch == "main" && build.env("WEEKLY") == "1") || '
        '(build.branch != "main" && build.pull_request.labels includes "ready"))'
    )
    assert steps["upload-nightly-pipeline"]["if"] == (
        '((build.branch == "main" && build.env("NIGHTLY") == "1") || '
        '(build.branch != "main" && build.pull_request.labels includes "nightly-test"))'
    )
    assert steps["upload-merge-pipeline"]["if"] == wrapped("MERGE_UPLOAD")
    assert steps["upload-weekly-pipeline"]["if"] == wrapped("WEEKLY_LABEL")


def test_u2_cuda_docs_only() -> None:
    pipeline = render(CUDA_FILE, DOCS)
    steps = by_key(pipeline)
    assert list(steps) == [
        "image-build",
        "upload-ready-pipeline",
        "upload-merge-pipeline",
        "upload-nightly-pipeline",
        "upload-weekly-pipeline",
    ]
    assert steps["image-build"]["if"] == (
        '((build.branch == "main" && build.env("NIGHTLY") == "1") || (build.branch == "main" '
        '&& (build.env("WEEKLY") == "1" || build.env("NON_CRITICAL") == "1")))'
    )
    e2e = '(build.branch == "main" && build.env("WEEKLY") == "1")'
    assert steps["upload-ready-pipeline"]["if"] == e2e
    assert steps["upload-merge-pipeline"]["if"] == e2e
    assert steps["upload-nightly-pipeline"]["if"] == wrapped("NIGHTLY_MAIN")
    assert steps["upload-weekly-pipeline"]["if"] == wrapped("WEEKLY_MAIN")
    text = yaml.safe_dump(pipeline)
    for label in ("nightly-test", "weekly-test", "merge-test", 'labels includes "ready"'):
        assert label not in text
    assert all(s.get("if") not in (False, "false") for s in steps.values())


def test_u3_npu_docs_only() -> None:
    steps = by_key(render(NPU_FILE, DOCS))
    assert "upload-ready-pipeline" not in steps
    nightly_main = '(build.branch == "main" && build.env("NIGHTLY") == "1")'
    assert steps["upload-nightly-pipeline"]["if"] == nightly_main
    for key in NPU_IMAGES:
        assert steps[key]["if"] == nightly_main


def test_u4_npu_product_diff() -> None:
    steps = by_key(render(NPU_FILE, PRODUCT))
    for key in NPU_IMAGES:
        assert "if" not in steps[key]
    assert steps["upload-ready-pipeline"]["if"] == (
        '(build.branch != "main" && build.pull_request.labels includes "ready")'
    )
    assert steps["upload-nightly-pipeline"]["if"] == wrapped("NIGHTLY_LABEL")


def test_u5_cuda_nightly_yaml_only() -> None:
    steps = by_key(render(CUDA_FILE, [".buildkite/cuda/test-nightly.yml"]))
    assert "upload-ready-pipeline" not in steps
    assert "upload-merge-pipeline" not in steps
    assert steps["image-build"]["if"] == wrapped("(NIGHTLY_LABEL) || (WEEKLY_LABEL)")
    assert steps["image-build"]["if"] not in (True, "true")
    assert steps["upload-weekly-pipeline"]["if"] == wrapped("WEEKLY_LABEL")
    assert steps["upload-nightly-pipeline"]["if"] == wrapped("NIGHTLY_LABEL")


def test_u6_cuda_ready_yaml_only() -> None:
    steps = by_key(render(CUDA_FILE, [".buildkite/cuda/test-ready.yml"]))
    assert "upload-merge-pipeline" not in steps
    assert steps["image-build"]["if"] == wrapped(
        "(READY_UPLOAD) || (NIGHTLY_LABEL) || (WEEKLY_LABEL)"
    )
    assert steps["upload-ready-pipeline"]["if"] == wrapped("READY_UPLOAD")


def test_u7_cuda_merge_yaml_only() -> None:
    steps = by_key(render(CUDA_FILE, [".buildkite/cuda/test-merge.yml"]))
    assert "upload-ready-pipeline" not in steps
    assert steps["upload-merge-pipeline"]["if"] == wrapped("MERGE_UPLOAD")
    assert steps["image-build"]["if"] == wrapped(
        "(MERGE_UPLOAD) || (NIGHTLY_LABEL) || (WEEKLY_LABEL)"
    )


def test_yaml_gated_npu_single_part_image_gate() -> None:
    # NPU L2 off: the image gate is the nightly part alone, still wrapped twice.
    steps = by_key(render(NPU_FILE, [".buildkite/cuda/test-ready.yml"]))
    assert "upload-ready-pipeline" not in steps
    assert steps["image-build-a2"]["if"] == wrapped("(NIGHTLY_LABEL)")
    on = by_key(render(NPU_FILE, [".buildkite/npu/test-npu-ready.yml"]))
    assert on["image-build-a2"]["if"] == wrapped("(READY_LABEL) || (NIGHTLY_LABEL)")
    assert on["upload-ready-pipeline"]["if"] == wrapped("READY_LABEL")


def test_u8_literal_true_and_false_ifs() -> None:
    document = load(CUDA_FILE)
    document["steps"] += [
        {"label": "off", "key": "other", "command": "true", "if": "false"},
        {"label": "on", "key": "other-on", "command": "true", "if": "true"},
    ]
    decision = skipci.decide(PRODUCT)
    rendered = render_bootstrap(document, decision, "cuda")
    steps = by_key(rendered.pipeline)
    assert "other" not in steps
    assert "if" not in steps["other-on"]
    assert "omit disabled bootstrap step 'other'" in rendered.log


def test_u9_group_with_only_disabled_children_is_omitted() -> None:
    document = {
        "steps": [
            {"group": "G", "steps": [{"key": "upload-merge-pipeline", "command": "true"}]},
            {"group": "H", "steps": [{"key": "x", "command": "true", "if": "false"}]},
            {"key": "image-build", "command": "true"},
        ]
    }
    rendered = render_bootstrap(document, skipci.decide(PRODUCT), "npu")  # NPU merge: false
    assert rendered.pipeline["steps"] == [{"key": "image-build", "command": "true"}]


def test_output_is_schema_valid_for_every_decision() -> None:
    for paths in (PRODUCT, DOCS, None, [".buildkite/cuda/test-nightly.yml"]):
        for path in (CUDA_FILE, NPU_FILE):
            assert schema_problems(render(path, paths)) == []


def test_document_shape_errors_are_the_spec_messages() -> None:
    with pytest.raises(Failure) as bad:
        bootstrap_mode.load_document("- a\n", "/r/x.yml")
    assert bad.value.problems == ("invalid bootstrap steps YAML for /r/x.yml",)
    assert bad.value.code == 1
    with pytest.raises(Failure) as no_steps:
        bootstrap_mode.load_document("steps: {}\n", "/r/x.yml")
    assert no_steps.value.problems == ("bootstrap steps YAML must contain steps: list in /r/x.yml",)


def test_platform_by_path_component_or_explicit() -> None:
    by_path = partial(bootstrap_mode.parse_bootstrap_platform, "")
    assert by_path(".buildkite/npu/bootstrap-upload-steps.yml") == "npu"
    assert by_path(".buildkite/amd/bootstrap-upload-steps.yml") == "cuda"
    assert by_path("npux/bootstrap-upload-steps.yml") == "cuda"
    assert bootstrap_mode.parse_bootstrap_platform("NPU", "a/cuda/x.yml") == "npu"
    with pytest.raises(UserError) as bad:
        bootstrap_mode.parse_bootstrap_platform("xpu", "a/x.yml")
    assert bad.value.code == 2


# --------------------------------------------------------------------------- --scope auto


@pytest.mark.parametrize(
    ("path", "branch", "env", "scope"),
    [
        (".buildkite/cuda/test-nightly.yml", "main", {"NIGHTLY": "1"}, "all"),  # F1
        (".buildkite/cuda/test-nightly.yml", "main", {}, "diff"),
        (".buildkite/cuda/test-nightly.yml", "feature", {"NIGHTLY": "1"}, "diff"),
        (".buildkite/cuda/test-weekly.yml", "main", {"WEEKLY": "1"}, "all"),  # F2
        (".buildkite/cuda/test-weekly.yml", "main", {"NON_CRITICAL": "1"}, "all"),
        (".buildkite/cuda/test-weekly.yml", "feature", {"WEEKLY": "1"}, "diff"),
        (".buildkite/cuda/test-ready.yml", "main", {"WEEKLY": "1"}, "e2e"),  # F3
        (".buildkite/cuda/test-merge.yml", "main", {"WEEKLY": "1"}, "e2e"),
        (".buildkite/cuda/test-ready.yml", "main", {"NON_CRITICAL": "1"}, "diff"),
        (".buildkite/cuda/test-merge.yml", "main", {"NIGHTLY": "1"}, "diff"),
        (".buildkite/cuda/test-merge.yml", "main", {}, "diff"),  # F4
        (".buildkite/npu/test-npu-nightly.yml", "main", {"NIGHTLY": "1"}, "all"),  # F8
        (".buildkite/npu/test-npu-ready.yml", "main", {"NIGHTLY": "1", "WEEKLY": "1"}, "diff"),
        (".buildkite/cuda/test-nightly.yml", "main", {"NIGHTLY": "true"}, "diff"),
        (".buildkite/amd/test-amd-nightly.yml", "main", {"NIGHTLY": "1"}, "diff"),
    ],
)
def test_auto_scope_table(path: str, branch: str, env: dict[str, str], scope: str) -> None:
    assert scopes.resolve("auto", path, branch, env) == scope


# --------------------------------------------------------------------------- CLI


def cli_env(**values: str) -> dict[str, str]:
    # PYTHONPATH: run this checkout's code even if the editable install points elsewhere.
    env = buildkite_env(None, **values)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture(scope="module")
def cuda_repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """Real CUDA/NPU bootstrap files in a git repo; HEAD on main changes only docs."""
    repo = GitRepo.create(tmp_path_factory.mktemp("bootmode") / "repo")
    shutil.copytree(need_shared(CORPUS / "cuda"), repo.path / ".buildkite" / "cuda")
    shutil.copytree(need_shared(CORPUS / "npu"), repo.path / ".buildkite" / "npu")
    repo.write("vllm_omni/model.py", "x = 1\n")
    repo.commit("base")
    repo.write("docs/a.md", "# doc\n")
    repo.commit("docs")
    return repo


def main_env(repo: GitRepo, **extra: str) -> dict[str, str]:
    return cli_env(
        BUILDKITE_BRANCH="main",
        BUILDKITE_PULL_REQUEST="false",
        BUILDKITE_COMMIT=repo.sha(),
        **extra,
    )


def test_cli_bootstrap_file_docs_only_on_main(cuda_repo: GitRepo) -> None:
    done = run_inproc(
        "upload-pipeline",
        ".buildkite/cuda/bootstrap-upload-steps.yml",
        "--repo",
        str(cuda_repo.path),
        env=main_env(cuda_repo),
    )
    assert done.code == 0, done.stderr
    steps = by_key(yaml.safe_load(done.stdout))
    assert steps["upload-ready-pipeline"]["if"] == wrapped("WEEKLY_E2E")
    assert "[skip-ci]: CI skipped — docs or pytest skip-mark changes only" in done.stderr
    # Bootstrap mode leaves the step commands as they are (the bootstrap task rewrites them).
    assert "upload_pipeline.py" in steps["upload-nightly-pipeline"]["commands"][0]


def test_u10_all_and_e2e_are_ignored(cuda_repo: GitRepo) -> None:
    outputs = set()
    for flags in ([], ["--all"], ["--e2e"], ["--scope", "auto"]):
        done = run_inproc(
            "upload-pipeline",
            ".buildkite/cuda/bootstrap-upload-steps.yml",
            "--repo",
            str(cuda_repo.path),
            *flags,
            env=main_env(cuda_repo),
        )
        assert done.code == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1


def test_cli_platform_flag_overrides_the_path(cuda_repo: GitRepo) -> None:
    args = ("upload-pipeline", ".buildkite/cuda/bootstrap-upload-steps.yml")
    env = main_env(cuda_repo)
    as_npu = run_inproc(*args, "--platform", "npu", "--repo", str(cuda_repo.path), env=env)
    assert as_npu.code == 0, as_npu.stderr
    # NPU docs-only: ready (and merge, weekly) omitted.
    assert set(by_key(yaml.safe_load(as_npu.stdout))) == {
        "image-build",
        "upload-nightly-pipeline",
    }
    bad = run_inproc(*args, "--platform", "xpu", "--repo", str(cuda_repo.path), env=env)
    assert bad.code == 2
    assert bad.stdout == ""
    assert "error: --platform: bootstrap-upload-steps.yml exists for cuda and npu" in bad.stderr


def test_cli_invalid_bootstrap_file_exits_1(tmp_path: Path) -> None:
    repo = GitRepo.create(tmp_path / "bad", origin=False)
    repo.write(".buildkite/cuda/bootstrap-upload-steps.yml", "steps: nope\n")
    repo.commit("bad")
    done = run_inproc(
        "upload-pipeline",
        ".buildkite/cuda/bootstrap-upload-steps.yml",
        "--repo",
        str(repo.path),
        env=cli_env(),
    )
    assert done.code == 1
    path = repo.path.resolve() / ".buildkite/cuda/bootstrap-upload-steps.yml"
    assert done.stderr.strip().endswith(
        f"error: bootstrap steps YAML must contain steps: list in {path}"
    )
    assert done.stdout == ""


def test_a_renamed_label_reaches_the_cuda_and_the_npu_gates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gates read the tier labels from the topology: rename one there, and both
    platforms' gates follow (a copy typed into the gates would keep the old name)."""
    from ci import topology

    normal = skipci.Decision(skip_all=False, yaml_gated=False, message="normal")
    monkeypatch.setitem(topology.LABELS, topology.READY, "ready-renamed")  # type: ignore[index]
    try:
        renamed = importlib.reload(bootstrap_mode)
        for platform in ("cuda", "npu"):
            ready = renamed.gates(normal, platform).ready
            assert not isinstance(ready, bool)
            assert 'labels includes "ready-renamed"' in ifexpr.render(ready), platform
            assert 'labels includes "ready"' not in ifexpr.render(ready), platform
    finally:
        monkeypatch.undo()
        importlib.reload(bootstrap_mode)
