"""The command line of `vllm-omni-ci`, parsed from the task definitions, every error in our words.

`[CORE-OPTIONS] TASK [OPTIONS] [TASK [OPTIONS]]... [-- WORDS]`: an option is
`--name VALUE`, `--name=VALUE` or its short flag; a value is never one of the
task's own options (`--dest --dry-run` is a missing value); a positional may be
given as its option; core options may follow a task name. Each problem is one
`error:` line naming task, option and what it accepts, exit 2. A task with
`script=` keeps the script's grammar: a value option takes the next word, a
repeated one keeps the last value, errors are worded as the script's.

`inv` parses with Invoke's own parser instead (`ci.inv`); the checks that are about
values, not words (`refuse_empty_values`), are shared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ci.errors import UserError, close_match
from ci.platforms import ALLOWED
from ci.taskdef import Option, TaskDef

# The core options, long and short: `--help [TASK]`, `--list`, `--version`.
CORE = {"--help": "-h", "--list": "-l", "--version": "-V"}


@dataclass
class Call:
    """One task on the command line and the values given for its options."""

    task: TaskDef
    values: dict[str, Any] = field(default_factory=dict)

    def missing(self) -> list[Option]:
        return [o for o in self.task.options if o.positional and o.name not in self.values]


@dataclass
class CommandLine:
    """What a command line asks for: core options, the tasks, the words after `--`."""

    help: str | bool = False  # True: the program's help; a name: that task's
    listing: bool = False  # --list
    version: bool = False
    calls: list[Call] = field(default_factory=list)
    words: list[str] = field(default_factory=list)


def parse(words: Sequence[str], tasks: Mapping[str, TaskDef], binary: str) -> CommandLine:
    """The command line `words` (program name excluded), checked; raises UserError."""
    cut = list(words).index("--") if "--" in words else len(words)
    body, line = list(words[:cut]), CommandLine(words=list(words[cut + 1 :]))
    call: Call | None = None
    i = 0
    while i < len(body):
        word = body[i]
        i += 1
        script = call.task.script if call else ""
        if word.startswith("-") and len(word) > 1:
            flag, eq, inline = word.partition("=")
            if not eq and not flag.startswith("--") and len(flag) > 2:  # -nr, -rPATH
                first = _lookup(call, flag[:2])
                if first is not None and first.kind is not bool:
                    flag, eq, inline = flag[:2], "=", flag[2:]
                else:
                    body[i:i] = [f"-{letter}" for letter in flag[2:]]
                    flag = flag[:2]
            option = _lookup(call, flag)
            if option is None:
                taken = _core(line, call, flag, inline if eq else None, body[i:])
                if taken is None:
                    raise UserError(_unknown(call, flag, word, binary))
                i += taken
                continue
            assert call is not None  # a task option is found only after its task's name
            if option.kind is bool:
                if eq:
                    raise UserError(f"{call.task.name}: {option.flag} takes no value")
                call.values[option.name] = True
                continue
            if eq:
                value: str | None = inline
            elif i < len(body) and (script or _lookup(call, body[i].split("=", 1)[0]) is None):
                value, i = body[i], i + 1
            else:
                value = None
            if value is None:
                raise UserError(_needs_value(call, option, binary))
            _set(call, option, value)
        elif call is not None and (missing := call.missing()):
            call.values[missing[0].name] = word
        elif word in tasks:
            _complete(call, line, binary)
            call = Call(tasks[word])
            line.calls.append(call)
        else:
            raise UserError(unexpected(call, tasks, word, binary))
    _complete(call, line, binary)
    if isinstance(line.help, str) and line.help not in tasks:  # `--help NAME`
        raise UserError(unexpected(None, tasks, line.help, binary))
    for call in line.calls:
        if line.words and not call.task.words and not line.help:
            raise UserError(takes_no_words(call.task.name, binary))
    return line


def takes_no_words(task: str, binary: str) -> str:
    """Words after `--` for a task that takes none were ignored (`tier ready -- --platform
    rocm` ran every platform)."""
    return (
        f"{task}: takes no words after `--`; its options go before (see `{binary} {task} --help`)"
    )


def _lookup(call: Call | None, flag: str) -> Option | None:
    """The task option `flag` names, if any (core options are looked up apart)."""
    if call is None:
        return None
    for option in call.task.options:
        if flag in (option.flag, option.short) and flag:
            return option
    return None


def _core(
    line: CommandLine, call: Call | None, flag: str, inline: str | None, rest: list[str]
) -> int | None:
    """Set core option `flag`, if it is one (after a task name too), and say how many of the
    `rest` words it took: `--help` after a task name is that task's help, `--help NAME`
    before any task NAME's. None: `flag` is no core option."""
    name = next((long for long, short in CORE.items() if flag in (long, short)), None)
    if name is None:
        return None
    if name != "--help" and inline is not None:
        raise UserError(f"{name} takes no value")
    if name == "--list":
        line.listing = True
    elif name == "--version":
        line.version = True
    elif call is not None:
        line.help = call.task.name
    elif inline is not None:
        line.help = inline
    elif rest and not rest[0].startswith("-"):
        line.help = rest[0]
        return 1
    else:
        line.help = True
    return 0


def _set(call: Call, option: Option, value: str) -> None:
    script = call.task.script
    if option.kind is list:
        call.values.setdefault(option.name, []).append(value)
        return
    if option.name in call.values and not script:
        raise UserError(f"{call.task.name}: {option.flag} is given twice; give it once")
    if option.kind is int:
        try:
            call.values[option.name] = int(value)
        except ValueError:
            raise UserError(
                f"{call.task.name}: {option.flag}: {value!r} is not a whole number"
            ) from None
        return
    call.values[option.name] = value


def _complete(call: Call | None, line: CommandLine, binary: str) -> None:
    """A task's required arguments are given, unless its help is asked for."""
    if call is None or line.help:
        return
    missing = call.missing()
    if missing:
        name = call.task.name
        flags = ", ".join(option.flag for option in missing)
        raise UserError(f"{name}: {flags} is required (see `{binary} {name} --help`)")


def _needs_value(call: Call, option: Option, binary: str) -> str:
    if call.task.script:
        return f"{call.task.script}: {option.flag} needs a value"
    name = call.task.name
    return f"{name}: {option.flag} needs a value (see `{binary} {name} --help`)"


def _unknown(call: Call | None, flag: str, word: str, binary: str) -> str:
    if call is not None and call.task.script:
        return f"{call.task.script}: unknown argument: {word}"
    if call is None:
        guess = close_match(flag, CORE)
        if guess:
            return f"unknown option {flag!r}; did you mean {guess!r}?"
        return f"unknown option {word!r} (see `{binary} --help`)"
    name = call.task.name
    see = f"see `{binary} {name} --help`"
    options = sorted(o.flag for o in call.task.options)
    guess = close_match(flag, options)
    if guess:
        return f"{name}: unknown option {flag!r}; did you mean {guess!r}? ({see})"
    listed = ", ".join(options) or "none"
    return f"{name}: unknown option {flag!r}; options: {listed} ({see})"


def unexpected(call: Call | None, tasks: Iterable[str], word: str, binary: str) -> str:
    if call is not None and call.task.script:
        return f"{call.task.script}: unknown argument: {word}"
    if call is not None:
        name = call.task.name
        return f"{name}: unexpected argument {word!r} (see `{binary} {name} --help`)"
    guess = close_match(word, tasks)
    if guess:
        return f"no task named {word!r}; did you mean {guess!r}?"
    return f"no task named {word!r} (see `{binary} --list`)"


# Task options for which an explicit empty value is an error, by what they take: a path, a
# name, or one of a fixed set of values (the error names them: `choices`). Not `--branch`,
# `--labels` or `--mirror-hw`: empty is a value there.
NOT_EMPTY = {
    **dict.fromkeys(("repo", "results", "artifact_dir", "junit"), "path"),
    **dict.fromkeys(("docker", "dockerfile", "docker_config", "tls_dir"), "path"),
    "image": "value",
    **dict.fromkeys(("platform", "variant", "scope", "mode", "format"), "choice"),
}


def refuse_empty_values(given: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """`--repo ''` or `--platform ''` is a mistake (an unset variable), not the default,
    which a task cannot tell from a missing option. `given`: (task, the options the
    command line gave, by name), from either front end."""
    problems = []
    for task, values in given:
        for name, value in values.items():
            # A list option's value is empty when one of its items is.
            items = value if isinstance(value, list) else [value]
            kind = NOT_EMPTY.get(name)
            if not kind or all(str(item).strip() for item in items):
                continue
            flag = "--" + name.replace("_", "-")
            if kind == "choice":
                problems.append(
                    f"{task}: {flag}: an empty value; allowed values are {choices(task, name)}"
                )
            else:
                problems.append(f"{task}: {flag}: an empty {kind}; give one, or leave {flag} out")
    UserError.collect(problems)


def choices(task: str, option: str) -> str:
    """The values `task` accepts for `--option`, as its own error messages list them."""
    if (task, option) == ("run-tests", "platform"):
        return "rocm (alias amd), npu, xpu (alias intel)"
    if (task, option) == ("upload-pipeline", "platform"):
        return "cuda, npu"
    if option == "platform":
        return ALLOWED
    if option == "variant":
        from ci.images.variants import ALLOWED as VARIANTS

        return VARIANTS
    if option == "scope":
        from ci.pipeline.scope import CHOICES

        return ", ".join(CHOICES)
    if option == "mode":
        from ci.release.publish import MODES

        return ", ".join(MODES)
    from ci.plan.inputs import FORMATS

    return ", ".join(FORMATS)
