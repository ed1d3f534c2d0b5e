"""The text files in `step --artifact-dir`, masked before they are copied or uploaded.

What the command writes there is uploaded as it is (Buildkite's `artifact_paths`),
so a secret it printed into a report would leak where step's own files are masked.
Every text file (it decodes as UTF-8 and has no NUL in its first 8 KiB) is rewritten
with each secret masked; a binary file is left as it is. Links are never followed: a
link to a file elsewhere is not rewritten (nor copied as its target's content), and a
rewritten file replaces its name, so a hard link's other names keep their content.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import os
import stat
import tempfile

from ci.redact import Redactor, StreamRedactor

SNIFF = 8192  # the bytes a NUL in makes a file binary
CHUNK = 1 << 20


def inside(path: str, root: str) -> bool:
    """Whether `path` resolves (links followed) to `root` or below it."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def mask_texts(top: str, redact: Redactor) -> list[tuple[str, str]]:
    """Mask every text file under `top`; (path, why) for each one that could not be."""
    failed: list[tuple[str, str]] = []
    if not redact:
        return failed
    for parent, _dirs, files in os.walk(top):  # a linked directory is not entered
        for name in files:
            path = os.path.join(parent, name)
            try:
                _mask_file(path, redact)
            except OSError as exc:
                failed.append((path, exc.strerror or str(exc)))
    return failed


def _mask_file(path: str, redact: Redactor) -> None:
    """Rewrite `path` masked, through a new file beside it, if it is text and has a secret."""
    if not stat.S_ISREG(os.lstat(path).st_mode):
        return  # a link, a FIFO, a socket: nothing of ours to rewrite
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as source:
        mode = stat.S_IMODE(os.fstat(source.fileno()).st_mode)
        head = source.read(SNIFF)
        if b"\0" in head:
            return
        check = codecs.getincrementaldecoder("utf-8")().decode  # strict: binary raises
        stream = StreamRedactor(redact)
        before, after = hashlib.sha256(), hashlib.sha256()
        out = tempfile.NamedTemporaryFile(
            dir=os.path.dirname(path), prefix=".vllm-omni-ci-mask-", delete=False
        )
        try:
            with out:
                data = head
                while True:
                    try:
                        check(data, final=not data)
                    except UnicodeDecodeError:
                        return  # binary after all: left as it is
                    masked = stream.feed(data) if data else stream.flush()
                    before.update(data)
                    after.update(masked)
                    out.write(masked)
                    if not data:
                        break
                    data = source.read(CHUNK)
            if before.digest() != after.digest():
                os.chmod(out.name, mode)
                os.replace(out.name, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(out.name)
