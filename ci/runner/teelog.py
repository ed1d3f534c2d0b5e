"""The tee of `step --summary-tail`: the command's output to the job log and to a file, masked.

It runs at the end of the command's pipeline (`"$@" 2>&1 | tee-program LOG`,
see `ci.runner.step`), as `tee` did, with two differences:

- every secret of the environment is masked (`Redactor.for_env`) in what it
  streams and in what it writes, line by line (a line ends at `\\n` or `\\r`), so a
  secret is never cut in two by a read;
- a file it cannot write (a full disk) costs one warning on stderr and the
  file; the stream goes on, and the pipeline's status stays the command's
  (`exit ${PIPESTATUS[0]}`), where `tee`'s own failure replaced it under pipefail.

It ignores SIGTERM, SIGINT and SIGHUP and ends when its input does (when the
command's whole tree has closed the pipe), so the output written while the
tree is being ended still reaches the log. KILL still ends it with the tree.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

import ci
from ci.redact import Redactor

# A longer line without a line end is passed on in pieces, cut at a space where
# there is one (a secret has none), so that memory stays bounded.
MAX_LINE = 1 << 20


def _cut(buffer: bytes) -> int:
    """Where the complete lines of `buffer` end (0: none yet)."""
    end = max(buffer.rfind(b"\n"), buffer.rfind(b"\r")) + 1
    if end == 0 and len(buffer) > MAX_LINE:
        space = buffer.rfind(b" ", 0, MAX_LINE)
        end = space + 1 if space > 0 else MAX_LINE
    return end


class _Sink:
    """One output; a failed write says so once on stderr and stops writing there."""

    def __init__(self, fd: int | None, name: str, warn: bool) -> None:
        self.fd = fd
        self.name = name
        self.warn = warn

    def write(self, data: bytes) -> None:
        while data and self.fd is not None:
            try:
                data = data[os.write(self.fd, data) :]
            except OSError as exc:
                self.fail(exc)

    def fail(self, exc: OSError) -> None:
        if self.warn:
            _warn(f"step: could not write {self.name}: {exc.strerror}; the output still streams")
        if self.fd is not None and self.fd > 2:
            try:
                os.close(self.fd)
            except OSError:
                pass
        self.fd = None


def _warn(message: str) -> None:
    try:
        sys.stderr.write(Redactor.for_env()(message) + "\n")
        sys.stderr.flush()
    except OSError:
        pass


def main(argv: Sequence[str]) -> int:
    """`teelog LOG`: copy stdin to stdout and LOG; always 0 (the command's status decides)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    redact = Redactor.for_env()
    log_path = argv[0]
    stream = _Sink(sys.stdout.fileno(), "the job log", warn=False)
    try:
        log = _Sink(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), log_path, True)
    except OSError as exc:
        log = _Sink(None, log_path, True)
        log.fail(exc)

    def emit(chunk: bytes) -> None:
        text = chunk.decode("utf-8", errors="surrogateescape")
        masked = redact(text).encode("utf-8", errors="surrogateescape")
        stream.write(masked)
        log.write(masked)

    buffer = b""
    while True:
        try:
            data = os.read(0, 65536)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            break
        buffer += data
        cut = _cut(buffer)
        if cut:
            emit(buffer[:cut])
            buffer = buffer[cut:]
    if buffer:
        emit(buffer)
    if log.fd is not None:
        try:
            os.close(log.fd)
        except OSError as exc:  # a delayed write error (NFS, quota) shows at close
            log.fd = None
            log.fail(exc)
    return 0


# What bash runs: put our package first (ahead of a `ci/` in the command's working
# directory), then the tee. argv: the package's parent directory, the log.
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from ci.runner.teelog import main; sys.exit(main(sys.argv[2:]))"
)


def package_parent() -> str:
    """The directory that holds the `ci` package we run from."""
    return os.path.dirname(os.path.dirname(os.path.abspath(ci.__file__)))
