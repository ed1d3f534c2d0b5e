"""`inv`: the Invoke front end, built from the same task definitions as `vllm-omni-ci`.

Invoke parses (its grammar, its `--help` and `--list`), and the definitions say
what each task is, so the two front ends cannot drift. What we add to Invoke's
Program, so that both give the same exit codes for the same input:

- a usage error (Invoke's `ParseError`) is one `error:` line and exit 2 (Invoke: 1);
- Invoke's options for `c.run()` and `-f/--config` are refused: no task runs a
  shell command through Invoke or reads its config (`step --dry -- CMD` ran CMD);
- no Invoke config file is read or run (`NoConfig`);
- the checks on values, not words, are the shared ones (`refuse_empty_values`), and
  how a run ends is `ci.stdio`'s.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

from invoke.collection import Collection
from invoke.config import Config
from invoke.exceptions import Exit, ParseError, UnexpectedExit
from invoke.parser.argument import Argument
from invoke.program import Program
from invoke.tasks import Task

from ci import stdio
from ci.errors import UserError
from ci.grammar import refuse_empty_values, takes_no_words
from ci.taskdef import TaskDef, after_dashdash

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


class NoConfig(Config):
    """Invoke's Config with none of its sources but the defaults: no task reads it.

    Invoke would read /etc/invoke.*, ~/.invoke.*, invoke.* beside tasks.py, the file
    `$INVOKE_RUNTIME_CONFIG` names and `INVOKE_*` variables, and run a `.py` one as code.
    """

    def load_system(self, merge: bool = True) -> None:
        pass

    def load_user(self, merge: bool = True) -> None:
        pass

    def load_project(self, merge: bool = True) -> None:
        pass

    def load_runtime(self, merge: bool = True) -> None:
        pass

    def load_shell_env(self) -> None:
        pass

    def set_project_location(self, path: Any) -> None:
        super().set_project_location(None)

    def set_runtime_path(self, path: Any) -> None:
        super().set_runtime_path(None)


class _Task(Task[Any]):
    """An Invoke task of a definition: our short flags only, no automatic ones."""

    def __init__(self, definition: TaskDef, name: str, words: list[str]) -> None:
        def body(c: Any, **values: Any) -> None:
            definition.call(values, words)

        params = [inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        for option in definition.options:
            default = inspect.Parameter.empty if option.positional else option.default
            params.append(
                inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=default)
            )
        body.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        summary, _, rest = definition.doc.strip("\n").partition("\n")
        body.__doc__ = f"{summary}\n    {definition.lineage}\n{rest}"
        super().__init__(
            body,
            name=name,
            help={o.name: o.help for o in definition.options if o.help},
            iterable=[o.name for o in definition.options if o.iterable],
            positional=[o.name for o in definition.options if o.positional],
            auto_shortflags=False,
        )
        self.definition = definition

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        kept = dict(self.help)  # Invoke pops each help string: a second parse had none
        try:
            arguments = super().get_arguments(ignore_unknown_help)
        finally:
            self.help = kept
        for argument in arguments:
            option = self.definition.option(argument.name or "")
            if option is not None and option.short:
                argument.names = (*argument.names, option.short.lstrip("-"))
            if argument.kind is list:
                # Invoke checks "needed value" against None; a list starts as [], so a
                # repeatable option given last, with no value, was silently dropped.
                argument.raw_value = None
        return arguments


def collection(words: list[str] | None = None) -> Collection:
    """Every task as an Invoke collection; a dotted name is a sub-collection's task.
    `words`: the list the tasks get as the words after `--`."""
    from ci.tasks import definitions

    given = [] if words is None else words
    root = Collection()
    for name, definition in definitions().items():
        space, _, short = name.rpartition(".")
        if space:
            if space not in root.collections:
                root.add_collection(Collection(space))
            root.collections[space].add_task(_Task(definition, short, given))
        else:
            root.add_task(_Task(definition, name, given))
    return root


class InvProgram(Program):
    """Invoke's Program with our exit codes (see the module docstring)."""

    def __init__(self, binary: str = "inv") -> None:
        self._words: list[str] = []
        super().__init__(
            namespace=collection(self._words),
            name="vllm-omni-ci",
            binary=binary,
            config_class=NoConfig,
        )

    def run(self, argv: list[str] | None = None, exit: bool = True) -> None:
        argv = list(sys.argv if argv is None else argv)
        self._words[:] = after_dashdash(argv)
        stdio.run(lambda: self._invoke(argv))

    def _invoke(self, argv: list[str]) -> None:
        try:
            try:
                self.create_config()
                self.parse_core(argv)
                self.parse_collection()
                self.parse_tasks()
            except (ParseError, ValueError) as exc:  # ValueError: `--summary-tail x`, an int
                raise UserError(str(exc)) from None
            self.parse_cleanup()
            self.refuse_run_options()
            self.refuse_words()
            refuse_empty_values(
                (ctx.name or "", {a.name: a.value for a in ctx.args.values() if a.got_value})
                for ctx in self.tasks
            )
            self.update_config()
            self.execute()
        except Exit as exc:
            if exc.message:
                print(exc.message, file=sys.stderr)
            if exc.code:
                raise SystemExit(exc.code) from None
        except UnexpectedExit as exc:
            raise SystemExit(int(exc.result.exited)) from None

    def refuse_run_options(self) -> None:
        """Invoke's `c.run()` options and `-f/--config` are errors: no task reads them, and
        accepted they mislead (`step --dry -- CMD` ran CMD; `-T 60` bounded nothing)."""
        problems = [
            f"--{name}: not accepted: Invoke's option for shell commands, which no task runs"
            + (" (did you mean --dry-run?)" if name == "dry" else "")
            for name in RUN_ONLY_CORE
            if self.args[name].got_value
        ]
        if self.args["config"].got_value:
            problems.append("-f/--config: config files are not supported (no task reads one)")
        UserError.collect(problems)

    def refuse_words(self) -> None:
        """Words after `--` go to a task that takes them, as in `vllm-omni-ci` (`ci.grammar`)."""
        if not self._words:
            return
        assert self.namespace is not None
        for context in self.tasks:
            name = context.name or ""
            task = self.namespace[name]
            if isinstance(task, _Task) and not task.definition.words:
                raise UserError(takes_no_words(name, self.binary or "inv"))

    def print_version(self) -> None:
        from ci.cli import print_version

        print_version()


def take_over() -> None:
    """Run `inv`'s command line under `InvProgram` (called by tasks.py when `inv` loads it).

    Invoke's own Program has parsed only its core options when it imports tasks.py; a
    usage error in the task's options would exit 1 there. Our Program parses the same
    words with the same parser and exits as `vllm-omni-ci` does."""
    binary = os.path.basename(sys.argv[0])
    if binary not in ("inv", "invoke"):
        return
    InvProgram(binary).run(list(sys.argv))
    sys.exit(0)
