"""The tee of every tier job: the output to a log file, masked.

It ends the pipeline (`"$@" 2>&1 | python -c BOOTSTRAP PARENT LOG MODE STATUS`) as
`tee` did, except: every secret (`Redactor.for_env`) is masked in LOG as the door masks
a stream (`StreamRedactor`: a read never cuts one in two); the stream (the CI log,
redacted by Buildkite) passes as is, MODE `log` drops it. A LOG that cannot be written
stops only the copy to LOG; the status stays the command's (`tee`'s failure replaced
it under pipefail), and the STATUS file says `ok` or `error: <reason>`. It ignores
SIGTERM, SIGINT, SIGHUP and SIGQUIT and ends with its input, so output written while
the tree is ended still reaches the log. (`step --summary-tail`'s log is the door's:
`door.run(log=…)`, which never waits for a process the command left holding it.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Sequence

import ci
from ci.redact import Redactor, StreamRedactor


class _Sink:
    """One output; its first failure is kept (for the STATUS file), then it is closed."""

    def __init__(self, fd: int | None, name: str) -> None:
        self.fd, self.name = fd, name
        self.problem = ""

    def write(self, data: bytes) -> None:
        while data and self.fd is not None:
            try:
                data = data[os.write(self.fd, data) :]
            except OSError as exc:
                self.fail(exc)

    def fail(self, exc: OSError, verb: str = "write") -> None:
        self.problem = self.problem or f"cannot {verb} {self.name}: {exc.strerror or exc}"
        if self.fd is not None and self.fd > 2:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self.fd = None

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError as exc:  # a delayed write error (NFS, quota) shows at close
                self.fd = None
                self.fail(exc)


def main(argv: Sequence[str]) -> int:
    """`LOG MODE(tee|log) STATUS`; always 0."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    path, mode, status = argv
    stream = _Sink(sys.stdout.fileno() if mode == "tee" else None, "")
    log = _Sink(None, path)
    try:
        log.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as exc:
        log.fail(exc, "open")
    masker = StreamRedactor(Redactor.for_env())
    while True:
        try:
            data = os.read(0, 65536)  # a signal (all ignored) never interrupts it
        except OSError:
            data = b""
        log.write(masker.feed(data) if data else masker.flush())
        stream.write(data)
        if not data:
            break
    log.close()
    if status:
        with contextlib.suppress(OSError), open(status, "w", encoding="utf-8") as fh:
            fh.write(f"error: {log.problem}\n" if log.problem else "ok\n")
    return 0


# What runs the tee: our package first on sys.path (ahead of a `ci/` in the command's
# working directory, and under `python -I`), then `main`. argv: the package's parent, LOG, ...
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from ci.runner.teelog import main; sys.exit(main(sys.argv[2:]))"
)


def package_parent() -> str:
    """The directory that holds the `ci` package we run from."""
    return os.path.dirname(os.path.dirname(os.path.abspath(ci.__file__)))
