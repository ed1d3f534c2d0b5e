"""A tier job's log writer: `COMMAND 2>&1 | python -I logsink.py LOG MODE STATUS`.

The job wrapper (`ci.tiers.plan`) pipes the job's output into this program,
so the job never writes to the results disk itself and its exit status is
its own (the wrapper exits with `${PIPESTATUS[0]}`):

- every line goes to LOG with the secrets of this environment (the job's env
  over ours, what `ci.redact` calls secret) replaced by `[REDACTED]`;
- with MODE `tee` the output also goes to stdout as it comes, unchanged (our
  stderr: the CI log, which Buildkite redacts itself);
- a LOG that cannot be opened or written (a full or read-only disk) stops the
  copy to LOG but never the job: stdin is read to the end either way, and
  STATUS (outside the results folder) says `ok` or `error: <reason>`;
- it ignores SIGTERM, SIGINT and SIGHUP and ends when its input does (when
  the job's whole tree has closed the pipe), so what the job prints while a
  timeout or an interrupt ends its tree still reaches the log, and the job
  never gets a broken pipe from us; KILL still ends it with the tree.

It runs by path with `-I` (no PYTHONPATH or user site of the job's env), so it
puts the directory holding the `ci` package on `sys.path` itself.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from pathlib import Path
from typing import BinaryIO

from ci.redact import Redactor

# A line longer than this is written without waiting for its end (a progress bar).
LONG_LINE = 1 << 20
CHUNK = 1 << 16


class _Log:
    """LOG, written line by line after redaction, until the first failure."""

    def __init__(self, path: str) -> None:
        self.redact = Redactor.for_env(dict(os.environ))
        self.problem = ""
        self.pending = b""
        self.file: BinaryIO | None = None
        try:
            self.file = open(path, "wb", buffering=0)
        except OSError as exc:
            self.problem = f"cannot open {path}: {exc.strerror or exc}"

    def _write(self, data: bytes) -> None:
        if self.file is None or not data:
            return
        text = data.decode("utf-8", "surrogateescape")
        out = self.redact(text).encode("utf-8", "surrogateescape")
        try:
            view = memoryview(out)
            while view:
                written = self.file.write(view)
                if not written:  # nothing taken and no error: treat as a full disk
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                view = view[written:]
        except OSError as exc:
            self.problem = f"cannot write {self.file.name}: {exc.strerror or exc}"
            self._drop()

    def _drop(self) -> None:
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass
            self.file = None

    def add(self, chunk: bytes) -> None:
        """Write the complete lines (ended by \\n or \\r: a secret is never cut in two)."""
        self.pending += chunk
        end = max(self.pending.rfind(b"\n"), self.pending.rfind(b"\r")) + 1
        if end:
            self._write(self.pending[:end])
            self.pending = self.pending[end:]
        if len(self.pending) > LONG_LINE:
            self._write(self.pending)
            self.pending = b""

    def close(self) -> None:
        self._write(self.pending)
        self.pending = b""
        if self.file is not None:
            try:
                self.file.close()
            except OSError as exc:
                self.problem = self.problem or f"cannot write {self.file.name}: {exc.strerror}"
            self.file = None


def _tee(data: bytes) -> bool:
    """Copy to stdout; False once stdout is gone (the output is then only logged)."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(1, view) :]
    except OSError:
        return False
    return True


def _status(path: str, problem: str) -> None:
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(f"error: {problem}\n" if problem else "ok\n")
    except OSError:
        pass  # the session then says it could not tell


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: logsink.py LOG MODE(tee|log) STATUS\n")
        return 2
    path, mode, status = argv
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    log = _Log(path)
    tee = mode == "tee"
    try:
        while True:
            try:
                chunk = os.read(0, CHUNK)
            except InterruptedError:
                continue
            if not chunk:
                break
            if tee:
                tee = _tee(chunk)
            log.add(chunk)
    finally:
        log.close()
        _status(status, log.problem)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the folder holding `ci`
    raise SystemExit(main(sys.argv[1:]))
