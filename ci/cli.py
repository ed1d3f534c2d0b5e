"""`vllm-omni-ci`: the program every CI job command line calls, usable from any directory.

Built from the task definitions (`ci.tasks.TASKS`) with our own parser
(`ci.grammar`), so that a job loads the definitions, the parser and what its task
uses: no Invoke, no config file of any kind. `inv` is the Invoke front end over the
same definitions (`ci.inv`). How a run ends (exit codes, a closed stdout, masking):
`ci.stdio`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, Protocol

from ci import stdio
from ci.errors import Stop, TaskError, Unavailable
from ci.grammar import CommandLine, parse, refuse_empty_values
from ci.taskdef import TaskDef

DISTRIBUTION = "vllm-omni-ci"
WIDTH = 100  # help text is wrapped to this many columns


def main() -> None:
    """The console script."""
    try:
        run(sys.argv[1:])
    finally:
        # The process ends here. Frozen, its objects are skipped by the interpreter's
        # final collections: about 13 ms of CPU in an upload job. stdout is already
        # flushed (`ci.stdio`); only here, never in `run`, which tests and nox call.
        import gc

        gc.freeze()


def run(
    words: Sequence[str], binary: str = DISTRIBUTION, defaults: Mapping[str, str] | None = None
) -> None:
    """Run the command line `words` (program name excluded); every way out is an exit code.
    `defaults`: values for task options the command line leaves out (`nox -s ready`: the
    sample as --repo)."""
    stdio.run(lambda: _execute(words, binary, defaults or {}))


def parse_line(words: Sequence[str], binary: str = DISTRIBUTION) -> CommandLine:
    """The command line `words`, checked against every task's definition."""
    from ci.tasks import TASKS

    return parse(words, TASKS, binary)


def _execute(words: Sequence[str], binary: str, defaults: Mapping[str, str]) -> None:
    from ci.tasks import TASKS as tasks  # a task's module loads when the line names it

    line = parse(words, tasks, binary)
    if line.help or not (line.calls or line.listing or line.version):
        print(_help(line, tasks, binary))
        return
    if line.version:
        print_version()
        return
    if line.listing:
        print(task_list(tasks))
        return
    refuse_empty_values((call.task.name, call.values) for call in line.calls)
    for call in line.calls:
        values: dict[str, Any] = dict(call.values)
        for name, value in defaults.items():
            if call.task.option(name) is not None:
                values.setdefault(name, value)
        call.task.call(values, line.words)


def print_version() -> None:
    """`--version`: the installed distribution's version (the build read it from VERSION),
    looked up only when asked, so that startup stays cheap."""
    from importlib import metadata

    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "unknown"
    print(f"{DISTRIBUTION} {version}")


def task_list(tasks: Mapping[str, TaskDef]) -> str:
    """`--list`: every task and the first line of its docstring."""
    width = max(len(name) for name in tasks) + 2
    rows = [f"  {name:<{width}}{task.summary}" for name, task in tasks.items()]
    return "Tasks:\n\n" + "\n".join(rows)


def _help(line: CommandLine, tasks: Mapping[str, TaskDef], binary: str) -> str:
    if isinstance(line.help, str):
        return task_help(tasks[line.help], binary)
    core = [
        ("-h [TASK], --help[=TASK]", "show this help, or TASK's options"),
        ("-l, --list", "list the tasks"),
        ("-V, --version", "show the version"),
    ]
    return (
        f"Usage: {binary} [--help [TASK] | --list | --version]\n"
        f"       {binary} TASK [OPTIONS] [-- WORDS]\n\n"
        f"Core options:\n{_columns(core)}\n\n{task_list(tasks)}"
    )


def task_help(task: TaskDef, binary: str) -> str:
    """`TASK --help`: usage, the docstring, and one row per option."""
    import textwrap

    positional = " ".join(o.name.upper() for o in task.options if o.positional)
    usage = f"Usage: {binary} {task.name} [OPTIONS]" + (f" {positional}" if positional else "")
    if task.words:
        usage += " [-- WORDS]"
    rows = []
    for option in task.options:
        value = "" if option.kind is bool else f" {option.name.upper()}"
        flags = f"{option.short}, {option.flag}" if option.short else option.flag
        rows.append((flags + value, option.help))
    doc = textwrap.indent(textwrap.dedent(_body(task.doc)), "  ").rstrip()
    lineage = textwrap.fill(
        task.lineage, WIDTH, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
    )
    return f"{usage}\n\n  {task.summary}\n{lineage}\n{doc}\n\nOptions:\n{_columns(rows)}\n"


def _body(doc: str) -> str:
    """The docstring without its first line (the summary), whose indent differs."""
    _, _, rest = doc.strip("\n").partition("\n")
    return rest


def _columns(rows: Sequence[tuple[str, str]]) -> str:
    import textwrap

    width = min(max(len(left) for left, _ in rows) + 4, 36)
    lines = []
    for left, text in rows:
        wrapped = textwrap.wrap(text, WIDTH - width, break_on_hyphens=False) or [""]
        first = f"  {left}".ljust(width)
        if len(first) > width - 1 and len(left) + 2 >= width:
            lines.append(f"  {left}")
            first = " " * width
        lines.append(first + wrapped[0])
        lines += [" " * width + more for more in wrapped[1:]]
    return "\n".join(lines)


class NoxSession(Protocol):
    """What the tier sessions use of `nox.Session` (nox is not a dependency of `ci/`)."""

    posargs: list[str]

    def error(self, *args: Any) -> NoReturn: ...

    def skip(self, *args: Any) -> NoReturn: ...


def nox_tier(session: NoxSession, tier: str, *, default_repo: str) -> None:
    """`nox -s TIER -- OPTIONS` is `vllm-omni-ci tier TIER OPTIONS`, default --repo the sample.

    A problem ends the session, never nox, which then reports it and goes on to the next
    session: a tier the repo lacks is `session.skip` with its reason; bad input or a failed
    tier `session.error` with the line `tier` prints. A signal is nox's KeyboardInterrupt.
    """
    import signal

    from ci.door import FORWARDED_SIGNALS, Interrupted

    handlers = {sig: signal.getsignal(sig) for sig in FORWARDED_SIGNALS}  # the task sets ours
    passing = stdio.PASS_ERRORS.set(True)
    try:
        run(["tier", tier, *session.posargs], defaults={"repo": default_repo})
    except Unavailable as exc:
        session.skip(exc.reason)
    except Interrupted:
        raise KeyboardInterrupt from None
    except (TaskError, Stop) as exc:
        said = "; ".join(
            line.removeprefix("error: ").rstrip(":") for line in stdio.message_lines(exc)
        )
        session.error(said or f"a blocking step failed (exit {exc.code}); see the summary")
    except SystemExit as exc:  # the program's own ways out (74: stdout not written)
        if exc.code:
            session.error(f"exit {exc.code}")
    finally:
        stdio.PASS_ERRORS.reset(passing)
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
