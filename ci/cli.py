"""`vllm-omni-ci`: the same task namespace as `inv`, usable from any directory.

Why our own Invoke `Program` (also behind `inv`, through tasks.py): callers tell
a usage error from a failing command by its exit code, so every parse error is
one `error:` line and exit 2 (Invoke says 1, or a traceback for a non-number);
tasks that replace a script keep the script's usage messages; `<task> --help`
works for tasks with a positional; Invoke's `c.run()` options, which would be
silently ignored, are refused; and a closed stdout ends quietly, as a shell tool.
"""

from __future__ import annotations

import sys
from typing import Any

from invoke.exceptions import Exit, ParseError, UnexpectedExit
from invoke.program import Program

from ci import __version__
from ci.errors import USAGE, UserError
from ci.taskkit import report


class CiProgram(Program):
    """Invoke's Program, with parse errors mapped from 1 to 2 (usage errors)."""

    def run(self, argv: list[str] | None = None, exit: bool = True) -> None:
        try:
            self.create_config()
            self.parse_core(argv)
            self.parse_collection()
            self.help_before_positionals()
            try:
                self.parse_tasks()
            except ValueError as exc:  # Invoke casts `int` options while parsing
                raise ParseError(not_a_number(exc, list(self.core.unparsed))) from None
            self.refuse_run_options()
            self.refuse_empty_paths()
            self.parse_cleanup()
            self.update_config()
            self.execute()
        except ParseError as exc:
            message = (
                script_usage(exc, argv)
                or self.repeated_option(str(exc))
                or self.unknown_word(str(exc))
                or readable(
                    str(exc), self.binary or "vllm-omni-ci", getattr(exc.context, "name", None)
                )
            )
            print(f"error: {message}", file=sys.stderr)
            sys.exit(USAGE)
        except UserError as exc:
            sys.exit(report(exc))
        except Exit as exc:
            if exc.message:
                print(exc.message, file=sys.stderr)
            sys.exit(exc.code)
        except UnexpectedExit as exc:
            sys.exit(exc.result.exited)
        except KeyboardInterrupt:
            sys.exit(130)
        except BrokenPipeError:
            stdout_closed()

    def refuse_run_options(self) -> None:
        """Invoke's core options for `c.run()` shell commands, which no task uses, are errors.

        Accepted silently they mislead: `step --dry -- CMD` ran CMD (Invoke's
        `--dry` echoes `c.run` commands; it is not our `--dry-run`), and `-T 60`
        bounded nothing. Every problem is one line; the task does not start.
        """
        UserError.collect(
            f"--{name}: not accepted: Invoke's option for shell commands, which no task runs"
            + (" (did you mean --dry-run?)" if name == "dry" else "")
            for name in RUN_ONLY_CORE
            if self.args[name].got_value
        )

    def refuse_empty_paths(self) -> None:
        """`--repo ''` is a mistake (an unset variable), not a request for the default.

        Invoke cannot tell an empty value from a missing option once the task runs,
        so path options were silently the current directory or auto-detected.
        """
        problems = []
        for context in self.tasks:
            for name in PATH_OPTIONS:
                argument = context.args.get(name)
                if argument is not None and argument.got_value and not str(argument.value).strip():
                    flag = f"--{name}"
                    problems.append(
                        f"{context.name}: {flag}: an empty path; give one, or leave {flag} out"
                    )
        UserError.collect(problems)

    def repeated_option(self, message: str) -> str | None:
        """`--level l2 --level l3`: Invoke took `l3` for a task and said "No idea what 'l3' is!"."""
        parser = getattr(self, "parser", None)
        if parser is None or not message.startswith("No idea what "):
            return None
        context: Any = None
        seen: set[str] = set()
        for word in list(self.core.unparsed):
            if word == "--":
                break
            if word in parser.contexts:
                context, seen = parser.contexts[word], set()
                continue
            flag = word.split("=", 1)[0]
            if context is None or flag not in context.flags:
                continue
            argument = context.flags[flag]
            if argument.kind is list or not argument.takes_value:
                continue
            if argument.name in seen:
                option = "--" + argument.name.replace("_", "-")
                return f"{context.name}: {option} is given twice; give it once"
            seen.add(argument.name)
        return None

    def unknown_word(self, message: str) -> str | None:
        """Invoke's "No idea what 'X' is!", said with the task and what it accepts."""
        import re

        found = re.fullmatch(r"No idea what '(.*)' is!", message, re.S)
        parser = getattr(self, "parser", None)
        if found is None or parser is None:
            return None
        word, binary, context = found.group(1), self.binary or "vllm-omni-ci", None
        for before in list(self.core.unparsed):
            if before in (word, "--"):
                break
            if before in parser.contexts:
                context = parser.contexts[before]
        if context is None:
            if word.startswith("-"):
                return f"unknown option {word!r} (see `{binary} --help`)"
            return f"unknown task {word!r} (see `{binary} --list`)"
        see = f"see `{binary} {context.name} --help`"
        if not word.startswith("-"):
            return f"{context.name}: unexpected argument {word!r} ({see})"
        options = ", ".join(sorted(f for f in context.flags if f.startswith("--"))) or "none"
        return (
            f"{context.name}: unknown option {word.split('=', 1)[0]!r}; options: {options} ({see})"
        )

    def help_before_positionals(self) -> None:
        """`<task> --help` for a task with a positional argument (`bootstrap`, `upload-pipeline`).

        Invoke hands a missing positional the next word, so `--help` became the
        platform or the pipeline file. Words after `--` are forwarded args.
        """
        words = list(self.core.unparsed)
        if not {"--help", "-h"} & set(words):
            return
        # Invoke's Task.get_arguments pops each help string: a second parser made
        # later by parse_tasks would have none. Help dicts are restored after.
        saved = {id(t): dict(t.help) for t in self._all_tasks()}
        parser = self._make_parser()
        for task in self._all_tasks():
            task.help = dict(saved[id(task)])
        if words[0] not in parser.contexts:
            return
        context = parser.contexts[words[0]]
        given = words[1 : words.index("--")] if "--" in words else words[1:]
        if context.positional_args and any(
            w in ("--help", "-h") and w not in context.flags for w in given
        ):
            self.parser = parser
            self.print_task_help(words[0])
            raise Exit

    def _make_parser(self) -> Any:
        """Invoke's parser, except that a list option (`--dest`, `--platform`) needs a value.

        Invoke starts list options with an empty list as their "raw value", so a
        bare `--dest` counted as given and the task ran with its defaults.
        """
        parser = super()._make_parser()
        for context in parser.contexts.values():
            for argument in context.args.values():
                if argument.kind is list:
                    argument.raw_value = None
        return parser

    def _all_tasks(self) -> list[Any]:
        assert self.collection is not None
        return [self.collection[name] for name in self.collection.task_names]

    def print_help(self) -> None:
        """`--help` without the `c.run()` core options: they are refused, so not offered."""
        hidden = {f"--{name}" for name in RUN_ONLY_CORE}
        shown = [
            row
            for row in self.initial_context.help_tuples()
            if not {part.split("=")[0].split(" ")[0] for part in row[0].split(", ")} & hidden
        ]
        print(f"Usage: {self.binary} [--core-opts] <subcommand> [--subcommand-opts] ...")
        print("")
        print("Core options:")
        print("")
        self.print_columns(shown)
        self.list_tasks()


# Task options naming a file or directory: an explicit empty value is an error.
PATH_OPTIONS = ("repo", "artifact-dir", "junit", "dockerfile", "tls-dir", "docker-config", "docker")

# Invoke core options that only steer `Context.run()`, which no task calls.
RUN_ONLY_CORE = (
    "dry",
    "echo",
    "pty",
    "warn-only",
    "command-timeout",
    "hide",
    "prompt-for-sudo-password",
)


def stdout_closed() -> None:
    """`vllm-omni-ci … | head`: the reader left; end quietly, as a shell tool killed by SIGPIPE."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
    sys.exit(128 + 13)


def not_a_number(exc: ValueError, words: list[str]) -> str:
    """`--summary-tail x`: name the task, the option and the value instead of int()'s text."""
    import re

    found = re.search(r"invalid literal for int\(\) with base 10: (.+)$", str(exc))
    if found is None:
        return str(exc)
    value = found.group(1).strip("'\"")
    task = next((w for w in words if not w.startswith("-")), "")
    for before, word in zip(["", *words], words, strict=False):
        if word == value and before.startswith("-"):
            return f"{task}: {before}: {value!r} is not a whole number"
        if word.startswith("-") and word.endswith(f"={value}"):
            return f"{task}: {word.split('=', 1)[0]}: {value!r} is not a whole number"
    return f"{task}: {value!r} is not a whole number"


# Tasks that replace a script keep its usage messages for words Invoke rejects:
# task name -> module whose `usage_error(words after the task name)` words them.
SCRIPT_GRAMMARS = {"cov-split": "ci.covsplit"}


def script_usage(exc: ParseError, argv: list[str] | None) -> str | None:
    context = getattr(exc, "context", None)
    name = getattr(context, "name", None)
    if name not in SCRIPT_GRAMMARS:
        return None
    import importlib

    grammar = importlib.import_module(SCRIPT_GRAMMARS[name])
    message: str | None = grammar.usage_error(grammar.task_words(argv, name))
    return message


def readable(message: str, binary: str = "vllm-omni-ci", task: str | None = None) -> str:
    """Invoke's parse error, reworded where it speaks of internals.

    A task argument without a default is "positional" to Invoke, and a missing
    one is reported as `'build-image' did not receive required positional
    arguments: 'platform'`, though users pass it as `--platform`. A flag
    without its value is `Flag <Argument: level (l)> needed value…`.
    """
    import re

    flag = re.fullmatch(
        r"Flag <Argument: ([\w-]+)[^>]*> needed value and was not given one!", message
    )
    if flag is not None:
        option = "--" + flag.group(1).replace("_", "-")
        if not task:
            return f"{option} needs a value (see `{binary} --help`)"
        return f"{task}: {option} needs a value (see `{binary} {task} --help`)"
    found = re.fullmatch(r"'([^']+)' did not receive required positional arguments: (.+)", message)
    if found is None:
        return message
    task, names = found.group(1), re.findall(r"'([^']+)'", found.group(2))
    flags = ", ".join(f"--{name.replace('_', '-')}" for name in names)
    return f"{task}: {flags} is required (see `{binary} {task} --help`)"


def program(binary: str = "vllm-omni-ci") -> CiProgram:
    from ci.tasks import ns

    return CiProgram(namespace=ns, version=__version__, name="vllm-omni-ci", binary=binary)


def main() -> None:
    program().run()


def adopt_inv() -> None:
    """`inv` in the repo root: run the command line with our Program, then exit.

    Invoke's own `inv` imports tasks.py after parsing only its core flags; from
    there the same namespace runs under `CiProgram`, so `inv TASK` and
    `vllm-omni-ci TASK` agree on usage errors (exit 2, a script's own messages
    for the tasks that replace one) and on Ctrl-C (130). Called from tasks.py.
    """
    import os

    if os.path.basename(sys.argv[0]) not in ("inv", "invoke"):
        return
    program(binary=os.path.basename(sys.argv[0])).run(list(sys.argv))
    sys.exit(0)
