"""Property-based fuzzing of every task (hypothesis): hostile input never runs a command,
prints a secret, hangs or shows a traceback.

Every task of the namespace (`vllm-omni-ci --list`) runs in-process (`tests/inproc.py`)
against a copy of the sample made into a git checkout once per session, with generated
values for its options and for the `BUILDKITE_*`/`VLLM_*` variables `ci/` reads
(`ENV_NAMES`, found in the source, plus `EXTRA_ENV`): option-looking words
(`--upload-pack=touch MARKER`), shell syntax, control characters, invalid UTF-8,
huge and negative numbers, paths that escape or loop, and a secret's value. Each
example must:

- end with an exit code of the README's table (`EXIT_CODES`) or one a stand-in chose;
- show no traceback on stderr, and raise nothing out of the runner but `SystemExit`;
- create no marker file (every `touch MARKER` payload names the session's marker folder);
- leave the secret (`CANARY`, in `HF_TOKEN`), in any letter case, out of stdout, stderr
  and every file written under the example's folders, the checkout and the session folder;
- leave the checkout as it was (`git status` clean).

Nothing real happens: tasks that act take `--dry-run` (`step` runs only `true` or
`false` for real, `tier` only `--list`s, `sandbox` only reports `status`); programs that
cannot run here are recording stand-ins first on PATH; every HTTP proxy variable points
at a closed port and Docker Hub at a local stub that lists no tags.

An example is a build (`SCENARIOS`: local, a PR, a Buildkite PR or main build) whose
inputs are valid but for up to three targets (options, the positional word, the words
after `--`, a stray word, variables) that get hostile values; or a flood: one payload
in every variable the build leaves unset. Payloads (a marker command, the secret) are
drawn most often; a failing flood names the variables that give it.

`TASKS` maps each task to how its options are drawn (`Variant`: valid values, hostile
ones, options never given). An option the entry does not name is given only as a
target, with `hostile()` (a flag: given). A task added to the namespace without an
entry fails `test_every_task_has_an_entry`, so it is fuzzed from the start.

Budget: `VLLM_OMNI_CI_FUZZ_EXAMPLES` examples per task (default `DEFAULT_EXAMPLES`),
derandomized (the examples follow from this file's text), so CI runs the same ones
every time; raise it for a longer local hunt
(`VLLM_OMNI_CI_FUZZ_EXAMPLES=500 pytest tests/test_fuzz.py`).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shlex
import shutil
import stat
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context

from ci.tasks import definitions
from tests.conftest import ROOT, SAMPLE
from tests.gitrepo import GitRepo, sample_checkout
from tests.inproc import Outcome, run_inproc

DEFAULT_EXAMPLES = 30
EXAMPLES = int(os.environ.get("VLLM_OMNI_CI_FUZZ_EXAMPLES") or DEFAULT_EXAMPLES)
# One example that runs longer than this is a hang (InprocTimeout fails it).
EXAMPLE_TIMEOUT = 60.0
# The README's exit-code table (0, 1, 2, 74, 124-143 and the signals we pass on).
EXIT_CODES = frozenset({0, 1, 2, 74, 124, 126, 127, 129, 130, 131, 137, 141, 143})
# What the `exit-code` stand-in exits with: a command's own code, passed through.
STANDIN_CODE = 42
# A secret's value: long enough to be masked, letters and digits only, so that every
# printed form of it (quoted, JSON, repr) contains it as it is.
CANARY = "fuzzCanary7Qx93ZtY"
SECRET_VARIABLE = "HF_TOKEN"
TRACEBACK = "Traceback (most recent call last)"

# Programs that must not run for real here, each a stand-in that logs its argv and
# exits 0: engines, agents, device tools, network clients, privilege.
STANDINS = (
    "docker",
    "dockerd",
    "docker-buildx",
    "buildctl",
    "buildkitd",
    "buildkite-agent",
    "nvidia-smi",
    "rocm-smi",
    "amd-smi",
    "rocminfo",
    "npu-smi",
    "xpu-smi",
    "curl",
    "wget",
    "aws",
    "gh",
    "skopeo",
    "crane",
    "regctl",
    "sudo",
    "ssh",
    "scp",
    "apt-get",
    "apt-cache",
    "debootstrap",
    "mount",
    "umount",
    "findmnt",
)


# --------------------------------------------------------------------------- the values

# `{marker}`, `{loop}`, `{fifo}`, `{canary}` and `{hub}` are filled in per example
# (`Session.fill`), so that strategies can be built at import time.
OPTION_LIKE = (
    "--upload-pack=touch {marker}",
    "--upload-pack=touch {marker};",
    "--output={marker}",
    "--exec=touch {marker}",
    "--config=core.sshCommand=touch {marker}",
    "-c",
    "-c x",
    "-cx=y",
    "-o{marker}",
    "-",
    "--",
    "--help",
    "-h",
    "--version",
    "--list",
    "-n",
    "--dry-run",
    "--repo",
)
SHELL_LIKE = (
    "$(touch {marker})",
    "`touch {marker}`",
    "; touch {marker}",
    "| touch {marker}",
    "&& touch {marker}",
    "x\ntouch {marker}",
    "'; touch {marker}; '",
    '"; touch {marker}; "',
    "${IFS}touch${IFS}{marker}",
    "{{ touch }}",
    "%s%n%x",
)
CONTROL = (
    "",
    " ",
    "  x  ",
    "\t",
    "a\nb",
    "a\rb",
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "\x01\x02\x7f",
    "\u202eevil",
    "\ufeffbom",
    "é",
    "名前",
    "\udcff\udcfe",  # bytes that are not UTF-8, as Python decodes them from argv
    "x" * 10000,
)
NUMBERS = (
    "9" * 5000,
    "99999999999999999999",
    "-99999999999999999999",
    "-1",
    "0",
    "-0",
    "1e9",
    "1e999",
    "0x10",
    "NaN",
    "inf",
    "1_000",
    "\u0663",  # an Arabic-Indic digit: int() takes it
    "1.5",
    "1000000000",
)
PATHS = (
    "../x",
    "../../../../../../../etc/passwd",
    "/etc/passwd",
    "/etc",
    "/",
    ".",
    "..",
    "~",
    "~/x",
    "x/../../y",
    "/nonexistent/x",
    "/dev/null",
    "/dev/full",
    "/proc/self/environ",
    "~no-such-user/x",
    "x" * 300,  # longer than a file name may be
    "{loop}",
    "{loop}/x",
    "{fifo}",
)
SECRETS = ("{canary}", "x{canary}", "{canary}\n", "--{canary}", "'{canary}'", "a,{canary},b")
REFS = (
    "main",
    "HEAD",
    "HEAD~1",
    "HEAD~99999",
    "origin/main",
    "@{-1}",
    "refs/heads/main",
    "a..b",
    "HEAD:x",
    ":/x",
    "main^{tree}",
    "--all",
    "WORKTREE",
)
# The values that do something when they reach a git option or a shell: a marker appears.
INJECTIONS = tuple(word for word in OPTION_LIKE + SHELL_LIKE if "{marker}" in word)

# Text of any character but NUL (argv and the environment cannot hold one) and lone
# surrogates other than surrogateescape's (which stand for bytes that are not UTF-8).
_CHARS = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
_BYTES = st.binary(max_size=12).map(
    lambda b: b.replace(b"\x00", b"").decode("utf-8", errors="surrogateescape")
)


def text() -> st.SearchStrategy[str]:
    return st.text(_CHARS, max_size=24)


def hostile() -> st.SearchStrategy[str]:
    """Any hostile value. Payloads (a marker or the secret) are drawn most often: a
    wrong value of any other kind only fails closed, unless it breaks the program."""
    payloads = st.sampled_from(INJECTIONS)
    secrets = st.sampled_from(SECRETS)
    return st.one_of(
        payloads,
        payloads,
        payloads,
        secrets,
        secrets,
        *(st.sampled_from(kind) for kind in (OPTION_LIKE, CONTROL, NUMBERS, PATHS, REFS)),
        text(),
        _BYTES,
        st.integers(min_value=-(10**30), max_value=10**30).map(str),
        st.tuples(st.sampled_from(("-", "--", "../", "/", "~", "-c", "--x=")), text()).map("".join),
    )


def refs() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(REFS), st.sampled_from(OPTION_LIKE), hostile())


def paths() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(PATHS), hostile())


def labels() -> st.SearchStrategy[str]:
    label = st.one_of(st.sampled_from(("ready", "merge", "nightly", "ci-skip")), hostile())
    return st.lists(label, min_size=1, max_size=4).map(",".join)


PLATFORMS = ("rocm", "amd", "cuda", "npu", "xpu", "intel")
SHELL_COMMANDS = ("touch {marker}", "sh -c 'touch {marker}'", "true", "echo {canary}")


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Opt:
    """How one option is drawn: a `valid` value (the example's usual one, so that the
    hostile few reach the code behind the option checks), or a `bad` one when the
    example targets it. `required`: given in every example (valid unless targeted)."""

    valid: tuple[str, ...] = ()
    bad: st.SearchStrategy[str] = field(default_factory=hostile)
    required: bool = False


def opt(*valid: str, bad: st.SearchStrategy[str] | None = None, required: bool = False) -> Opt:
    return Opt(valid, hostile() if bad is None else bad, required)


# An option no entry names: never valid, so given only when an example targets it.
DEFAULT_OPT = Opt()


@dataclass(frozen=True)
class Variant:
    """One way of running a task: the words always given (`--dry-run`), its options, the
    options never given (they act for real), the positional word, the words after `--`,
    and exit codes that a stand-in it runs chooses."""

    fixed: tuple[str, ...] = ()
    options: Mapping[str, Opt] = field(default_factory=dict)
    never: frozenset[str] = frozenset()
    positional: tuple[str, Opt] | None = None
    tail: Opt | None = None  # words after `--`: `valid` ones are whole command lines
    codes: frozenset[int] = frozenset()


REPO = {"repo": opt("{repo}", bad=paths(), required=True)}
REFS_OPT = opt("HEAD", "main", "origin/main", bad=refs())
COMMIT = opt("HEAD", "0123456789abcdef0123456789abcdef01234567", bad=refs())
TEST_FILES = (
    "tests/test_markers.py",
    "tests/e2e/test_serving.py",
    "tests/engine/test_engine_gpu.py tests/diffusion/test_caption.py",
)

TASKS: dict[str, tuple[Variant, ...]] = {
    "bootstrap": (
        Variant(
            fixed=("--dry-run",),
            options={
                **REPO,
                "platform": opt(*PLATFORMS, required=True),
                "labels": opt("ready", "merge,nightly", bad=labels()),
            },
        ),
    ),
    "build-image": tuple(
        Variant(
            fixed=("--dry-run",),
            positional=("platform", opt(*names, required=True)),
            options={**REPO, "commit": COMMIT, **only},
        )
        for names, only in (
            (
                ("rocm", "amd", "cuda"),
                {
                    "docker": opt("{standins}/docker", "docker"),
                    "timeout": opt("45m", "1h30m"),
                    "registry": opt("127.0.0.1:5000/omni"),
                    "builder": opt("auto", "buildx", "engine"),
                    "buildx_builder": opt("default"),
                    "arch": opt("gfx942"),
                    "no_push": opt(),
                },
            ),
            (
                ("npu",),
                {
                    "variant": opt("a2", "a3", "a5", "310p"),
                    "tag": opt("v1"),
                    "dockerfile": opt(bad=paths()),
                    "tls_dir": opt(bad=paths()),
                    "docker_config": opt(bad=paths()),
                    "install_buildctl": opt(),
                    "no_push": opt(),
                },
            ),
            (
                ("xpu", "intel"),
                {
                    "docker": opt("{standins}/docker"),
                    "upstream_repo": opt("vllm/vllm-openai-xpu"),
                    "vllm_version": opt("0.9.0", required=True),
                },
            ),
        )
    ),
    "check-marks": (
        Variant(options={**REPO, "from_ref": REFS_OPT, "to_ref": REFS_OPT}),
        Variant(options=REPO, tail=opt(*TEST_FILES, bad=paths())),
    ),
    "cov-split": (
        Variant(
            fixed=("-n",),
            options={
                "model_id": opt("qwen2_5_omni", required=True),
                "offline": opt("tests/offline"),
                "online": opt("tests/online"),
            },
            tail=opt("-m 'core_model and cpu'", ""),
        ),
    ),
    "doctor": (Variant(options={"docker": opt("{standins}/docker"), "json": opt()}),),
    "lint-pipelines": (Variant(options=REPO),),
    "migrate": (
        Variant(
            never=frozenset({"apply", "check"}),  # --apply writes; --check runs the old CI
            options={**REPO, "pin": opt("0.1.0"), "delete_replaced": opt()},
        ),
    ),
    "plan": (
        Variant(
            options={
                **REPO,
                "base": REFS_OPT,
                "head": REFS_OPT,
                "labels": opt("ready", "merge,nightly", bad=labels()),
                "branch": opt("main", "feature"),
                "mirror_hw": opt("b200"),
                "platform": opt(*PLATFORMS, "rocm,cuda"),
                "format": opt("table", "json", "markdown"),
                "nightly": opt(),
                "weekly": opt(),
                "non_critical": opt(),
                "worktree": opt(),
            },
        ),
    ),
    "run-tests": (
        Variant(
            fixed=("--dry-run",),
            options={
                "platform": opt("rocm", "amd", "npu", "xpu", "intel", required=True),
                "timeout": opt("30m"),
                "prune": opt(),
            },
            tail=opt(*SHELL_COMMANDS),
        ),
    ),
    "sandbox": (
        # `status` only: `up` and `down` change this machine.
        Variant(
            positional=("action", opt("status", bad=st.just("status"), required=True)),
            options={"root": opt("{home}/sandbox", bad=paths()), "json": opt()},
        ),
    ),
    "select-suites": (
        Variant(
            options={
                "branch": opt("main", "feature", required=True),
                "labels": opt("ready", "merge,nightly", bad=labels()),
                "debug_test_yaml": opt("ready", "merge,nightly"),
                "nightly": opt("0", "1"),
            },
        ),
    ),
    "shellcheck-steps": (
        Variant(
            options={
                **REPO,
                "severity": opt("error", "warning", "info", "style"),
                "exclude": opt("SC2086,SC2046", "upload-expansion"),
                "from_ref": REFS_OPT,
                "to_ref": REFS_OPT,
                "dry_run": opt(),
            },
        ),
    ),
    "skip-ci": (
        Variant(
            options={
                **REPO,
                "platform": opt(*PLATFORMS, required=True),
                "level": opt("l2", "l3", required=True),
            },
        ),
    ),
    "step": (
        # A dry run with any value: it must start nothing, so `touch MARKER` never runs.
        Variant(
            fixed=("-n",),
            options={
                "timeout": opt("30s"),
                "shard": opt("0/2", "auto", "none"),
                "shard_list": opt("a,b"),
                "artifact_dir": opt("out", bad=paths()),
                "junit": opt("j.xml", bad=paths()),
                "summary_tail": opt("10"),
            },
            tail=opt(*SHELL_COMMANDS, "pytest tests"),
        ),
        # A real run of a harmless command. Its paths stay inside the example's folder
        # (`../../x` from two levels down): a real run writes there.
        Variant(
            options={
                "timeout": opt("30s", "1m"),
                "kill_after": opt("1s"),
                "shard": opt("0/2", "auto", "none"),
                "shard_list": opt("a,b"),
                "artifact_dir": opt(
                    "out", bad=st.sampled_from(("../x", "../../x", "{loop}", "{canary}", "-x"))
                ),
                "junit": opt("j.xml", bad=st.sampled_from(("../j.xml", "{canary}.xml", "--x"))),
                "summary_tail": opt("0", "5"),
                "leak_check": opt(),
                "leak_settle": opt("0s", "1s"),
            },
            never=frozenset({"leak_scope"}),  # `all` ends every process it may see
            tail=opt(
                "true",
                "false",
                "exit-code",
                "sh -c 'echo {canary}'",
                bad=st.just("true"),
            ),
            codes=frozenset({STANDIN_CODE}),
        ),
    ),
    "tier": (
        # --list prints the steps and runs nothing.
        Variant(
            fixed=("--list",),
            positional=("name", opt("ready", "merge", "nightly", "weekly", required=True)),
            options={
                **REPO,
                "platform": opt(*PLATFORMS),
                "jobs": opt("1", "0"),
                "results": opt("results", bad=paths()),
                "step": opt("test"),
                "image": opt("127.0.0.1:5000/omni:ci"),
                "label": opt("a=b"),
                "native": opt(),
                "force": opt(),
                "cpu_only": opt(),
                "exact_sku": opt(),
                "keep_going": opt(),
            },
        ),
    ),
    "upload-pipeline": (
        Variant(
            fixed=("--dry-run",),
            positional=(
                "pipeline",
                opt(
                    ".buildkite/cuda/test-ready.yml",
                    ".buildkite/cuda/test-merge.yml",
                    ".buildkite/amd/test-amd-ready.yml",
                    ".buildkite/npu/test-npu-ready.yml",
                    ".buildkite/cuda/bootstrap-upload-steps.yml",
                    bad=paths(),
                    required=True,
                ),
            ),
            options={
                **REPO,
                "scope": opt("diff", "all", "e2e", "auto"),
                "platform": opt("cuda", "npu"),
                "upload": opt(),
            },
        ),
    ),
    "wheelhouse": (
        Variant(
            fixed=("-n",),
            options={"dest": opt("wheels", bad=paths()), "python_version": opt("3.10", "3.12")},
        ),
    ),
    "release.cleanup-nightly": (
        Variant(
            fixed=("--dry-run",),
            options={
                "hub_url": opt("{hub}", required=True),
                "keep": opt("14", "0"),
                "delete_interval": opt("1s", "0"),
            },
        ),
    ),
    "release.publish-images": (
        Variant(
            fixed=("-n",),
            options={
                "mode": opt("release", "nightly"),
                "commit": opt("0123456789abcdef0123456789abcdef01234567", required=True),
                "release_version": opt("0.1.0"),
            },
        ),
    ),
}


def task_names() -> list[str]:
    """Every task of the namespace, as `vllm-omni-ci --list` names them."""
    return sorted(definitions())


def task_options(task: str) -> dict[str, Any]:
    """The task's options: name -> its definition (`ci.taskdef.Option`)."""
    return {option.name: option for option in definitions()[task].options}


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# What an example can make hostile besides its options.
POSITIONAL, TAIL, STRAY = "<positional>", "<after -->", "<stray word>"


@st.composite
def command_line(draw: st.DrawFn, task: str) -> list[str]:
    """A command line of `task`: valid values but for up to three targets (options, the
    positional word, the words after `--`, a stray word) that get hostile ones (a flag:
    given); the entry's flags given or not; options in a drawn order, as `--opt=value`
    or `--opt value`."""
    variant = draw(st.sampled_from(TASKS[task]))
    positional = variant.positional[0] if variant.positional else None
    fixed = set(variant.fixed)
    options = {
        name: argument
        for name, argument in task_options(task).items()
        if name not in variant.never
        and name != positional
        and flag(name) not in fixed
        and not (name == "dry_run" and fixed & {"-n", "--dry-run"})
    }
    targets = set(
        draw(
            st.lists(st.sampled_from([*options, POSITIONAL, TAIL, STRAY]), max_size=3, unique=True)
        )
    )

    def value(spec: Opt, target: str) -> str | None:
        if target in targets:
            return draw(spec.bad)
        if spec.valid and (spec.required or draw(st.booleans())):
            return draw(st.sampled_from(spec.valid))
        return None

    chosen: list[list[str]] = [[word] for word in variant.fixed]
    for name, argument in options.items():
        if argument.kind is bool:  # named in the entry: may be given; else only as a target
            if name in targets or (name in variant.options and draw(st.booleans())):
                chosen.append([flag(name)])
            continue
        spec = variant.options.get(name, DEFAULT_OPT)
        for _ in range(draw(st.integers(1, 2)) if argument.kind is list else 1):
            given = value(spec, name)
            if given is None:
                break
            equals = draw(st.integers(0, 3)) == 0
            chosen.append([f"{flag(name)}={given}"] if equals else [flag(name), given])
    if STRAY in targets:
        chosen.append([draw(hostile())])
    words = [word for group in draw(st.permutations(chosen)) for word in group]
    if variant.positional is not None:
        given = value(variant.positional[1], POSITIONAL)
        words[:0] = [] if given is None else [given]
    if variant.tail is not None:
        if TAIL in targets:
            words += ["--", *draw(st.lists(variant.tail.bad, min_size=1, max_size=3))]
        elif variant.tail.valid and (tail := draw(st.sampled_from(variant.tail.valid))):
            words += ["--", *shlex.split(tail)]
    return words


# `ci/` names these variables; each can be set to any value by the caller.
_ENV_PATTERN = re.compile(r"\b(?:BUILDKITE|VLLM)_[A-Z0-9_]*[A-Z0-9]\b")
# Variables outside those prefixes that tasks read as input (the scripts' own names).
EXTRA_ENV = (
    "BUILDKITE",
    "TEST_COMMANDS",
    "WEEKLY",
    "NIGHTLY",
    "RUN_ALL",
    "NON_CRITICAL",
    "AMD_MIRROR_HW",
    "MIRROR_HW",
    "DEBUG_TEST_YAML",
    "IMAGE_NAME",
    "IMAGE_REGISTRY",
    "ROCM_CI_IMAGE_REGISTRY",
    "PYTORCH_ROCM_ARCH",
    "HF_HOME",
    "HF_CACHE",
    "PYTEST_ADDOPTS",
    "DOCKERHUB_USERNAME",
    "DOCKERHUB_TOKEN",
    "GITHUB_TOKEN",
)
# The builds an example runs as (the variables that shape one), before its hostile values.
SCENARIOS: tuple[Mapping[str, str], ...] = (
    {},  # a local run
    {"BUILDKITE_PULL_REQUEST": "123", "BUILDKITE_BRANCH": "feature"},
    {
        "BUILDKITE": "true",
        "BUILDKITE_COMMIT": "{head}",
        "BUILDKITE_BRANCH": "feature",
        "BUILDKITE_PULL_REQUEST": "123",
        "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main",
        "BUILDKITE_PULL_REQUEST_LABELS": "ready",
        "BUILDKITE_PARALLEL_JOB": "1",
        "BUILDKITE_PARALLEL_JOB_COUNT": "2",
    },
    {
        "BUILDKITE": "true",
        "BUILDKITE_COMMIT": "{head}",
        "BUILDKITE_BRANCH": "main",
        "BUILDKITE_PULL_REQUEST": "false",
        "NIGHTLY": "1",
        "TEST_COMMANDS": "touch {marker}",
    },
)
BUILD_SHAPING = sorted({name for scenario in SCENARIOS for name in scenario})


def env_names() -> list[str]:
    """Every `BUILDKITE_*`/`VLLM_*` name in ci/'s source, and `EXTRA_ENV`."""
    found: set[str] = set(EXTRA_ENV)
    for path in (ROOT / "ci").rglob("*.py"):
        found.update(_ENV_PATTERN.findall(path.read_text(encoding="utf-8")))
    return sorted(found)


# Variables the harness sets itself: where a real `step` copies artifacts must stay
# inside the example's folder, the stand-in docker client must stay the one used, and
# the cgroup knob must not leave the test process's cgroup to chance.
PINNED_ENV = frozenset(
    {"BUILDKITE_BUILD_CHECKOUT_PATH", "VLLM_OMNI_CI_CGROUP", "VLLM_OMNI_CI_PYTEST"}
)
ENV_NAMES = [name for name in env_names() if name not in PINNED_ENV]


# An example with at least this many variables of one value is a flood.
FLOOD_AT = 10


@st.composite
def environment(draw: st.DrawFn) -> dict[str, str]:
    """A build (`SCENARIOS`), then either up to three hostile variables or a flood: one
    payload in every variable the build leaves unset (a value only one variable's
    reader mishandles is found without guessing which)."""
    env = dict(draw(st.sampled_from(SCENARIOS)))
    # A locale whose stdout is strict about text that is not UTF-8, or the C.UTF-8 one.
    env["LANG"] = draw(st.sampled_from(("C.UTF-8", "en_US.UTF-8")))
    if draw(st.integers(0, 2)) == 0:
        payload = draw(hostile())
        env.update({name: payload for name in ENV_NAMES if name not in env})
        return env
    # The variables that shape a build are targeted as often as all the others together.
    name = st.one_of(st.sampled_from(BUILD_SHAPING), st.sampled_from(ENV_NAMES))
    for target in draw(st.lists(name, max_size=3, unique=True)):
        env[target] = draw(hostile())
    return env


# --------------------------------------------------------------------------- the session


class _Hub(http.server.BaseHTTPRequestHandler):
    """Docker Hub with no tags: every GET lists none, every POST/DELETE is refused."""

    def do_GET(self) -> None:
        self._answer(200, {"count": 0, "next": None, "results": []})

    def do_POST(self) -> None:
        self._answer(401, {"detail": "stub"})

    do_DELETE = do_POST

    def _answer(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


@dataclass
class Session:
    """What every example shares: the checkout, stand-ins, markers, the Hub stub."""

    root: Path
    repo: Path
    standins: Path
    markers: Path
    calls: Path
    hub: str
    head: str  # the checkout's HEAD commit

    def fill(self, word: str) -> str:
        places = {
            "{marker}": str(self.markers / "MARKER"),
            "{loop}": str(self.root / "loop"),
            "{fifo}": str(self.root / "fifo"),
            "{canary}": CANARY,
            "{hub}": self.hub,
            "{repo}": str(self.repo),
            "{standins}": str(self.standins),
            "{home}": str(self.root / "home"),
            "{head}": self.head,
        }
        for place, value in places.items():
            word = word.replace(place, value)
        return word

    def base_env(self, home: Path, tmp: Path, checkout_path: Path) -> dict[str, str]:
        closed = "http://127.0.0.1:9"  # the discard port: nothing listens
        env = {
            "PATH": f"{self.standins}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            "HOME": str(home),
            "TMPDIR": str(tmp),
            SECRET_VARIABLE: CANARY,
            "http_proxy": closed,
            "https_proxy": closed,
            "HTTP_PROXY": closed,
            "HTTPS_PROXY": closed,
            "no_proxy": "127.0.0.1,localhost",
            "NO_PROXY": "127.0.0.1,localhost",
            "DOCKER_HOST": f"unix://{self.root}/no-engine.sock",
            "VLLM_OMNI_CI_DOCKER": str(self.standins / "docker"),
            "BUILDKITE_BUILD_CHECKOUT_PATH": str(checkout_path),
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        if "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return env


def _stand_in(path: Path, log: Path, code: int = 0) -> None:
    path.write_text(
        f"#!/bin/sh\nprintf '%s\\n' \"$(basename \"$0\") $*\" >> '{log}'\nexit {code}\n"
    )
    path.chmod(0o755)


@contextlib.contextmanager
def open_session(root: Path, calls: Path) -> Iterator[Session]:
    """The shared parts under `root` (stand-ins log to `calls`, outside the scanned folders)."""
    repo = sample_checkout(root / "repo", SAMPLE).path
    standins = root / "standins"
    standins.mkdir()
    for name in STANDINS:
        _stand_in(standins / name, calls)
    _stand_in(standins / "exit-code", calls, STANDIN_CODE)
    markers = root / "markers"
    markers.mkdir()
    (root / "loop").symlink_to(root / "loop")
    os.mkfifo(root / "fifo")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hub = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        head = GitRepo(repo).sha()
        yield Session(root, repo, standins, markers, calls, hub, head)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def fuzz_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    calls = tmp_path_factory.mktemp("fuzz-calls") / "calls.log"
    with open_session(tmp_path_factory.mktemp("fuzz"), calls) as session:
        yield session


# --------------------------------------------------------------------------- the checks


def _written_since(folders: Sequence[Path], since: float) -> Iterator[Path]:
    """Regular files under `folders` modified at or after `since` (symlinks not followed)."""
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if d != ".git" or dirpath != str(folder)]
            for name in filenames:
                path = Path(dirpath) / name
                try:
                    info = path.lstat()
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode) and info.st_mtime >= since:
                    yield path


# Every example's outcome, newest last (a longer local hunt can look at what ran).
OUTCOMES: list[Outcome] = []


def problems_of(
    session: Session, task: str, argv: list[str], env_values: dict[str, str]
) -> list[str]:
    """Run one example; what it broke of the module docstring's promises ([] when none)."""
    argv = [session.fill(word) for word in argv]
    with tempfile.TemporaryDirectory(prefix="fuzz-example-", dir=session.root) as folder:
        example = Path(folder)
        cwd = example / "a" / "b" / "work"  # `../../x` stays inside the example's folder
        home, tmp, checkout = example / "home", example / "tmp", example / "checkout"
        for made in (cwd, home, tmp, checkout):
            made.mkdir(parents=True)
        env = session.base_env(home, tmp, checkout)
        env.update({name: session.fill(value) for name, value in env_values.items()})
        started = time.time() - 1  # mtimes are coarse on some file systems
        done = run_inproc(task, *argv, env=env, cwd=cwd, timeout=EXAMPLE_TIMEOUT)
        OUTCOMES.append(done)
        found: list[str] = []
        allowed = EXIT_CODES | {code for v in TASKS[task] for code in v.codes}
        if done.code not in allowed:
            found.append(f"exit code {done.code} is not in the README's table")
        if TRACEBACK in done.stderr:
            found.append(
                "a traceback on stderr: " + done.stderr[done.stderr.index(TRACEBACK) :][-1500:]
            )
        markers = sorted(p.name for p in session.markers.iterdir())
        if markers:
            found.append(f"marker files created: {markers}")
            for marker in session.markers.iterdir():
                shutil.rmtree(marker) if marker.is_dir() else marker.unlink()
        for stream, said in (("stdout", done.stdout), ("stderr", done.stderr)):
            if _has_secret(said):
                line = next(line for line in said.splitlines() if _has_secret(line))
                found.append(f"the secret on {stream}: {line[:300]!r}")
        for path in _written_since([example, session.repo, session.root / "markers"], started):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if _has_secret(data.decode("utf-8", errors="replace")):
                found.append(f"the secret in a written file: {path.relative_to(session.root)}")
        dirty = _dirty(session.repo)
        if dirty:
            found.append(f"the checkout changed: {dirty[:5]}")
            _restore(session.repo)
    if found:
        found.append(f"exit {done.code}; stderr ends: {done.stderr[-800:]!r}")
    return found


def _has_secret(said: str) -> bool:
    """The secret, in any letter case (a lower-cased token still gives it away)."""
    return CANARY.lower() in said.lower()


def _dirty(repo: Path) -> list[str]:
    import subprocess

    listed = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [line for line in listed.splitlines() if line.strip()]


def _restore(repo: Path) -> None:
    import subprocess

    subprocess.run(["git", "reset", "-q", "--hard"], cwd=repo, check=False)
    subprocess.run(["git", "clean", "-qfdx"], cwd=repo, check=False)


# --------------------------------------------------------------------------- the tests


def test_every_task_has_an_entry() -> None:
    """A new task gets an entry in TASKS: how its options are drawn, what never runs."""
    assert sorted(TASKS) == task_names()


def test_every_named_option_exists() -> None:
    """An entry names only options the task has (a renamed option is not silently unfuzzed)."""
    stale = [
        f"{task}: {name}"
        for task, variants in TASKS.items()
        for variant in variants
        for name in [*variant.options, *variant.never]
        + ([variant.positional[0]] if variant.positional else [])
        if name not in task_options(task)
    ]
    assert not stale


@pytest.mark.parametrize("task", task_names())
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_hostile_input(task: str, data: st.DataObject, fuzz_session: Session) -> None:
    argv = data.draw(command_line(task), label="argv")
    env_values = data.draw(environment(), label="env")
    found = problems_of(fuzz_session, task, argv, env_values)
    if found and current_build_context().is_final:  # the example hypothesis reports
        found += culprits(fuzz_session, task, argv, env_values, found[0])
    assert not found, "\n".join(found)


def culprits(
    session: Session, task: str, argv: list[str], env_values: dict[str, str], problem: str
) -> list[str]:
    """For a flood (one payload in many variables), the variables that alone give the same
    kind of problem, else those it needs together (without any one of them it is gone):
    hypothesis shrinks a flood only to a smaller flood."""
    payload, count = Counter(env_values.values()).most_common(1)[0]
    if count < FLOOD_AT:
        return []
    kind = problem.split(":", 1)[0]
    flooded = [name for name, value in env_values.items() if value == payload]
    base = {name: value for name, value in env_values.items() if value != payload}

    def gives_it(env: dict[str, str]) -> bool:
        return any(p.startswith(kind) for p in problems_of(session, task, argv, env))

    alone = [name for name in flooded if gives_it({**base, name: payload})]
    if alone:
        return [f"alone, each of these variables gives it: {', '.join(alone)}"]
    needed = [
        name
        for name in flooded
        if not gives_it({key: value for key, value in env_values.items() if key != name})
    ]
    return [f"it needs all of these variables together: {', '.join(needed) or '(unclear)'}"]
