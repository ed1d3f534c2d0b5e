"""The XPU job's test commands, kept in vLLM-Omni's own checkout.

`run-xpu-test.sh` lived in vLLM-Omni, so its maintainers changed the XPU tests
in their own pull requests. `TESTS_FILE`, beside the Intel pipeline, keeps it
so: plain text, one shell command per line, run in order by one `bash -e` in
the XPU test container (a line sees what an earlier one did: `cd`, a variable),
the first failure ending the job. Blank lines and lines whose first non-blank
character is `#` are skipped. Plain text rather than YAML: the lines are shell,
as they were in the script, with no quoting layer to get wrong.

`migrate` writes the file from the checkout's `run-xpu-test.sh` (`extract`).
A missing file falls back to the built-in table with one `note:` line; a file
that is there but holds no command, or cannot be read, is an error (exit 1):
an empty test list must never pass as a green job.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ci import door
from ci.errors import Failure
from ci.pipeline import files

TESTS_FILE: Final = ".buildkite/intel/xpu-tests.txt"
SCRIPT: Final = ".buildkite/intel/scripts/run-xpu-test.sh"
HEADER: Final = f"""\
# The XPU job's test commands (`vllm-omni-ci run-tests --platform xpu`).
# One shell command per line, run in order by one `bash -e` in the XPU test
# container (xpu/vllm-omni-ci:<commit>, the checkout at /workspace/vllm-omni);
# the first failing line ends the job with its status. Blank lines and lines
# starting with `#` are skipped. Written by `vllm-omni-ci migrate` from
# {SCRIPT}.
"""


@dataclass(frozen=True)
class XpuTests:
    """The commands a job runs and where they came from (`source`, in words)."""

    commands: tuple[str, ...]
    source: str
    from_file: bool


def parse(text: str) -> tuple[str, ...]:
    """The file's commands: every line that is neither blank nor a `#` comment, stripped."""
    lines = (line.strip() for line in text.splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


def render(commands: Sequence[str]) -> str:
    """The file `migrate` writes: the header, then one command per line."""
    return HEADER + "\n" + "".join(f"{line}\n" for line in commands)


def checkout_of(cwd: Path) -> Path:
    """The checkout a job runs in: the nearest folder at or above `cwd` holding `.git`
    (what the script's `git rev-parse --show-toplevel` found, without needing git),
    else `cwd` itself."""
    for folder in (cwd, *cwd.parents):
        if files.exists(folder / ".git"):
            return folder
    return cwd


def load(checkout: Path, fallback: tuple[str, ...], built_in: str) -> XpuTests:
    """`TESTS_FILE` of `checkout`; when it is missing, `fallback` (named `built_in`) and one
    `note:` line saying where the file goes. Unreadable or without a command: `Failure`."""
    path = checkout / TESTS_FILE
    if not files.exists(path):
        door.note(
            f"note: {TESTS_FILE} is missing in {checkout}; running the built-in XPU test list"
            f" ({built_in}). Put the commands in {path}, one per line"
            f" (`vllm-omni-ci migrate --apply` writes it from {SCRIPT})"
        )
        return XpuTests(fallback, f"built-in list ({built_in}; {path} is missing)", False)
    commands = parse(files.read_text(path, str(path)))
    if not commands:
        raise Failure(
            f"{path}: no test commands (only blank lines and # comments); write one shell"
            " command per line, or delete the file to run the built-in list"
        )
    return XpuTests(commands, str(path), True)


# The script's container program: the single-quoted argument of its last `bash -c`.
_PROGRAM = re.compile(r"\bbash[ \t]+-c[ \t]+'(?P<body>[^']*)'(?=\s|$)")
# The script's own `set -e`: the job shell already stops at the first failure.
_SET_E = re.compile(r"set[ \t]+-e")


# A `\<newline>` with the blanks around it.
_CONTINUED = re.compile(r"([ \t]*)\\\r?\n([ \t]*)")


def _joined(match: re.Match[str]) -> str:
    """bash drops `\\<newline>`: words the blanks around it split stay split (one space)."""
    return " " if match.group(1) or match.group(2) else ""


def extract(script: str) -> tuple[str, ...] | None:
    """The test command lines of a `run-xpu-test.sh`, as written (a `\\` continuation joined
    into one line, the program's `set -e` left out); None when there is no such program or
    it holds no command."""
    found = list(_PROGRAM.finditer(script))
    if not found:
        return None
    body = _CONTINUED.sub(_joined, found[-1].group("body"))
    commands = tuple(line for line in parse(body) if not _SET_E.fullmatch(line))
    return commands or None
