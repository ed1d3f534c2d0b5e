"""Secrets never print, whatever form they take: through `vllm-omni-ci step`, end to end.

`step` goes through the door for everything it prints: the echoed `$ …` line,
the dry-run plan, the timeout note and the child's own output, which the door
copies through the redactor when there is a secret to mask.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ci.redact import MASK
from tests.conftest import cli_path
from tests.inproc import Outcome, run_task

QUOTED = "pa'ss_X-41f7"  # shell quoting splits it: 'pa'"'"'ss_X-41f7'
MULTI = "-----BEGIN TEST KEY-----\nline-one-7c1e0a\nline-two-9b3d2f\n-----END TEST KEY-----"


def env(**values: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k != "BUILDKITE"}
    base.update(values)
    return base


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def assert_hidden(secret: str, *texts: str) -> None:
    for text in texts:
        assert secret not in text, text
        for line in secret.splitlines():
            if len(line) >= 6:
                assert line not in text, text


# ------------------------------------------------------------ quoted and multi-line values


def test_a_quote_in_a_secret_does_not_unmask_the_dry_run_plan() -> None:
    done = run_task(
        "step", "--dry-run", "--", "echo", QUOTED, f"--password={QUOTED}",
        env=env(QUOTE_TOKEN=QUOTED),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert_hidden(QUOTED, done.stdout, done.stderr)
    assert "pa'" not in done.stdout and "ss_X-41f7" not in done.stdout
    assert f"$ echo {MASK} '--password={MASK}'" in done.stdout.splitlines()


def test_a_quote_in_a_secret_does_not_unmask_the_echo_or_the_output() -> None:
    done = run_task("step", "--", "echo", QUOTED, env=env(QUOTE_TOKEN=QUOTED))
    assert done.returncode == 0, done.stderr
    assert_hidden(QUOTED, done.stdout, done.stderr)
    assert "ss_X-41f7" not in done.stderr
    assert f"$ echo {MASK}" in done.stderr.splitlines()
    assert MASK in done.stderr.splitlines()  # the child's own `echo` line


def test_a_quote_in_a_secret_does_not_unmask_the_timeout_note() -> None:
    done = run_task(
        "step", "--timeout", "1s", "--", "bash", "-c", "sleep 30", QUOTED,
        env=env(QUOTE_TOKEN=QUOTED),
    )  # fmt: skip
    assert done.returncode == 124, done.stderr
    assert_hidden(QUOTED, done.stdout, done.stderr)
    assert "ss_X-41f7" not in done.stderr
    assert any(
        line.startswith("timeout: ") and MASK in line for line in done.stderr.splitlines()
    ), done.stderr


def test_each_line_of_a_multi_line_secret_is_masked() -> None:
    """A key printed in part (its last lines, or cut mid-way) still shows none of its lines."""
    code = (
        "import os; key = os.environ['TEST_PRIVATE_KEY']; lines = key.splitlines();"
        "print(lines[1]); print(lines[2][:4] + '|'); print(repr(key)); print(key)"
    )
    done = run_task("step", "--", *python(code), env=env(TEST_PRIVATE_KEY=MULTI))
    assert done.returncode == 0, done.stderr
    assert_hidden(MULTI, done.stdout, done.stderr)
    assert "line-one-7c1e0a" not in done.stderr and "line-two-9b3d2f" not in done.stderr
    assert "line|" in done.stderr  # a piece under 6 characters is not a secret


# ------------------------------------------------------------------ the child's output


def test_a_secret_the_child_prints_in_pieces_is_masked() -> None:
    """Written in two halves with a pause between them: the door holds the first half back."""
    code = (
        "import os, sys, time; s = os.environ['PIECES_TOKEN'];"
        "sys.stdout.write('before ' + s[:7]); sys.stdout.flush(); time.sleep(0.3);"
        "sys.stdout.write(s[7:] + ' after\\n'); sys.stdout.flush();"
        "sys.stderr.write('err ' + s + '\\n')"
    )
    secret = "pieces-secret-0d9e2c"
    done = run_task("step", "--", *python(code), env=env(PIECES_TOKEN=secret))
    assert done.returncode == 0, done.stderr
    assert_hidden(secret, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert f"before {MASK} after" in lines and f"err {MASK}" in lines


@pytest.mark.process  # the bytes the process writes (Outcome holds decoded text)
def test_output_without_secrets_is_copied_byte_for_byte() -> None:
    """Not UTF-8, no final newline, a carriage return: all as written."""
    code = "import sys; sys.stdout.buffer.write(b'a\\xff\\xfe b\\r\\nprogress 50%\\rdone')"
    done = subprocess.run(
        [cli_path(), "step", "--", *python(code)],
        env=env(SOME_TOKEN="bytes-secret-55a1"),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith(b"a\xff\xfe b\r\nprogress 50%\rdone")


@pytest.mark.process  # the process's stderr is a terminal (pty)
def test_through_a_terminal_the_child_still_sees_one_and_its_output_is_masked() -> None:
    """Buildkite runs jobs on a terminal: the child keeps isatty() and colours, minus secrets."""
    secret = "tty-secret-3a8b7e"
    code = (
        "import os, sys; print('tty', os.isatty(1), os.isatty(2));"
        "print('value', os.environ['TTY_TOKEN']); sys.stdout.flush()"
    )
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [cli_path(), "step", "--", *python(code)],
        env=env(TTY_TOKEN=secret),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=secondary,
    )
    os.close(secondary)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([primary], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(primary, 65536)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    assert proc.wait(timeout=60) == 0
    text = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    assert secret not in text
    lines = text.splitlines()
    assert "tty True True" in lines, text
    assert f"value {MASK}" in lines, text


# ------------------------------------------------------------------ which names are secret


@pytest.mark.parametrize(
    "name", ["PASSWORD_FOR_REG", "REGISTRY_PASSWORD_FILE", "HF_TOKEN_PATH", "SECRET_KEY_BASE"]
)
def test_names_of_the_spec_rule_are_masked(name: str) -> None:
    """The runners spec's `*_TOKEN|*_KEY|*_SECRET|*PASSWORD*`, and TOKEN/SECRET as a name part."""
    secret = "named-secret-6f2a91"
    done = run_task("step", "--", "echo", secret, env=env(**{name: secret}))
    assert done.returncode == 0, done.stderr
    assert_hidden(secret, done.stdout, done.stderr)


def test_a_secret_that_is_a_common_word_masks_it_everywhere_and_a_short_one_never() -> None:
    """Fail closed, as Buildkite's agent does; under 6 characters nothing is masked."""
    done = run_task(
        "step", "--", "echo", "python", "abcde",
        env=env(SHORTISH_TOKEN="python", TINY_TOKEN="abcde"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{MASK} abcde" in done.stderr.splitlines()
    assert "python" not in done.stderr


def test_tokenizer_settings_are_not_secrets(tmp_path: Path) -> None:
    done = run_task(
        "step", "--", "echo", "tokenizer-name",
        env=env(TOKENIZERS_PARALLELISM="tokenizer-name"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "tokenizer-name" in done.stderr.splitlines()


# ------------------------------------------------------------------ our own stdout (issue 32)


def test_stdout_masks_a_secret_split_across_writes_and_one_learnt_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every task's stdout passes one masker: a value cut between two writes is masked
    whole, and a secret `remember`ed after the first write is masked from then on."""
    import io

    from ci.redact import remember
    from ci.stdio import GuardedStdout

    monkeypatch.setenv("HF_TOKEN", "split-secret-4c1e")
    sink = io.StringIO()
    out = GuardedStdout(sink)
    out.write("a split-sec")
    out.write("ret-4c1e b\n")
    remember("learnt-secret-77d2")
    print("c learnt-secret-77d2 d", file=out)
    out.flush()
    assert sink.getvalue() == f"a {MASK} b\nc {MASK} d\n"


def test_masked_upload_pipeline_yaml_still_parses(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret's value inside the printed pipeline becomes `[REDACTED]`; the YAML stays YAML."""
    import signal

    import yaml

    from ci.cli import run
    from tests.conftest import SAMPLE

    secret = "upload-ready-pipeline"  # the sample's `depends_on:` key
    monkeypatch.setenv("HF_TOKEN", secret)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        pipeline = ".buildkite/cuda/test-ready.yml"
        run(["upload-pipeline", pipeline, "-r", str(SAMPLE), "-n"])
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    out = capsys.readouterr().out
    assert secret not in out and MASK in out
    assert isinstance(yaml.safe_load(out), dict)


def test_a_secret_in_another_letter_case_is_masked() -> None:
    """A lower- or upper-cased secret still gives it away: masked, whole or in pieces."""
    from ci.redact import Redactor, StreamRedactor

    redact = Redactor(["AbCdEf-9Zq2"])
    assert redact("x abcdef-9zq2 ABCDEF-9ZQ2 AbCdEf-9Zq2 y") == f"x {MASK} {MASK} {MASK} y"
    stream = StreamRedactor(redact)
    pieces = [
        stream.feed(b"one abcd"),
        stream.feed(b"ef-9z"),
        stream.feed(b"q2 two"),
        stream.flush(),
    ]
    assert b"".join(pieces).decode() == f"one {MASK} two"


def test_an_input_lower_cased_in_an_error_is_masked(inproc: Callable[..., Outcome]) -> None:
    """select-suites quotes DEBUG_TEST_YAML lower-cased, as select_test_suites.py did."""
    secret = "Suite-Secret-7QX"
    done = inproc(
        "select-suites", "--branch", "main", "--debug-test-yaml", secret,
        env=env(HF_TOKEN=secret),
    )  # fmt: skip
    assert done.code == 2
    assert done.stderr.startswith("error: DEBUG_TEST_YAML entries must be"), done.stderr
    assert secret.lower() not in done.stderr.lower()
