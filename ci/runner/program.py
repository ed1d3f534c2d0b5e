"""Render the whole bash program a test job runs: the runner's pure core.

A program, not Python, so the same text runs on an agent and in any test image
without vllm-omni-ci. In order: `set -euo pipefail` and the commands as one quoted
literal; env defaults (when unset *or empty*), forced values, exports; the
pre-flight; the masked `Commands:` line; the commands in a child bash; the exit
mapping. Run-time facts (job id, GPU count) come from its env.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ci.redact import MASK, Redactor, is_secret_name

COMMANDS_VAR = "__omni_ci_commands"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# A pre-flight check is a bash fragment that exits non-zero to stop the job.
def refuse(test: str, message: str) -> str:
    """bash: when `test` holds, say `message` on stderr and exit 1."""
    return f"if [[ {test} ]]; then\n    echo {shlex.quote(message)} >&2\n    exit 1\nfi"


def section(title: str) -> str:
    """A Buildkite log section header (`--- title`)."""
    return f"echo {shlex.quote('--- ' + title)}"


# An empty command text is an error (exit 1), not a silent success.
REQUIRE_COMMANDS = refuse(f'-z "${{{COMMANDS_VAR}}}"', "Error: No test commands provided.")


@dataclass(frozen=True)
class Semantics:
    """What a platform's job shell does around the commands."""

    platform: str
    defaults: tuple[tuple[str, str], ...] = ()  # set when unset or empty, then exported
    forced: tuple[tuple[str, str], ...] = ()  # exported, over the job's environment
    preflight: tuple[str, ...] = ()
    # True: run-amd-test.sh's shell: every line runs and the first failure is kept
    # (a real failure replaces pytest's 5; `exit N` and `set -e` fold in), pipefail
    # on, and VLLM_CI_ALLOW_NO_TESTS=1 (exactly) turns a final 5 into 0.
    # False: Buildkite's default job shell, `bash -e -c`: stop at the first failure.
    run_all: bool = False


# The ERR trap keeps the first failure, but a real failure replaces pytest's 5;
# the EXIT trap folds the shell's own end status (`exit N`, `set -e`) in too.
_RUN_ALL_CHILD = """\
set -E
__omni_ci_status=0
__omni_ci_merge() {
    local status=$1
    if (( status != 0 && (__omni_ci_status == 0 || (__omni_ci_status == 5 && status != 5)) )); then
        __omni_ci_status=${status}
    fi
}
trap '__omni_ci_merge "$?"' ERR
trap '__omni_ci_merge "$?"; exit "${__omni_ci_status}"' EXIT
eval "$1"
exit "${__omni_ci_status}"
"""

_NO_TESTS = """\
if [[ ${__omni_ci_exit} -eq 5 && "${VLLM_CI_ALLOW_NO_TESTS:-0}" == "1" ]]; then
    echo 'Pytest collected no tests; VLLM_CI_ALLOW_NO_TESTS=1, treating exit code 5 as success.'
    exit 0
fi"""

_ASSIGNMENT = re.compile(
    r"(?P<name>\b[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\"[^\"]*\"|'[^']*'|[^\s;&|)]+)"
)


def shown_commands(text: str, secrets: Iterable[str] = ()) -> str:
    """The command text as logged: secret values and secret-named assignments masked
    (`export HF_TOKEN=[REDACTED]`; a reference like `HF_TOKEN="$VLLM_CI_HF_TOKEN"` stays)."""

    def mask(match: re.Match[str]) -> str:
        value = match.group("value").strip("\"'")
        if is_secret_name(match.group("name")) and value and not value.startswith("$"):
            return f"{match.group('name')}={MASK}"
        return match.group(0)

    return _ASSIGNMENT.sub(mask, Redactor(secrets)(text))


def render_program(
    semantics: Semantics, commands: str | Sequence[str], *, secrets: Iterable[str] = ()
) -> str:
    """The complete bash program for one job; a pure function of its arguments.

    `commands` (text, or lines) run in a child bash as `semantics.run_all` says;
    `secrets` are masked in the `Commands:` line. The program holds the text twice
    and one argv string may not exceed 128 KiB: a long one runs as `bash FILE`
    (`ci.runner.native`).
    """
    text = commands if isinstance(commands, str) else "\n".join(commands)
    bad = [n for n, _ in (*semantics.defaults, *semantics.forced) if not _NAME.match(n)]
    if bad:
        raise ValueError(f"not valid environment variable names: {', '.join(bad)}")
    if semantics.run_all:
        child = f'-o pipefail -c {shlex.quote(_RUN_ALL_CHILD)} _ "${{{COMMANDS_VAR}}}"'
    else:
        child = f'-e -c "${{{COMMANDS_VAR}}}"'

    out = [
        "#!/usr/bin/env bash",
        # For the whole file: command text and child script are single-quoted on purpose.
        "# shellcheck disable=SC2016",
        f"# Rendered by vllm-omni-ci (ci/runner/program.py) for {semantics.platform}.",
        "set -euo pipefail",
        f"{COMMANDS_VAR}={shlex.quote(text)}",
    ]
    for name, value in semantics.defaults:
        out += [f'[[ -n "${{{name}:-}}" ]] || {name}={shlex.quote(value)}', f"export {name}"]
    out += [f"export {name}={shlex.quote(value)}" for name, value in semantics.forced]
    out += semantics.preflight
    out += [
        f"printf '%s\\n' {shlex.quote('Commands:' + shown_commands(text, secrets))}",
        f'if "${{BASH:-/bin/bash}}" {child}; then\n    exit 0\nelse\n    __omni_ci_exit=$?\nfi',
    ]
    if semantics.run_all:
        out.append(_NO_TESTS)
    out.append('exit "${__omni_ci_exit}"')
    return "\n".join(out) + "\n"
