"""The one command-line grammar of every task, with every error said in our words.

`[CORE-OPTIONS] TASK [OPTIONS] [TASK [OPTIONS]]... [-- WORDS]`: an option is
`--name VALUE`, `--name=VALUE` or its short flag; a value is never one of the
task's own options (`--dest --dry-run` is a missing value); a positional may be
given as its option; core options may follow a task name. Each problem is one
`error:` line naming task, option and what it accepts, exit 2. A task with
`script=` keeps the script's grammar: a value option takes the next word, a
repeated one keeps the last value, errors are worded as the script's.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from invoke.parser.argument import Argument
from invoke.parser.context import ParserContext
from invoke.parser.parser import ParseResult

from ci.errors import UserError
from ci.platforms import ALLOWED


def parse(
    words: list[str],
    initial: ParserContext,
    contexts: Mapping[str, ParserContext],
    scripts: Mapping[str, str],
    binary: str,
) -> ParseResult:
    """[the core context, each task's context...], values set; `.remainder` is after `--`."""
    cut = words.index("--") if "--" in words else len(words)
    body, remainder = words[:cut], words[cut + 1 :]
    result = ParseResult([initial])
    result.remainder = " ".join(remainder)
    context, script = initial, ""
    i = 0
    while i < len(body):
        word = body[i]
        i += 1
        if word.startswith("-") and len(word) > 1:
            flag, eq, inline = word.partition("=")
            if not eq and not flag.startswith("--") and len(flag) > 2:  # -nr, -rPATH
                if flag[:2] in context.flags and context.flags[flag[:2]].takes_value:
                    flag, eq, inline = flag[:2], "=", flag[2:]
                else:
                    body[i:i] = [f"-{letter}" for letter in flag[2:]]
                    flag = flag[:2]
            arg, inverse = _lookup(context, initial, flag)
            if arg is None:
                raise UserError(_unknown(context, initial, flag, word, script, binary))
            if arg.name == "help" and context is not initial:
                arg.set_value(context.name, cast=False)
                continue
            if not arg.takes_value:
                arg.set_value(not inverse, cast=False)
                continue
            if eq:
                value: str | None = inline
            elif i < len(body) and (script or not _is_flag(context, body[i])):
                value, i = body[i], i + 1
            else:
                value = None
            if value is None and arg.optional:
                arg.set_value(True, cast=False)
            elif value is None:
                raise UserError(_needs_value(context, arg, script, binary))
            elif arg.kind is not list and arg.got_value and not script:
                raise UserError(f"{context.name}: {option(arg)} is given twice; give it once")
            else:
                try:
                    arg.value = value  # cast to its kind: an `int` option takes a whole number
                except ValueError:
                    where = f"{context.name}: " if context.name else ""
                    raise UserError(
                        f"{where}{option(arg)}: {value!r} is not a whole number"
                    ) from None
        elif context is not initial and context.missing_positional_args:
            context.missing_positional_args[0].set_value(word)
        elif word in contexts:
            _complete(context, initial, binary)
            context = copy.deepcopy(contexts[word])
            script = scripts.get(context.name or "", "")
            result.append(context)
        else:
            raise UserError(unexpected(context, contexts, word, script, binary))
    _complete(context, initial, binary)
    return result


def _lookup(context: ParserContext, initial: ParserContext, flag: str) -> tuple[Any, bool]:
    """The argument `flag` names: the task's own first, then a core option; and if `--no-X`."""
    if flag in context.flags:
        return context.flags[flag], False
    if flag in context.inverse_flags:
        return context.flags[context.inverse_flags[flag]], True
    return (initial.flags[flag] if flag in initial.flags else None), False  # aliases: no .get


def _is_flag(context: ParserContext, word: str) -> bool:
    flag = word.split("=", 1)[0]
    return flag in context.flags or flag in context.inverse_flags


def option(arg: Argument) -> str:
    """The option as users type it: `--summary-tail`, whichever flag they gave."""
    return "--" + (arg.name or "").replace("_", "-")


def _complete(context: ParserContext, initial: ParserContext, binary: str) -> None:
    """A task's required arguments are given, unless its help is asked for."""
    missing = context.missing_positional_args
    if context is initial or not missing or initial.args["help"].value:
        return
    task = context.name
    flags = ", ".join(option(arg) for arg in missing)
    raise UserError(f"{task}: {flags} is required (see `{binary} {task} --help`)")


def _needs_value(context: ParserContext, arg: Argument, script: str, binary: str) -> str:
    if script:
        return f"{script}: {option(arg)} needs a value"
    if context.name is None:
        return f"{option(arg)} needs a value (see `{binary} --help`)"
    return f"{context.name}: {option(arg)} needs a value (see `{binary} {context.name} --help`)"


def _unknown(
    context: ParserContext, initial: ParserContext, flag: str, word: str, script: str, binary: str
) -> str:
    if script:
        return f"{script}: unknown argument: {word}"
    if context is initial:
        guess = close_match(flag, set(initial.flags) - REFUSED)
        if guess:
            return f"unknown option {flag!r}; did you mean {guess!r}?"
        return f"unknown option {word!r} (see `{binary} --help`)"
    see = f"see `{binary} {context.name} --help`"
    options = sorted(f for f in context.flags if f.startswith("--"))
    guess = close_match(flag, options)
    if guess:
        return f"{context.name}: unknown option {flag!r}; did you mean {guess!r}? ({see})"
    listed = ", ".join(options) or "none"
    return f"{context.name}: unknown option {flag!r}; options: {listed} ({see})"


def unexpected(
    context: ParserContext,
    contexts: Mapping[str, ParserContext],
    word: str,
    script: str,
    binary: str,
) -> str:
    if script:
        return f"{script}: unknown argument: {word}"
    if context.name is not None:
        return (
            f"{context.name}: unexpected argument {word!r} (see `{binary} {context.name} --help`)"
        )
    guess = close_match(word, contexts)
    if guess:
        return f"no task named {word!r}; did you mean {guess!r}?"
    return f"no task named {word!r} (see `{binary} --list`)"


def close_match(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate `word` most likely misspells (`paln` → `plan`), if one is close."""
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


# Invoke core options that only steer `Context.run()`, which no task calls, and
# `--config`, whose file no task reads: accepted by the grammar, then refused by
# the program in one line each, so never offered as a guess.
RUN_ONLY_CORE = (
    "dry",
    "echo",
    "pty",
    "warn-only",
    "command-timeout",
    "hide",
    "prompt-for-sudo-password",
)
REFUSED = {f"--{name}" for name in (*RUN_ONLY_CORE, "config")}


# Task options for which an explicit empty value is an error, by what they take: a path, a
# name, or one of a fixed set of values (the error names them: `choices`). Not `--branch`,
# `--labels` or `--mirror-hw`: empty is a value there.
NOT_EMPTY = {
    **dict.fromkeys(("repo", "results", "artifact_dir", "junit"), "path"),
    **dict.fromkeys(("docker", "dockerfile", "docker_config", "tls_dir"), "path"),
    "image": "value",
    **dict.fromkeys(("platform", "variant", "scope", "mode", "format"), "choice"),
}


def refuse_empty_values(tasks: Iterable[ParserContext]) -> None:
    """`--repo ''` or `--platform ''` is a mistake (an unset variable), not the default,
    which a task cannot tell from a missing option."""
    problems = []
    for context in tasks:
        for arg in context.args.values():
            # A list option's value is empty when one of its items is.
            values = arg.value if isinstance(arg.value, list) else [arg.value]
            kind = NOT_EMPTY.get(arg.name or "")
            if not kind or not arg.got_value or all(str(value).strip() for value in values):
                continue
            task, flag = context.name, option(arg)
            if kind == "choice":
                allowed = choices(task or "", arg.name)
                problems.append(f"{task}: {flag}: an empty value; allowed values are {allowed}")
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
