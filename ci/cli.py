"""`vllm-omni-ci`: the same task namespace as `inv`, usable from any directory.

Why our own Invoke `Program` (also behind `inv`, through tasks.py): callers tell
a usage error from a failing command by its exit code, so every parse error is
one `error:` line and exit 2 (Invoke says 1, or a traceback for a non-number);
tasks that replace a script keep the script's usage messages; `<task> --help`
works for tasks with a positional; a mistyped task or option gets the closest
name; Invoke's `c.run()` options and `-f/--config`, which would be silently
ignored, are refused, as is an explicitly empty path or choice; a closed stdout
ends quietly (141), as a shell tool, and a stdout that cannot be written (a
full disk) is one `error:` line and exit 74, not a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from invoke.exceptions import Exit, ParseError, UnexpectedExit
from invoke.program import Program

from ci import __version__
from ci.errors import STDOUT_FAILED, USAGE, UserError
from ci.taskkit import report


class CiProgram(Program):
    """Invoke's Program, with parse errors mapped from 1 to 2 (usage errors)."""

    def run(self, argv: list[str] | None = None, exit: bool = True) -> None:
        """Run the command line; every way out is an exit code (stdout flushed first)."""
        guard_stdout()
        code: str | int | None
        try:
            try:
                code = self.run_tasks(argv)
            except SystemExit as done:
                code = done.code  # a task's own sys.exit
            sys.stdout.flush()  # here, not at interpreter exit, where a failure is unreported
        except StdoutFailed as exc:
            code = stdout_failed(exc)
        except BrokenPipeError:
            stdout_closed()
        if code not in (None, 0):
            sys.exit(code)

    def run_tasks(self, argv: list[str] | None) -> int:
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
            self.refuse_empty_values()
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
            return USAGE
        except UserError as exc:
            return report(exc)
        except Exit as exc:
            if exc.message:
                print(exc.message, file=sys.stderr)
            return exc.code
        except UnexpectedExit as exc:
            return int(exc.result.exited)
        except KeyboardInterrupt:
            return 130
        return 0

    def refuse_run_options(self) -> None:
        """Invoke's core options for `c.run()` shell commands, which no task uses, are errors.

        Accepted silently they mislead: `step --dry -- CMD` ran CMD (Invoke's
        `--dry` echoes `c.run` commands; it is not our `--dry-run`), and `-T 60`
        bounded nothing. `-f/--config` loaded an Invoke config file that no task
        reads. Every problem is one line; the task does not start.
        """
        problems = [
            f"--{name}: not accepted: Invoke's option for shell commands, which no task runs"
            + (" (did you mean --dry-run?)" if name == "dry" else "")
            for name in RUN_ONLY_CORE
            if self.args[name].got_value
        ]
        if self.args["config"].got_value:
            problems.append(
                "-f/--config: config files are not supported (no task reads one); give settings"
                f" as task options or environment variables (see `{self.binary} <task> --help`)"
            )
        UserError.collect(problems)

    def update_config(self, merge: bool = True) -> None:
        """Invoke's config, without the runtime file `$INVOKE_RUNTIME_CONFIG` names.

        No task reads an Invoke config, and a bad file there was a traceback.
        """
        import os

        saved = os.environ.pop("INVOKE_RUNTIME_CONFIG", None)
        try:
            super().update_config(merge)
        finally:
            if saved is not None:
                os.environ["INVOKE_RUNTIME_CONFIG"] = saved

    def refuse_empty_values(self) -> None:
        """`--repo ''` or `--platform ''` is a mistake (an unset variable), not the default.

        Invoke cannot tell an empty value from a missing option once the task runs,
        so path options were silently the current directory or auto-detected, and
        a choice (`--platform`, `--variant`, `--scope`, ...) its default.
        """
        problems = []
        for context in self.tasks:
            for name, argument in context.args.items():
                if argument is None or not argument.got_value or not _empty(argument.value):
                    continue
                flag = f"--{name}"
                if name in PATH_OPTIONS:
                    problems.append(
                        f"{context.name}: {flag}: an empty path; give one, or leave {flag} out"
                    )
                elif name in CHOICE_OPTIONS:
                    allowed = choices(context.name or "", name)
                    problems.append(
                        f"{context.name}: {flag}: an empty value; allowed values are {allowed}"
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
                flag = word.split("=", 1)[0]
                refused = {f"--{name}" for name in (*RUN_ONLY_CORE, "config")}
                guess = close_match(flag, set(self.initial_context.flags) - refused)
                if guess:
                    return f"unknown option {flag!r}; did you mean {guess!r}?"
                return f"unknown option {word!r} (see `{binary} --help`)"
            guess = close_match(word, self.task_words())
            if guess:
                return f"no task named {word!r}; did you mean {guess!r}?"
            return f"no task named {word!r} (see `{binary} --list`)"
        see = f"see `{binary} {context.name} --help`"
        if not word.startswith("-"):
            return f"{context.name}: unexpected argument {word!r} ({see})"
        flag = word.split("=", 1)[0]
        options = sorted(f for f in context.flags if f.startswith("--"))
        guess = close_match(flag, options)
        if guess:
            return f"{context.name}: unknown option {flag!r}; did you mean {guess!r}? ({see})"
        listed = ", ".join(options) or "none"
        return f"{context.name}: unknown option {flag!r}; options: {listed} ({see})"

    def task_words(self) -> list[str]:
        """Every name and alias a task answers to."""
        assert self.collection is not None
        words: list[str] = []
        for name, aliases in self.collection.task_names.items():
            words += [name, *aliases]
        return words

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
        hidden = {f"--{name}" for name in (*RUN_ONLY_CORE, "config")}
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
# Task options with a fixed set of values: an explicit empty value is an error that
# names them (`choices`). Not `--branch`, `--labels` or `--mirror-hw`: empty is a value there.
CHOICE_OPTIONS = ("platform", "variant", "scope", "mode", "format")


def choices(task: str, option: str) -> str:
    """The values `task` accepts for `--option`, as its own error messages list them."""
    if (task, option) == ("run-tests", "platform"):
        return "rocm (alias amd), npu, xpu (alias intel)"
    if (task, option) == ("upload-pipeline", "platform"):
        return "cuda, npu"
    if option == "platform":
        from ci.platforms import ALLOWED

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


def _empty(value: object) -> bool:
    """An explicitly given empty value: `''`, blanks, or a list option's `''` item."""
    if isinstance(value, list):
        return any(not str(item).strip() for item in value)
    return not str(value).strip()


def close_match(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate `word` most likely misspells (`paln` → `plan`), if one is close."""
    import difflib

    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


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


class StdoutFailed(OSError):
    """Writing our stdout failed (not a closed pipe: that is BrokenPipeError)."""


class _GuardedStdout:
    """sys.stdout, whose write errors say that they are stdout's (see `guard_stdout`).

    A proxy around the interpreter's own stream rather than a Python-level raw
    file under it: a signal handler that raises (SIGTERM → 143) between a raw
    write and its return made the buffer write the same bytes again.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutFailed(exc.errno, exc.strerror) from None

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutFailed(exc.errno, exc.strerror) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Make a failed write to stdout a `StdoutFailed`, told apart from every other OSError.

    A task writing its result to a full disk (`> /dev/full`) got an OSError
    traceback; any OSError could be a task's own file, so the CLI could not
    simply catch them all.
    """
    if sys.stdout is sys.__stdout__ and sys.stdout is not None:
        sys.stdout = _GuardedStdout(sys.stdout)


def stdout_failed(exc: OSError) -> int:
    """`vllm-omni-ci plan > /dev/full`: one line, and sysexits' EX_IOERR (74)."""
    import os

    print(f"error: cannot write to stdout: {exc.strerror or exc}", file=sys.stderr)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
    return STDOUT_FAILED


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
