"""`vllm-omni-ci migrate`: the done rows of docs/migration.md applied to a vLLM-Omni checkout.

A temporary checkout holds the real `.buildkite/` corpus (../shared/vllm-omni,
copied at test time), a pre-commit config and the four CI Dockerfiles written
here; `--delete-replaced` also gets the original scripts (../shared/vllm-omni-scripts).
Every run goes through the CLI's code path, as a maintainer would type it, in this
process (`tests.inproc.run_inproc`): no test here has the process as its subject.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci.bootstraps import CUDA_IMAGE_COMMAND, XPU_COMMAND, upload_command
from ci.migrate import edits, gates
from ci.migrate.rewrites import REPLACED_SCRIPTS, REWRITES, rewrite
from ci.pipeline.lint import lint, problem_lines
from ci.runner import xpu, xputests
from tests.conftest import SHARED, need_shared
from tests.corpus import MISSING_KEY, pyproject_text, register_missing_key
from tests.gitrepo import GitRepo, buildkite_env, copy_repo
from tests.inproc import run_task
from tests.migrate_fixture import PRE_COMMIT
from tests.migrate_fixture import make_checkout as make_seed_checkout

CORPUS = SHARED / "vllm-omni" / ".buildkite"
SCRIPTS = SHARED / "vllm-omni-scripts"
ENTRY_PIPELINES = (".buildkite/cuda/pipeline.yml", ".buildkite/npu/pipeline-npu.yml")
OLD_NAMES = tuple(sorted({Path(p).name for p in REPLACED_SCRIPTS}))
# The CUDA upload steps' inline shell around the old uploader: part of the old command.
EXTRA_SHELL = re.compile(r'^\s*(EXTRA="[^"]*"|if \[.*; then|fi)\s*$')

DOCKERFILES = {
    "docker/Dockerfile.rocm": """\
        ARG BASE_IMAGE=rocm/vllm:latest
        FROM ${BASE_IMAGE} AS deps
        RUN pip install -r requirements/rocm.txt
        RUN bash tools/install_torchcodec_rocm.sh \\
            --no-build-isolation

        # The test image: the checkout on top of the dependencies.
        FROM deps AS test
        COPY . /app/vllm-omni
        """,
    "docker/Dockerfile.ci": """\
        FROM vllm/vllm-openai:v0.31.0 AS deps
        RUN pip install -r requirements/cuda.txt

        FROM deps
        COPY . /workspace
        """,
    "docker/Dockerfile.npu.ci": """\
        ARG VLLM_ASCEND_IMAGE=quay.io/ascend/vllm-ascend
        FROM ${VLLM_ASCEND_IMAGE}:v0.11.0
        RUN pip install -e .
        """,
    "docker/Dockerfile.xpu": """\
        FROM intel/vllm:xpu AS vllm-omni
        RUN pip install -e .
        FROM vllm-omni AS vllm-omni-openai
        ENTRYPOINT ["vllm"]
        # end of file
        """,
}
PIN = 'RUN python3 -m pip install --no-cache-dir "vllm-omni-ci=={}"'


def _writable(tree: Path) -> None:
    for path in [tree, *tree.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def make_checkout(root: Path, *, scripts: bool = False, register_key: bool = True) -> Path:
    """A vLLM-Omni checkout: the corpus, the pre-commit config, the Dockerfiles, and what
    the `lint-pipelines` gate needs (tests/corpus.py): the marker registry and, unless
    `register_key` is false, the one source-registry key the corpus lacks."""
    shutil.copytree(need_shared(CORPUS), root / ".buildkite", copy_function=shutil.copy)
    if scripts:
        shutil.copytree(need_shared(SCRIPTS), root, copy_function=shutil.copy, dirs_exist_ok=True)
        for test in ("test_skip_ci.py", "test_upload_pipeline.py", "test_amd_pipeline.py"):
            (root / "tests/buildkite").mkdir(parents=True, exist_ok=True)
            (root / "tests/buildkite" / test).write_text("def test_old(): pass\n")
        for hook in ("check_test_marks.py", "check_buildkite.py"):
            (root / "tools/pre_commit").mkdir(parents=True, exist_ok=True)
            (root / "tools/pre_commit" / hook).write_text("print('old hook')\n")
    _writable(root)
    (root / "pyproject.toml").write_text(pyproject_text())
    if register_key:
        register_missing_key(root)
    (root / ".pre-commit-config.yaml").write_text(PRE_COMMIT)
    for rel, text in DOCKERFILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return make_checkout(tmp_path / "omni")


def migrate(repo: Path, *args: str) -> Any:
    return run_task("migrate", "--repo", str(repo), *args)


def snapshot(repo: Path) -> dict[str, str]:
    return {
        p.relative_to(repo).as_posix(): p.read_text()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def diff_files(diff: str) -> dict[str, tuple[list[str], list[str]]]:
    """path -> (removed lines, added lines) of a unified diff."""
    found: dict[str, tuple[list[str], list[str]]] = {}
    current = ""
    for line in diff.splitlines():
        if line.startswith("--- a/"):
            current = line[len("--- a/") :]
            found[current] = ([], [])
        elif line == "--- /dev/null":  # a new file: its name is on the `+++` line
            current = ""
        elif line.startswith("+++ b/") and not current:
            current = line[len("+++ b/") :]
            found[current] = ([], [])
        elif line.startswith(("+++ ", "@@ ", " ", "\\")):
            continue
        elif line.startswith("-"):
            found[current][0].append(line[1:])
        elif line.startswith("+"):
            found[current][1].append(line[1:])
        else:
            raise AssertionError(f"not a unified diff line: {line!r}")
    return found


def without_commands(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: without_commands(v) for k, v in value.items() if k not in ("command", "commands")
        }
    if isinstance(value, list):
        return [without_commands(v) for v in value]
    return value


def commands(value: Any) -> list[str]:
    if isinstance(value, dict):
        own = [value[k] for k in ("command", "commands") if k in value]
        flat = [c for v in own for c in (v if isinstance(v, list) else [v])]
        return flat + [
            c for k, v in value.items() if k not in ("command", "commands") for c in commands(v)
        ]
    if isinstance(value, list):
        return [c for v in value for c in commands(v)]
    return []


def kept_lines(text: str) -> list[str]:
    """Comments, blank lines and lines with an anchor or an alias."""
    return [
        line
        for line in text.splitlines()
        if not line.strip() or line.lstrip().startswith("#") or re.search(r"[&*][\w-]+", line)
    ]


# --------------------------------------------------------------------------- the table

UP = "python3 .buildkite/common/scripts/upload_pipeline.py"
B = "bash .buildkite/"
CLI = "vllm-omni-ci"
NPU_OLD = B + 'npu/scripts/build-npu-image.sh Dockerfile.npu.ci "$${VLLM_IMAGE_TAG}"'
EXTRA = (
    'EXTRA=""\nif [ "${WEEKLY:-}" = "1" ] && [ "${BUILDKITE_BRANCH}" = "main" ]; then\n'
    '  EXTRA="--e2e"\nfi\n'
)
COV = ".buildkite/common/scripts/run_cov_split.sh"
CASES = [
    ("cuda-image", B + "cuda/scripts/build-ci-image.sh", CUDA_IMAGE_COMMAND),
    ("rocm-image", B + "amd/scripts/build-ci-image.sh", f"{CLI} build-image --platform rocm"),
    ("npu-image-a2", NPU_OLD, f"{CLI} build-image --platform npu --variant a2"),
    ("npu-image-a3", NPU_OLD + " -a3", f"{CLI} build-image --platform npu --variant a3"),
    ("npu-image-a5", NPU_OLD + " -a5", f"{CLI} build-image --platform npu --variant a5"),
    ("npu-image-310p", NPU_OLD + " -310p", f"{CLI} build-image --platform npu --variant 310p"),
    (
        "entry",
        f"{UP} --upload .buildkite/cuda/bootstrap-upload-steps.yml",
        f"{CLI} bootstrap --platform cuda",
    ),
    ("entry", f"{UP} --upload .buildkite/npu/pipeline-npu.yml", f"{CLI} bootstrap --platform npu"),
    (
        "upload",
        f"{UP} --upload .buildkite/npu/test-npu-ready.yml\n",
        upload_command(".buildkite/npu/test-npu-ready.yml") + "\n",
    ),
    (
        "upload",
        f"{UP} --upload --all .buildkite/cuda/test-weekly.yml",
        upload_command(".buildkite/cuda/test-weekly.yml"),
    ),
    (
        "upload",
        f"{EXTRA}{UP} --upload $$EXTRA .buildkite/cuda/test-ready.yml\n",
        upload_command(".buildkite/cuda/test-ready.yml") + "\n",
    ),
    ("amd-upload", f"{UP} --amd --upload", f"{CLI} bootstrap --platform rocm"),
    ("amd-bootstrap", B + "amd/scripts/bootstrap-amd-omni.sh", f"{CLI} bootstrap --platform rocm"),
    (
        "amd-test",
        f"cd /app && {B}amd/scripts/run-amd-test.sh",
        f"cd /app && {CLI} run-tests --platform rocm",
    ),
    (
        "cov-split",
        f"export X=1\n{COV} \\\n  --model-id q \\\n  -- -m 'a and b'",
        f"export X=1\n{CLI} cov-split \\\n  --model-id q \\\n  -- -m 'a and b'",
    ),
    ("cov-split", f"bash {COV} --model-id m", f"{CLI} cov-split --model-id m"),
    ("xpu-test", B + "intel/scripts/run-xpu-test.sh", XPU_COMMAND),
    (
        "intel-bootstrap",
        B + "intel/scripts/bootstrap-intel-omni.sh",
        f"{CLI} bootstrap --platform xpu",
    ),
    (
        "skip-ci",
        "python3 .buildkite/common/scripts/skip_ci.py gate intel l2",
        f"{CLI} skip-ci --platform intel --level l2",
    ),
    (
        "release-nightly",
        B + "release/scripts/publish-release-images.sh nightly",
        f"{CLI} release.publish-images --mode nightly",
    ),
    (
        "release",
        B + "release/scripts/publish-release-images.sh",
        f"{CLI} release.publish-images --mode release",
    ),
    (
        "release",
        B + "release/scripts/publish-release-images.sh release",
        f"{CLI} release.publish-images --mode release",
    ),
    (
        "cleanup-nightly",
        B + "release/scripts/cleanup-nightly-builds.sh",
        f"{CLI} release.cleanup-nightly",
    ),
]


@pytest.mark.parametrize(
    ("name", "old", "new"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_a_row_rewrites_its_old_command_and_leaves_the_new_one(
    name: str, old: str, new: str
) -> None:
    assert rewrite(old) == (new, tuple(r for r in REWRITES if r.name == name))
    assert rewrite(new) == (new, ())


def test_every_row_has_a_case() -> None:
    assert {r.name for r in REWRITES} == {c[0] for c in CASES}


@pytest.mark.parametrize(
    "command",
    [
        'sh -c "python3 .buildkite/common/scripts/upload_pipeline.py --weird"',
        "bash -x .buildkite/amd/scripts/run-amd-test.sh",
        "bash .buildkite/amd/scripts/run-amd-test.sh 'pytest tests'",
        "bash .buildkite/release/scripts/publish-release-images.sh --dry-run",
        'bash .buildkite/npu/scripts/build-npu-image.sh Dockerfile.other "$${VLLM_IMAGE_TAG}"',
        f"{UP} .buildkite/cuda/test-ready.yml",
        f"{UP} --upload .buildkite/amd/bootstrap-upload-steps.yml",
    ],
)
def test_a_shape_no_row_understands_is_left_as_it_is(command: str) -> None:
    assert rewrite(command) == (command, ())


# --------------------------------------------------------------------------- the corpus


def test_the_diff_touches_only_old_commands_then_apply_then_nothing(checkout: Path) -> None:
    before = snapshot(checkout)
    shown = migrate(checkout)
    assert shown.returncode == 1, shown.stderr
    assert snapshot(checkout) == before, "without --apply nothing is written"
    changed = diff_files(shown.stdout)
    assert set(changed) == {
        ".buildkite/amd/bootstrap-upload-steps.yml",
        ".buildkite/cuda/bootstrap-upload-steps.yml",
        ".buildkite/cuda/pipeline.yml",
        ".buildkite/cuda/test-merge.yml",
        ".buildkite/intel/pipeline-intel.yml",
        ".buildkite/npu/bootstrap-upload-steps.yml",
        ".buildkite/npu/pipeline-npu.yml",
        ".buildkite/release/release-pipeline.yml",
        ".pre-commit-config.yaml",
    }
    for path, (removed, added) in changed.items():
        if path in ENTRY_PIPELINES:
            continue  # the second document goes: checked below
        for line in removed:
            assert (
                any(n in line for n in OLD_NAMES)
                or EXTRA_SHELL.match(line)
                or (
                    path == ".pre-commit-config.yaml"
                    and re.match(r"\s*(entry|language|additional_dependencies):", line)
                )
            ), (path, line)
        for line in added:
            assert "vllm-omni-ci" in line or line.strip() in (
                "language: system",
                "pass_filenames: false",
            ), (path, line)
    assert "note: no --pin: " in shown.stderr
    assert "manual:" not in shown.stderr

    applied = migrate(checkout, "--apply")
    assert applied.returncode == 0, applied.stderr
    assert f"migrate: {len(changed)} files changed" in applied.stderr
    after = snapshot(checkout)
    again = migrate(checkout)
    assert (again.returncode, again.stdout) == (0, ""), again.stderr
    assert snapshot(checkout) == after

    for rel in sorted(changed):
        old, new = before[rel], after[rel]
        if rel in ENTRY_PIPELINES:
            assert "second document removed" in shown.stderr and rel in shown.stderr
            old = old[: old.index("\n---\n")].rstrip("\n") + "\n"
        assert kept_lines(new) == kept_lines(old), rel
        if rel == ".pre-commit-config.yaml":
            continue  # its hooks: test_the_pre_commit_hooks_run_vllm_omni_ci
        old_docs, new_docs = list(yaml.safe_load_all(old)), list(yaml.safe_load_all(new))
        assert [without_commands(d) for d in new_docs] == [without_commands(d) for d in old_docs]
        assert not any(n in c for c in commands(new_docs) for n in OLD_NAMES), rel
        assert len(commands(new_docs)) == len(commands(old_docs)), rel


def test_the_new_commands_are_those_the_bootstraps_write(checkout: Path) -> None:
    assert migrate(checkout, "--apply").returncode == 0
    load = lambda rel: yaml.safe_load((checkout / rel).read_text())  # noqa: E731
    cuda = load(".buildkite/cuda/bootstrap-upload-steps.yml")["steps"]
    assert cuda[0]["commands"] == [CUDA_IMAGE_COMMAND]
    assert cuda[1]["commands"] == [upload_command(".buildkite/cuda/test-ready.yml") + "\n"]
    npu = load(".buildkite/npu/bootstrap-upload-steps.yml")["steps"]
    assert [s["command"] for s in npu[:4]] == [
        f"vllm-omni-ci build-image --platform npu --variant {v}" for v in ("a2", "a3", "a5", "310p")
    ]
    assert load(".buildkite/cuda/pipeline.yml")["steps"][0]["commands"] == [
        "vllm-omni-ci bootstrap --platform cuda"
    ]
    assert (
        load(".buildkite/intel/pipeline-intel.yml")["steps"][0]["steps"][0]["command"]
        == XPU_COMMAND
    )
    merge = (checkout / ".buildkite/cuda/test-merge.yml").read_text()
    assert "            vllm-omni-ci cov-split \\\n              --model-id qwen3_tts \\\n" in merge


@pytest.fixture(scope="module")
def committed_checkout(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """`make_checkout` committed in a git repo with a bare origin, plus one model change:
    built once for the module; tests migrate a copy (`copy_repo`)."""
    repo = GitRepo.create(make_checkout(tmp_path_factory.mktemp("committed") / "omni"))
    repo.commit("corpus")
    repo.commit_files({"vllm_omni/model.py": "x = 1\n"})
    return repo


@pytest.mark.parametrize("platform", ["cuda", "npu", "xpu"])
def test_a_migrated_checkout_bootstraps_to_the_same_pipeline(
    committed_checkout: GitRepo, tmp_path: Path, platform: str
) -> None:
    """The bootstrap rewrites old commands at upload time: the migrated YAML gives the same."""
    repo = copy_repo(committed_checkout, tmp_path)
    env = buildkite_env(NIGHTLY="1")
    args = ("bootstrap", "--platform", platform, "--repo", str(repo.path), "--dry-run")
    before = run_task(*args, env=env)
    assert before.returncode == 0 and "steps:" in before.stdout, before.stderr
    assert migrate(repo.path, "--apply").returncode == 0
    after = run_task(*args, env=env)
    assert (after.returncode, after.stdout) == (0, before.stdout), after.stderr


def test_the_pre_commit_hooks_run_vllm_omni_ci(checkout: Path) -> None:
    assert migrate(checkout, "--apply").returncode == 0
    text = (checkout / ".pre-commit-config.yaml").read_text()
    hooks = {h["id"]: h for r in yaml.safe_load(text)["repos"] for h in r["hooks"]}
    assert hooks["check-mark"] == {
        "id": "check-mark",
        "name": "Check test markers",
        "entry": "vllm-omni-ci check-marks --repo . --",
        "language": "system",
        "files": "^tests/",
    }
    assert hooks["check-buildkite"] == {
        "id": "check-buildkite",
        "name": "Check Buildkite pipelines",
        "entry": "vllm-omni-ci lint-pipelines --repo .",
        "language": "system",
        "pass_filenames": False,
        "files": "^\\.buildkite/",
    }
    old = {h["id"]: h for r in yaml.safe_load(PRE_COMMIT)["repos"] for h in r["hooks"]}
    assert hooks["ruff"] == old["ruff"] and hooks["check-spdx-header"] == old["check-spdx-header"]
    assert "        files: ^\\.buildkite/  # every pipeline YAML\n" in text
    assert kept_lines(text) == kept_lines(PRE_COMMIT)


def test_pin_writes_the_install_and_the_tools_image_once_and_replaces_it(checkout: Path) -> None:
    assert migrate(checkout, "--apply").returncode == 0
    first = migrate(checkout, "--pin", "1.2.3")
    assert first.returncode == 1
    changed = diff_files(first.stdout)
    assert set(changed) == {*ENTRY_PIPELINES, *DOCKERFILES}
    assert all(not removed for removed, _ in changed.values()), "a pin only adds lines"
    assert "note: no --pin" not in first.stderr
    assert migrate(checkout, "--pin", "1.2.3", "--apply").returncode == 0
    again = migrate(checkout, "--pin", "1.2.3")
    assert (again.returncode, again.stdout) == (0, ""), again.stderr

    rocm = (checkout / "docker/Dockerfile.rocm").read_text().splitlines()
    assert rocm.index(PIN.format("1.2.3")) == rocm.index("    --no-build-isolation") + 1
    ci = (checkout / "docker/Dockerfile.ci").read_text().splitlines()
    assert ci[:3] == [
        "FROM vllm/vllm-openai:v0.31.0 AS deps",
        "RUN pip install -r requirements/cuda.txt",
        PIN.format("1.2.3"),
    ]
    xpu = (checkout / "docker/Dockerfile.xpu").read_text().splitlines()
    assert xpu[-2:] == [PIN.format("1.2.3"), "# end of file"]
    assert (
        (checkout / "docker/Dockerfile.npu.ci")
        .read_text()
        .endswith("RUN pip install -e .\n" + PIN.format("1.2.3") + "\n")
    )
    for rel in ENTRY_PIPELINES:
        step = yaml.safe_load((checkout / rel).read_text())["steps"][0]
        assert step["plugins"] == [
            {
                "docker#v5.12.0": {
                    "image": "vllm-omni-ci/tools:1.2.3",
                    "mount-buildkite-agent": True,
                    "propagate-environment": True,
                }
            }
        ]

    bumped = migrate(checkout, "--pin", "1.2.4")
    assert bumped.returncode == 1
    for removed, added in diff_files(bumped.stdout).values():
        assert [line.replace("1.2.3", "1.2.4") for line in removed] == added and removed
    assert migrate(checkout, "--pin", "1.2.4", "--apply").returncode == 0
    texts = snapshot(checkout)
    assert not any("1.2.3" in texts[rel] for rel in (*ENTRY_PIPELINES, *DOCKERFILES))
    assert migrate(checkout).stdout == ""


def test_a_missing_dockerfile_is_listed_not_an_error(checkout: Path) -> None:
    (checkout / "docker/Dockerfile.xpu").unlink()
    done = migrate(checkout, "--pin", "1.0", "--apply")
    assert done.returncode == 0, done.stderr
    assert "note: docker/Dockerfile.xpu: not found" in done.stderr
    assert PIN.format("1.0") in (checkout / "docker/Dockerfile.ci").read_text()


GIT_PIN = "git+https://github.com/vllm-project/vllm-omni-ci@v0.1.0"
WHEEL = "https://example.org/wheels/vllm_omni_ci-0.1.0rc1-py3-none-any.whl"


@pytest.mark.parametrize(
    ("pin", "requirement", "tag"),
    [
        ("0.1.0", "vllm-omni-ci==0.1.0", "0.1.0"),
        (GIT_PIN, f"vllm-omni-ci @ {GIT_PIN}", "0.1.0"),
        (
            "git+ssh://git@github.com/org/vllm-omni-ci@0.2.0.post1",
            "vllm-omni-ci @ git+ssh://git@github.com/org/vllm-omni-ci@0.2.0.post1",
            "0.2.0.post1",
        ),
        (WHEEL, f"vllm-omni-ci @ {WHEEL}", "0.1.0rc1"),
    ],
)
def test_pin_takes_a_version_a_git_url_at_a_tag_or_a_wheel_url(
    checkout: Path, pin: str, requirement: str, tag: str
) -> None:
    """A URL is a PEP 508 direct reference; the tools image is tagged by the URL's version."""
    done = migrate(checkout, "--pin", pin, "--apply")
    assert done.returncode == 0, done.stderr
    line = f'RUN python3 -m pip install --no-cache-dir "{requirement}"'
    for rel in DOCKERFILES:
        assert (checkout / rel).read_text().splitlines().count(line) == 1, rel
    for rel in ENTRY_PIPELINES:
        plugin = yaml.safe_load((checkout / rel).read_text())["steps"][0]["plugins"][0]
        assert plugin["docker#v5.12.0"]["image"] == f"vllm-omni-ci/tools:{tag}"
    again = migrate(checkout, "--pin", pin)
    assert (again.returncode, again.stdout) == (0, ""), again.stderr


def test_a_url_pin_and_a_version_pin_replace_each_other(checkout: Path) -> None:
    assert migrate(checkout, "--pin", GIT_PIN, "--apply").returncode == 0
    to_version = migrate(checkout, "--pin", "0.1.0")
    changed = diff_files(to_version.stdout)
    assert set(changed) == set(DOCKERFILES), "the tools image keeps its tag 0.1.0"
    for removed, added in changed.values():
        assert [line.replace(f" @ {GIT_PIN}", "==0.1.0") for line in removed] == added
    assert migrate(checkout, "--pin", "0.1.0", "--apply").returncode == 0
    assert migrate(checkout, "--pin", WHEEL, "--apply").returncode == 0
    texts = snapshot(checkout)
    assert all(f'"vllm-omni-ci @ {WHEEL}"' in texts[rel] for rel in DOCKERFILES)
    assert not any("vllm-omni-ci==" in texts[rel] for rel in DOCKERFILES)
    assert all("vllm-omni-ci/tools:0.1.0rc1" in texts[rel] for rel in ENTRY_PIPELINES)


ACCEPTED = "accepted: a version (1.2.3, 1.2.3rc1), git+https://"


@pytest.mark.parametrize(
    ("pin", "messages"),
    [
        ("main", [f"error: --pin: 'main' is not a version or a URL; {ACCEPTED}"]),
        (
            "http://example.org/vllm_omni_ci-0.1.0-py3-none-any.whl",
            ["error: --pin: scheme 'http' is not accepted (https, git+https, git+ssh)"],
        ),
        ("git://github.com/o/vllm-omni-ci@v0.1.0", ["error: --pin: scheme 'git' is not"]),
        ("file:///wheels/vllm_omni_ci-0.1.0-py3-none-any.whl", ["error: --pin: scheme 'file'"]),
        (
            "git+https://github.com/o/vllm-omni-ci",
            [
                "error: --pin: 'git+https://github.com/o/vllm-omni-ci' says no version for the"
                f" tools image; {ACCEPTED}"
            ],
        ),
        ("git+https://github.com/o/vllm-omni-ci@main", ["error: --pin: 'git+https://"]),
        ("https://example.org/vllm_omni_ci-0.1.0.tar.gz", ["error: --pin: 'https://"]),
        ("https://example.org/other_tool-0.1.0-py3-none-any.whl", ["error: --pin: 'https://"]),
        ("https://example.org/vllm_omni_ci-latest-py3-none-any.whl", ["error: --pin: 'https://"]),
        ("https://", ["error: --pin: 'https://' names no host and path", "error: --pin: "]),
        (
            "https://me:token@example.org/vllm_omni_ci-0.1.0-py3-none-any.whl",
            [
                "error: --pin: 'https://me:token@example.org/vllm_omni_ci-0.1.0-py3-none-any.whl'"
                " carries credentials"
            ],
        ),
        (
            "git+ssh://git:secret@github.com/o/vllm-omni-ci@v0.1.0",
            ["error: --pin: 'git+ssh://git:secret@github.com/o/vllm-omni-ci@v0.1.0' carries"],
        ),
        (
            "git+https://github.com/o/vllm-omni-ci@v0.1.0; curl x|sh",
            [
                "error: --pin: 'git+https://github.com/o/vllm-omni-ci@v0.1.0; curl x|sh' holds"
                " ' ', ';', '|': a pinned URL is written into Dockerfiles and YAML, so it may"
                " hold only letters, digits and . _ ~ : / @ + % -",
                "error: --pin: ",
            ],  # the tag is no version either
        ),
        ('https://e.org/vllm_omni_ci-0.1.0-py3-none-any.whl"', ["error: --pin: ", "error: "]),
        ("https://e.org/$(id)/vllm_omni_ci-0.1.0-py3-none-any.whl", ["error: --pin: "]),
        ("https://e.org/vllm_omni_ci-0.1.0-py3-none-any.whl#x", ["error: --pin: ", "error: "]),
        ("git+https://e.org/o/r@v1\nRUN x", ["error: --pin: ", "error: "]),
        ("http://e.org/ x", ["error: --pin: 'http://e.org/ x' holds ' '", "error: --pin: scheme"]),
    ],
)
def test_a_pin_is_refused_before_any_edit_one_line_per_problem(
    checkout: Path, pin: str, messages: list[str]
) -> None:
    before = snapshot(checkout)
    done = migrate(checkout, "--pin", pin, "--apply")
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == len(messages), done.stderr
    assert all(line.startswith(m) for line, m in zip(lines, messages, strict=True)), lines
    assert done.stdout == "" and snapshot(checkout) == before


# ----------------------------------------------------------- the lint-pipelines gate


WOULD_FAIL = "would fail: lint-pipelines: "
UNKNOWN = "unknown source_file_dependencies"


def test_a_key_the_registry_lacks_would_fail_and_keeps_exit_1(tmp_path: Path) -> None:
    """The real corpus: test-nightly.yml names a key its registry lacks (tests/corpus.py)."""
    repo = make_checkout(tmp_path / "omni", register_key=False)
    before = snapshot(repo)
    shown = migrate(repo)
    assert shown.returncode == 1 and shown.stdout
    assert snapshot(repo) == before, "the gate runs on a copy"
    failing = [line for line in shown.stderr.splitlines() if line.startswith("would fail:")]
    assert failing == [
        f"{WOULD_FAIL}.buildkite/cuda/test-nightly.yml: {UNKNOWN} '{MISSING_KEY}' in step "
        "':full_moon: JoyAI-Image-Edit · Accuracy Test'; did you mean "
        "'diffusion_qwen_image_accuracy', 'diffusion_hunyuan_image3_accuracy', "
        "'diffusion_cosmos3_accuracy'? (all 53 keys: `source_file_dependencies:` in "
        ".buildkite/common/ci_source_file_dependencies.yml)"
    ]
    applied = migrate(repo, "--apply")
    assert applied.returncode == 1 and failing[0] in applied.stderr
    # No edit is pending, and still the migration is not done.
    again = migrate(repo)
    assert (again.returncode, again.stdout) == (1, "")
    assert [line for line in again.stderr.splitlines() if line in failing] == failing
    register_missing_key(repo)
    assert migrate(repo).returncode == 0


def test_a_planted_unknown_key_would_fail_after_migration(checkout: Path) -> None:
    nightly = checkout / ".buildkite/cuda/test-nightly.yml"
    document = yaml.safe_load(nightly.read_text())
    document["steps"].append({"label": "planted", "command": "c", "source_file_dependencies": "x"})
    nightly.write_text(yaml.safe_dump(document, sort_keys=False))
    done = migrate(checkout, "--pin", "0.1.0", "--apply")
    assert done.returncode == 1
    assert f"{WOULD_FAIL}.buildkite/cuda/test-nightly.yml: {UNKNOWN} 'x' in step 'planted'" in (
        done.stderr
    )
    assert "migrate: " in done.stderr, "the edits are written all the same"


def test_the_gate_reads_the_edits_not_the_checkout(checkout: Path) -> None:
    """What the gate finds is the migrated result's: an edit's problem is reported, the
    checkout is not touched, and a problem of the checkout names the checkout's path."""
    rel = ".buildkite/cuda/test-ready.yml"
    old = (checkout / rel).read_text()
    planted = old + "  - label: planted\n    command: c\n    source_file_dependencies: x\n"
    before = snapshot(checkout)
    found = gates.would_fail(checkout, [edits.FileChange(rel, old, planted)])
    assert [line.split(";")[0] for line in found] == [f"{rel}: {UNKNOWN} 'x' in step 'planted'"]
    assert gates.would_fail(checkout, []) == []
    assert snapshot(checkout) == before
    (checkout / "pyproject.toml").unlink()
    found = gates.would_fail(checkout, [])
    assert found == [f"missing pytest marker registry: {checkout.resolve() / 'pyproject.toml'}"]


def test_a_file_the_gate_cannot_read_is_a_problem_and_never_hangs(checkout: Path) -> None:
    """Read where it is, so in the words `lint-pipelines` has for the checkout itself."""
    os.mkfifo(checkout / ".buildkite/cuda/test-fifo.yml")
    found = gates.would_fail(checkout, [])
    assert len(found) == 1 and found[0].endswith(
        "test-fifo.yml: cannot read: a FIFO, not a regular file"
    )
    assert found == problem_lines(checkout, lint(checkout))


def test_a_call_no_row_understands_is_listed_with_its_line(checkout: Path) -> None:
    ready = checkout / ".buildkite/cuda/test-ready.yml"
    weird = 'sh -c "python3 .buildkite/common/scripts/upload_pipeline.py --weird"'
    ready.write_text(ready.read_text() + f"  - label: weird\n    commands:\n      - {weird}\n")
    line = len(ready.read_text().splitlines())
    shown = migrate(checkout)
    assert shown.returncode == 1
    expected = f"manual: .buildkite/cuda/test-ready.yml:{line}: upload_pipeline.py: "
    assert [x for x in shown.stderr.splitlines() if x.startswith("manual:")] == [
        expected + f"called in a shape migrate cannot rewrite: {weird}"
    ]
    assert ".buildkite/cuda/test-ready.yml" not in diff_files(shown.stdout)
    applied = migrate(checkout, "--apply")
    assert applied.returncode == 1 and expected in applied.stderr
    assert weird in ready.read_text()


def test_a_script_at_an_older_path_is_listed_with_that_reason(checkout: Path) -> None:
    """The path is the reason no row rewrote the call, not its shape (issue 32, item 26)."""
    ready = checkout / ".buildkite/amd/extra.yml"
    older = ".buildkite/scripts/hardware_ci/run-amd-test.sh"
    ready.write_text(f"steps:\n  - label: old\n    command: bash {older}\n")
    manual = edits.plan(checkout, pin=None, delete_replaced=False).manual
    assert manual == [
        f".buildkite/amd/extra.yml:3: run-amd-test.sh: called at an older path, {older}"
        f" (migrate knows .buildkite/amd/scripts/run-amd-test.sh): bash {older}"
    ]


def test_scalar_styles_keep_their_quoting_and_blocks_their_indentation(checkout: Path) -> None:
    pipeline = checkout / ".buildkite/amd/extra.yml"
    pipeline.write_text(
        textwrap.dedent(
            """\
            # styles
            steps:
              - label: plain
                command: bash .buildkite/amd/scripts/run-amd-test.sh  # runs the tests
              - label: single
                commands: ['bash .buildkite/amd/scripts/run-amd-test.sh', 'echo done']
              - label: folded
                command: >-
                  bash
                  .buildkite/amd/scripts/run-amd-test.sh

              - label: literal
                commands:
                  - &tests |
                    echo start
                      bash .buildkite/amd/scripts/run-amd-test.sh
                    echo end
              - label: alias
                commands:
                  - *tests
            """
        )
    )
    assert migrate(checkout, "--apply").returncode == 0
    new = "vllm-omni-ci run-tests --platform rocm"
    assert pipeline.read_text() == textwrap.dedent(
        f"""\
        # styles
        steps:
          - label: plain
            command: {new}  # runs the tests
          - label: single
            commands: ['{new}', 'echo done']
          - label: folded
            command: >-
              {new}

          - label: literal
            commands:
              - &tests |
                echo start
                  {new}
                echo end
          - label: alias
            commands:
              - *tests
        """
    )


def test_delete_replaced_removes_the_scripts_and_their_tests(tmp_path: Path) -> None:
    repo = make_checkout(tmp_path / "omni", scripts=True)
    present = [rel for rel in REPLACED_SCRIPTS if (repo / rel).exists()]
    assert len(present) >= 12
    shown = migrate(repo, "--delete-replaced")
    assert shown.returncode == 1
    for rel in present:
        assert f"--- a/{rel}\n+++ /dev/null\n" in shown.stdout
    assert migrate(repo, "--delete-replaced", "--apply").returncode == 0
    assert not [rel for rel in present if (repo / rel).exists()]
    assert not list((repo / "tests/buildkite").iterdir())
    assert (repo / "tests/helpers/mark.py").exists(), "not a replaced script"
    again = migrate(repo, "--delete-replaced")
    assert (again.returncode, again.stdout) == (0, "")


def test_a_script_a_step_still_calls_is_not_deleted(tmp_path: Path) -> None:
    repo = make_checkout(tmp_path / "omni", scripts=True)
    ready = repo / ".buildkite/cuda/test-ready.yml"
    ready.write_text(ready.read_text() + f"  - label: x\n    command: sh -c '{UP} --weird'\n")
    done = migrate(repo, "--delete-replaced", "--apply")
    assert done.returncode == 1
    uploader = ".buildkite/common/scripts/upload_pipeline.py"
    assert (
        f"manual: {uploader}:1: not deleted: still called at .buildkite/cuda/test-ready.yml:"
        in done.stderr
    )
    assert (repo / uploader).exists() and (
        repo / "tests/buildkite/test_upload_pipeline.py"
    ).exists()
    assert not (repo / ".buildkite/common/scripts/skip_ci.py").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pin", "1.2.x"], "error: --pin: '1.2.x' is not a version"),
        (["--pin", "v1"], "error: --pin: 'v1' is not a version"),
        (["--check", "--apply"], "error: --apply: cannot be combined with --check"),
        (["--check", "--pin", "1.0"], "error: --pin: cannot be combined with --check"),
        (["--format", "json"], "error: --format: applies to `migrate --check` only"),
        (["--full-report", "x.md"], "error: --full-report: applies to `migrate --check` only"),
        (
            ["--check", "--full-report", "no/such/folder/x.md"],
            "error: --full-report: no/such/folder/x.md: its folder does not exist",
        ),
    ],
)
def test_bad_usage_exits_2_before_anything_is_read(
    checkout: Path, args: list[str], message: str
) -> None:
    before = snapshot(checkout)
    done = (
        migrate(checkout, *args, "--apply") if "--check" not in args else migrate(checkout, *args)
    )
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr
    assert done.stdout == "" and snapshot(checkout) == before


def test_the_seed_level_checkout_migrates_whole_in_one_apply(tmp_path: Path) -> None:
    """tests/migrate_fixture.py: the old scripts present, the one-step entry pipelines."""
    repo = make_seed_checkout(tmp_path / "vllm-omni").path
    args = ("--pin", "0.1.0", "--delete-replaced")
    shown = migrate(repo, *args)
    assert shown.returncode == 1 and "manual:" not in shown.stderr, shown.stderr
    assert "second document removed" not in shown.stderr
    assert migrate(repo, *args, "--apply").returncode == 0
    again = migrate(repo, *args)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert not [rel for rel in REPLACED_SCRIPTS if (repo / rel).exists()]
    for rel in ENTRY_PIPELINES:
        step = yaml.safe_load((repo / rel).read_text())["steps"][0]
        assert step["commands"][0].startswith("vllm-omni-ci bootstrap --platform ")


# --------------------------------------------------------------------------- the XPU test list

XPU_SCRIPT = ".buildkite/intel/scripts/run-xpu-test.sh"
# The test command lines of the corpus's run-xpu-test.sh, as its maintainers wrote them.
XPU_LINES = (
    "echo $ZE_AFFINITY_MASK",
    "pip install tblib==3.1.0",
    "cd /workspace/vllm-omni",
    'XPU_TEST_PATHS="tests/diffusion tests/dfx tests/e2e"',
    'pytest -v -s $XPU_TEST_PATHS -m "core_model and xpu and B60"',
    "pytest -v -s tests/diffusion/quantization/test_mxfp8_config.py",
    'pytest -v -s $XPU_TEST_PATHS -m "advanced_model and xpu and B60"',
    'pytest -v -s $XPU_TEST_PATHS -m "omni and xpu and B60"',
)


def test_migrate_writes_the_xpu_test_list_from_the_checkouts_script(tmp_path: Path) -> None:
    repo = make_seed_checkout(tmp_path / "vllm-omni").path
    target = repo / xputests.TESTS_FILE
    assert (repo / XPU_SCRIPT).is_file() and not target.exists()
    shown = migrate(repo)
    assert shown.returncode == 1 and "manual:" not in shown.stderr, shown.stderr
    assert f"--- /dev/null\n+++ b/{xputests.TESTS_FILE}\n" in shown.stdout
    assert diff_files(shown.stdout)[xputests.TESTS_FILE][1][-len(XPU_LINES) :] == list(XPU_LINES)
    assert f"note: {xputests.TESTS_FILE}: 8 test commands taken from {XPU_SCRIPT}" in shown.stderr
    assert not target.exists(), "without --apply nothing is written"

    assert migrate(repo, "--apply").returncode == 0
    assert xputests.parse(target.read_text()) == XPU_LINES
    assert xpu.load_tests(repo).commands == XPU_LINES  # what run-tests --platform xpu runs
    after = snapshot(repo)
    again = migrate(repo)
    assert (again.returncode, again.stdout, again.stderr.count("note:")) == (0, "", 1)
    assert snapshot(repo) == after  # the one note: no --pin


def test_the_maintainers_xpu_test_list_is_never_overwritten(tmp_path: Path) -> None:
    repo = make_seed_checkout(tmp_path / "vllm-omni").path
    target = repo / xputests.TESTS_FILE
    target.write_text("pytest -v -s tests/e2e -m 'xpu and B60'\n")
    done = migrate(repo, "--apply")
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "pytest -v -s tests/e2e -m 'xpu and B60'\n"
    assert xputests.TESTS_FILE not in done.stderr


def test_a_script_whose_commands_cannot_be_found_is_manual_and_kept(tmp_path: Path) -> None:
    repo = make_seed_checkout(tmp_path / "vllm-omni").path
    script = repo / XPU_SCRIPT
    script.write_text("#!/bin/bash\ndocker run image ./run-tests-inside.sh\n")
    for args in ((), ("--apply",), ("--delete-replaced", "--apply")):
        done = migrate(repo, *args)
        assert done.returncode == 1, done.stderr
        assert f"manual: {XPU_SCRIPT}:1: its test commands cannot be found" in done.stderr
        assert xputests.TESTS_FILE not in done.stdout
        assert not (repo / xputests.TESTS_FILE).exists()
    assert f"manual: {XPU_SCRIPT}:1: not deleted: " in done.stderr
    assert script.exists(), "the one place the list is kept"


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("bash -c '\n  set -e\n  cd /w\n  pytest a \\\n    -m x\n'\n", ("cd /w", "pytest a -m x")),
        ("docker run i bash -c 'echo hi'", ("echo hi",)),
        ("bash -c 'pyt\\\nest -v'\n", ("pytest -v",)),
        ('docker run i bash -c "echo $X"\n', None),
        ("bash -c '\n  set -e\n'\n", None),
        ("bash -c 'a'\"$b\"'c'\n", None),  # a program pieced from several quotes
    ],
)
def test_extract_takes_the_last_bash_c_program(
    script: str, expected: tuple[str, ...] | None
) -> None:
    assert xputests.extract(script) == expected
