"""Tier runs and the plan in a terminal: words whole, names whole, no shortcodes, no noise.

Each test runs the CLI in a pseudo-terminal 100 columns wide, as a person at
a terminal would: the child sees a real terminal (`isatty()`, the window
size, COLUMNS), so rich renders for one (live table, terminal width). What it
wrote comes back with the escape sequences removed.

Whole names are checked on the tables themselves: every cell of a row,
its wrapped lines joined again, must be the name it shows (a word folded
in two would not join back), and no line may be wider than the terminal
(the terminal itself would then cut it anywhere).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.cells import cell_len

from ci.tiers.rules import RULE
from ci.tiers.terminal import strip_emoji
from tests.conftest import SAMPLE, cli_path, run_cli
from tests.gitrepo import buildkite_env
from tests.tiers_fixture import fixture_repo

COLUMNS = 100
SHORTCODE = re.compile(r"(?<!\S):[a-z0-9_+-]+:(?!\S)")
# CSI (colours, cursor moves, erase), OSC (titles, links), and two-byte escapes.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")


@dataclass(frozen=True)
class Screen:
    code: int
    raw: str

    @property
    def text(self) -> str:
        plain = _ESCAPES.sub("", self.raw).replace("\r\n", "\n")
        # A bare \r returns to the start of the line: keep what was written last.
        return "\n".join(line.rsplit("\r", 1)[-1] for line in plain.split("\n"))

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")


def run_in_terminal(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | str,
    columns: int = 100,
    timeout: float = 300,
    stderr: Path | None = None,
) -> Screen:
    """Run `argv` with a pty of `columns` x 50 as its terminal; fail the test if it hangs.

    `stderr`: a file for the child's stderr instead of the terminal (to look at stdout alone).
    """
    import pytest

    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environ = {**env, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm-256color"}
    err = open(stderr, "wb") if stderr is not None else None
    try:
        proc = subprocess.Popen(
            list(argv), stdin=child, stdout=child, stderr=err or child, env=environ, cwd=str(cwd)
        )
    finally:
        os.close(child)
        if err is not None:
            err.close()
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"{argv[0]} still ran after {timeout}s in the terminal")
            ready, _, _ = select.select([main], [], [], 0.5)
            if not ready:
                if proc.poll() is not None and not _pending(main):
                    break
                continue
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(main)
    code = proc.wait(timeout=60)
    return Screen(code, b"".join(chunks).decode("utf-8", errors="replace"))


def _pending(fd: int) -> bool:
    ready, _, _ = select.select([fd], [], [], 0)
    return bool(ready)


def table_rows(lines: Sequence[str], key: int = 0) -> list[list[str]]:
    """The cells of every row of the box tables in `lines`; a wrapped cell's lines joined again.

    A line whose cell `key` is empty continues the row above (column `key`
    of these tables is never empty on a row of its own).
    """
    rows: list[list[str]] = []
    for line in lines:
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if rows and not cells[key] and len(cells) == len(rows[-1]):
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    return rows


def words(text: str) -> str:
    return " ".join(text.split())


def assert_fits(screen: Screen, columns: int = COLUMNS) -> None:
    wide = [line for line in screen.lines if cell_len(line) > columns]
    assert not wide, wide


def local_env(**values: str) -> dict[str, str]:
    env = buildkite_env(**values)
    env.pop("CI", None)
    return env


# --------------------------------------------------------------------------- plan


@pytest.fixture
def plan_repo(tmp_path: Path) -> Path:
    from tests.test_plan import MODEL, corpus_repo

    repo = corpus_repo(tmp_path)
    repo.branch("my-change")
    repo.commit_files({MODEL: "class Model:\n    size = 16\n"}, "one model")
    return repo.path


def plan_jobs(repo: Path, platform: str) -> list[dict[str, object]]:
    """The jobs `plan --format json` lists for `platform` (pipeline name, label, hardware)."""
    done = run_cli(
        "plan", "--labels", "ready", "--platform", platform, "--repo", str(repo), "--format",
        "json", env=local_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)["platforms"]
    return [
        {"pipeline": p["name"].removeprefix(f"{platform} "), **s}
        for p in found["pipelines"]
        for s in p["steps"]
    ]


def hardware(job: Mapping[str, object]) -> str:
    preset, queue = job["preset"], job["queue"]
    return f"{preset} ({queue})" if preset and queue else str(preset or queue)


def test_plan_in_a_100_column_terminal_keeps_words_and_names_whole(
    plan_repo: Path, tmp_path: Path
) -> None:
    screen = run_in_terminal(
        [
            cli_path(),
            "plan",
            "--labels",
            "ready",
            "--platform",
            "npu,xpu",
            "--repo",
            str(plan_repo),
        ],
        env=local_env(),
        cwd=plan_repo,
        stderr=tmp_path / "stderr",
    )
    assert screen.code == 0, screen.text
    assert_fits(screen)  # the plan's own lines wrap between words, not at the terminal's edge
    assert SHORTCODE.search(screen.text) is None, screen.text  # `:buildkit:` & co. are dropped
    joined = words(screen.text)
    assert (
        "nightly (.buildkite/npu/test-npu-nightly.yml): not-uploaded — upload step's if is false"
        " (needs label 'nightly-test', or a main or scheduled build)"
    ) in joined

    npu = plan_jobs(plan_repo, "npu")
    header = next(line for line in screen.lines if line.startswith("┃ pipeline"))
    assert [h.strip() for h in header.strip("┃").split("┃")] == [
        "pipeline", "group", "step", "hardware", "timeout",
    ]  # fmt: skip
    # `par.` is empty on every row, `blocking` is the same on every row: said once.
    assert "  every job: blocking yes" in screen.lines
    xpu_at = next(i for i, line in enumerate(screen.lines) if line.startswith("┃ group"))
    rows = [r for r in table_rows(screen.lines[:xpu_at]) if len(r) == 5]
    assert [r[0] for r in rows] == [j["pipeline"] for j in npu]
    assert [r[2] for r in rows] == [strip_emoji(str(j["label"])) for j in npu]
    assert [r[3] for r in rows] == [hardware(j) for j in npu]
    assert [r[1] for r in rows] == [strip_emoji(" / ".join(j["groups"])) for j in npu]  # type: ignore[arg-type]

    # One job (xpu): nothing is "the same on every row", so `blocking` stays a column.
    assert "blocking" in screen.lines[xpu_at]
    assert not any(line.startswith("  every job:") for line in screen.lines[xpu_at:])


def test_plan_in_a_terminal_too_narrow_for_the_table_lists_the_jobs(
    plan_repo: Path, tmp_path: Path
) -> None:
    screen = run_in_terminal(
        [cli_path(), "plan", "--labels", "ready", "--platform", "npu", "--repo", str(plan_repo)],
        env=local_env(),
        cwd=plan_repo,
        columns=60,
        stderr=tmp_path / "stderr",
    )
    assert screen.code == 0, screen.text
    assert_fits(screen, 60)
    assert "┏" not in screen.text
    joined = words(screen.text)
    for job in plan_jobs(plan_repo, "npu"):
        label = " / ".join([*job["groups"], job["label"]])  # type: ignore[list-item]
        assert f"- [{job['pipeline']}] {strip_emoji(label)}; hardware {hardware(job)}" in joined


# --------------------------------------------------------------------------- tier

EMOJI_TIER = """\
steps:
  - group: ":card_index_dividers: Fixture group"
    steps:
      - label: ":rocm: Simple · A fairly long step label that has to wrap on words · Shard %N/%t"
        agent_pool: mi300_1
        parallelism: 2
        mirror_hardwares: [amdproduction]
        grade: Blocking
        commands:
          - "pytest -q tests/diffusion -m 'core_model and cpu'"
      - label: ":docker: Needs GPUs"
        agent_pool: mi300_4
        mirror_hardwares: [amdproduction]
        grade: Blocking
        commands:
          - "pytest -q tests/engine -m 'core_model and rocm and cards_4'"
"""


def test_tier_in_a_100_column_terminal(tmp_path: Path) -> None:
    """The live table: whole words and names, no shortcodes, and no CPU-rule paragraph."""
    repo = fixture_repo(tmp_path / "target")
    (repo / ".buildkite/amd/test-amd-ready.yml").write_text(EMOJI_TIER)
    env = local_env(BUILDKITE_COMMIT="fixture", HF_HOME=str(tmp_path / "hf"))
    argv = [
        cli_path(),
        "tier",
        "ready",
        "--platform",
        "rocm",
        "--repo",
        str(repo),
        "--native",
        "--cpu-only",  # `needs mi300_4`, whatever devices this host has
    ]
    screen = run_in_terminal(argv, env=env, cwd=tmp_path)
    assert screen.code == 0, screen.text
    assert_fits(screen)
    assert "CPU-runnable" not in screen.text  # the rule is for --list and --help
    assert SHORTCODE.search(screen.text) is None, screen.text
    run = next((tmp_path / "build/tiers/ready-rocm").glob("2*"))
    assert f"results: build/tiers/ready-rocm/{run.name}" in screen.lines

    title = f"ready tier (rocm) — {repo}"
    last = max(i for i, line in enumerate(screen.lines) if line == title)
    rows = table_rows(screen.lines[last:], key=2)  # the result
    label = "Simple · A fairly long step label that has to wrap on words · Shard"
    assert [r[0] for r in rows] == [f"{label} 1/2", f"{label} 2/2", "Needs GPUs"]
    assert [r[2] for r in rows] == ["passed", "passed", "needs mi300_4"]
    logs = sorted(path.name for path in (run / "rocm").iterdir())
    assert len(logs) == 2 and all(name.startswith("01-simple-a-fairly-long-") for name in logs)


def test_list_prints_the_cpu_rule_wrapped_on_words() -> None:
    env = {**os.environ, "COLUMNS": str(COLUMNS)}
    done = run_cli("tier", "ready", "--platform", "rocm", "--repo", str(SAMPLE), "--list", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("# ready tier for rocm: ")
    rule = [line for line in lines[1:] if line.startswith("# ")]
    assert rule and all(len(line) <= COLUMNS for line in rule)
    assert " ".join(line.removeprefix("# ") for line in rule) == RULE
    helped = run_cli("tier", "ready", "--help", env=env)
    assert words(RULE) in words(helped.stdout)
