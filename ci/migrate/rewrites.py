"""The rewrite table: each old job command that calls a replaced script, and its new command.

The new commands are the ones the bootstraps write at upload time, so a migrated
YAML and an old one rewritten at upload run the same thing. A pattern matches a
call only where the script starts a command (line start, or after `;`, `&`, `|`,
`(`, a quote or a backtick), run by its interpreter or directly, and only in the
argument shapes its replacement understands; any other call keeps the script's
name in the command, and `migrate` lists it for a person to rewrite. No pattern
matches a new command, so a second run finds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ci.bootstraps import CLI, CUDA_IMAGE_COMMAND, XPU_COMMAND, upload_command
from ci.images import variants


@dataclass(frozen=True)
class Rewrite:
    name: str  # short id, e.g. "cuda-image"
    script: str  # the replaced script's repo path
    pattern: re.Pattern[str]  # matches the old command text (searched in one command string)
    new: str  # re.sub replacement template
    why: str  # one sentence for humans (docs/migration.md row it applies)


# Where a command starts; the spaces before it are kept through `\g<lead>`.
_LEAD = r"(?P<lead>(?:^|(?<=[;&|(\"'`]))[ \t]*)"
# Nothing after the call but its end (a closing quote right after it, an operator, a
# comment): the replacement takes no arguments.
_END = r"(?=$|[;&|)\"'`]|[ \t]+(?:$|[;&|)#]))"
_B = ".buildkite/"
_UPLOADER = f"{_B}common/scripts/upload_pipeline.py"
_PUBLISH = f"{_B}release/scripts/publish-release-images.sh"
_NPU_IMAGE = f"{_B}npu/scripts/build-npu-image.sh"
_NPU_TAG = r'[ \t]+(?P<q>"?)\$\$?(?:\{VLLM_IMAGE_TAG\}|VLLM_IMAGE_TAG\b)(?P=q)'
_ENTRY_FILES = r"(?:bootstrap-upload-steps|pipeline|pipeline-npu)\.ya?ml"
# The CUDA steps' inline shell choosing `--all`/`--e2e`: `--scope auto` decides the same.
_EXTRA = (
    r'(?:EXTRA=""[ \t]*\n[ \t]*if [^\n]*; then[ \t]*\n(?:[ \t]*EXTRA="[^"\n]*"[ \t]*\n)+'
    r"[ \t]*fi[ \t]*\n[ \t]*)?"
)
_SCOPE = r"(?:[ \t]+(?:--all|--e2e|\$\$?EXTRA|\$\$?\{EXTRA\}))*"
_TEST_YAML = rf"(?!(?:\./)?\.buildkite/[^\s/]+/{_ENTRY_FILES})(?P<yml>[^\s;&|\"'`]+\.ya?ml)"


def _row(name: str, script: str, args: str, new: str, why: str, before: str = "") -> Rewrite:
    """`script` starting a command, run by its interpreter or directly, then `args`."""
    run = "python3?" if script.endswith(".py") else "(?:ba)?sh"
    call = rf"{_LEAD}{before}(?:{run}[ \t]+)?(?:\./)?{re.escape(script)}(?![\w.-]){args}"
    return Rewrite(name, script, re.compile(call, re.MULTILINE), r"\g<lead>" + new, why)


def _npu(row: variants.NpuVariant) -> Rewrite:
    suffix = rf"[ \t]+{re.escape(row.suffix)}" if row.suffix else ""
    args = rf"[ \t]+{re.escape(row.dockerfile)}{_NPU_TAG}{suffix}{_END}"
    why = f"build-npu-image.sh: the {row.label} image step"
    return _row(f"npu-image-{row.name}", _NPU_IMAGE, args, row.build_command(), why)


REWRITES: Final[tuple[Rewrite, ...]] = (
    _row("cuda-image", f"{_B}cuda/scripts/build-ci-image.sh", _END, CUDA_IMAGE_COMMAND,
         "cuda build-ci-image.sh: the image-build step"),
    _row("rocm-image", f"{_B}amd/scripts/build-ci-image.sh", _END,
         f"{CLI} build-image --platform rocm", "amd build-ci-image.sh: the amd-build step"),
    *(_npu(row) for row in variants.VARIANTS),
    _row("entry", _UPLOADER,
         rf"[ \t]+--upload[ \t]+(?:\./)?\.buildkite/(?P<platform>cuda|npu)/{_ENTRY_FILES}{_END}",
         rf"{CLI} bootstrap --platform \g<platform>",
         "upload_pipeline.py bootstrap mode: the CUDA and NPU entry pipelines' step"),
    # upload_command quotes a path that needs it; `YML` needs none, so it stays a slot.
    _row("upload", _UPLOADER,
         rf"(?=[^\n;&|]*[ \t]--upload\b){_SCOPE}[ \t]+--upload{_SCOPE}[ \t]+{_TEST_YAML}{_SCOPE}"
         + _END,
         upload_command("YML").replace("YML", r"\g<yml>"),
         "upload_pipeline.py test mode: the upload steps, their EXTRA shell included",
         before=_EXTRA),
    _row("amd-upload", _UPLOADER, rf"[ \t]+(?:--amd[ \t]+--upload|--upload[ \t]+--amd){_END}",
         f"{CLI} bootstrap --platform rocm", "bootstrap-amd-omni.sh: the AMD upload step"),
    _row("amd-bootstrap", f"{_B}amd/scripts/bootstrap-amd-omni.sh", _END,
         f"{CLI} bootstrap --platform rocm", "bootstrap-amd-omni.sh: the AMD entry step"),
    _row("amd-test", f"{_B}amd/scripts/run-amd-test.sh", _END,
         f"{CLI} run-tests --platform rocm", "run-amd-test.sh: an AMD test step"),
    _row("cov-split", f"{_B}common/scripts/run_cov_split.sh", "", f"{CLI} cov-split",
         "run_cov_split.sh: the arguments and line continuations stay"),
    _row("xpu-test", f"{_B}intel/scripts/run-xpu-test.sh", _END, XPU_COMMAND,
         "run-xpu-test.sh: the image build, then the test run"),
    _row("intel-bootstrap", f"{_B}intel/scripts/bootstrap-intel-omni.sh", _END,
         f"{CLI} bootstrap --platform xpu", "bootstrap-intel-omni.sh: the Intel entry step"),
    _row("skip-ci", f"{_B}common/scripts/skip_ci.py",
         rf"[ \t]+gate[ \t]+(?P<platform>[a-z]+)[ \t]+(?P<level>l2|l3){_END}",
         rf"{CLI} skip-ci --platform \g<platform> --level \g<level>",
         "skip_ci.py: the same words on stdout, the same 0/1 exit"),
    _row("release-nightly", _PUBLISH, rf"[ \t]+nightly{_END}",
         f"{CLI} release.publish-images --mode nightly", "publish-release-images.sh nightly"),
    _row("release", _PUBLISH, rf"(?:[ \t]+release)?{_END}",
         f"{CLI} release.publish-images --mode release", "publish-release-images.sh release"),
    _row("cleanup-nightly", f"{_B}release/scripts/cleanup-nightly-builds.sh", _END,
         f"{CLI} release.cleanup-nightly", "cleanup-nightly-builds.sh: the nightly cleanup"),
)  # fmt: skip


def rewrite(command: str) -> tuple[str, tuple[Rewrite, ...]]:
    """The command with every matching row applied, and the rows that applied."""
    applied: list[Rewrite] = []
    for row in REWRITES:
        command, count = row.pattern.subn(row.new, command)
        if count:
            applied.append(row)
    return command, tuple(applied)


# The done rows' scripts, which `--delete-replaced` removes once nothing calls them.
REPLACED_SCRIPTS: Final[tuple[str, ...]] = (
    *dict.fromkeys(row.script for row in REWRITES),
    f"{_B}common/scripts/resolve_skip_ci.sh",
    f"{_B}amd/scripts/select_test_suites.py",
    f"{_B}amd/scripts/combine_test_suites.py",
    f"{_B}amd/test-template-amd-omni.j2",
    "tools/pre_commit/check_test_marks.py",
    "tools/pre_commit/check_buildkite.py",
    "scripts/simple_test.sh",
    f"{_B}scripts/hardware_ci/run_npu_test.sh",
)
# vLLM-Omni's tests of those scripts, each with the script it tests (kept while it is).
REPLACED_TESTS: Final[Mapping[str, str]] = {
    "tests/buildkite/test_skip_ci.py": f"{_B}common/scripts/skip_ci.py",
    "tests/buildkite/test_upload_pipeline.py": _UPLOADER,
    **{
        f"tests/buildkite/test_amd_{name}.py": f"{_B}amd/scripts/bootstrap-amd-omni.sh"
        for name in ("suite_selection", "suite_composition", "pipeline", "scripts")
    },
}
