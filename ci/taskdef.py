"""A task, defined once: its name, options, help and the function it calls.

Both front ends are built from these values: `vllm-omni-ci` (`ci.cli`, our own
parser, no Invoke) and `inv` (`ci.inv`, an Invoke collection made from them), so
the two cannot drift. A definition imports nothing but this module; the task's
function loads the library it uses when it runs.

An option's kind follows its default, as Invoke's do: False is a flag, an int a
whole number, a str or None a value, and an option named in `iterable` is
repeatable (a list). A parameter without a default is positional and required
(`tier NAME`); it may also be given as its option (`--name NAME`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# The only short flags, each with one meaning in every task (`-r` never also --root).
SHORT_FLAGS = {"repo": "r", "dry_run": "n", "jobs": "j"}
# The help of an option every task means the same by, unless a task words its own.
COMMON_HELP = {
    "repo": "target checkout (default: git top-level of the current directory)",
    "dry_run": "print the plan and run nothing",
    "to_ref": "end of that range (default HEAD; WORKTREE = include uncommitted work)",
}
REQUIRED = object()  # the default of a positional option: it has none, it must be given


@dataclass(frozen=True)
class Option:
    """One option of a task; `name` is the Python keyword (`dry_run`), `flag` what users type."""

    name: str
    default: Any
    help: str
    positional: bool = False
    iterable: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def short(self) -> str:
        letter = SHORT_FLAGS.get(self.name)
        return f"-{letter}" if letter else ""

    @property
    def kind(self) -> type:
        """bool, int, str or list: what a given value becomes."""
        if self.iterable:
            return list
        if isinstance(self.default, bool):
            return bool
        return int if isinstance(self.default, int) else str


@dataclass(frozen=True)
class TaskDef:
    """A task: `name` as typed (`build-image`, `release.publish-images`), its options in the
    function's order, the docstring (first line: the `--list` summary), and `script`, the
    replaced script whose grammar its arguments keep (`run_cov_split.sh`), if any.

    `words`: the task takes the words after `--` (as `words=`, quoting intact); a task
    without them refuses such words instead of ignoring them. `replaces`: the old
    scripts (or inline idioms) it replaces, as docs/migration.md's first column names
    them; none for a task new in vllm-omni-ci."""

    name: str
    function: Callable[..., None]
    options: tuple[Option, ...]
    doc: str
    script: str = ""
    words: bool = False
    replaces: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""

    @property
    def lineage(self) -> str:
        """The help's line on what this task replaces (docs/migration.md has the details)."""
        if not self.replaces:
            return "Replaces no old script: new in vllm-omni-ci."
        return f"Replaces {', '.join(self.replaces)} (docs/migration.md)."

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    def arguments(self, values: dict[str, Any]) -> dict[str, Any]:
        """Every option's value: those `values` gives, the defaults for the rest."""
        return {o.name: values.get(o.name, [] if o.iterable else o.default) for o in self.options}

    def call(self, values: dict[str, Any], words: Sequence[str] = ()) -> None:
        """Run the task's function with every option's value and, if it takes them, `words`."""
        from ci.door import install_interrupt_handlers

        given = self.arguments(values)
        if self.words:
            given["words"] = list(words)
        install_interrupt_handlers()
        self.function(**given)


def task(
    *,
    name: str = "",
    help: dict[str, str] | None = None,
    iterable: Sequence[str] = (),
    script: str = "",
    replaces: Sequence[str] = (),
) -> Callable[[Callable[..., None]], TaskDef]:
    """Define a task from a function: its keyword parameters are the options.

    A parameter named `words` receives the words after `--`. Read from the function's
    code object, not `inspect`, which would cost every job its import.
    """

    def define(function: Callable[..., None]) -> TaskDef:
        code = function.__code__
        names = code.co_varnames[: code.co_argcount]
        defaults = function.__defaults__ or ()
        first_default = len(names) - len(defaults)
        texts = {**COMMON_HELP, **(help or {})}
        options = []
        for i, option in enumerate(names):
            if option == "words":
                continue
            default = defaults[i - first_default] if i >= first_default else REQUIRED
            is_list = option in iterable
            options.append(
                Option(
                    option,
                    None if is_list else default,
                    texts.get(option, ""),
                    positional=default is REQUIRED,
                    iterable=is_list,
                )
            )
        unknown = (set(help or {}) | set(iterable)) - set(names)
        if unknown:
            raise TypeError(f"{function.__name__}: no parameter named {sorted(unknown)}")
        return TaskDef(
            name or function.__name__.replace("_", "-"),
            function,
            tuple(options),
            function.__doc__ or "",
            script=script,
            words="words" in names,
            replaces=tuple(replaces),
        )

    return define


def after_dashdash(argv: Sequence[str] | None = None) -> list[str]:
    """Everything after the first `--`, with its quoting intact."""
    args = list(sys.argv if argv is None else argv)
    return args[args.index("--") + 1 :] if "--" in args else []
