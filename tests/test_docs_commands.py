"""Every command line the docs show names a real task, session and option.

README.md and docs/*.md are what a newcomer copies and what a vLLM-Omni
maintainer pastes into pipeline YAML, so a renamed flag must fail here, not in
their job. Code spans and code blocks are scanned for `vllm-omni-ci <task>`,
`inv <task>` and `nox -s <session>`; each `--option` before a bare `--` must
be one the task accepts (after `nox -s <tier> --`: the `tier` task's).
Placeholders such as `<platform>` and `[--all\\|--e2e]` are fine: only the
option names are checked.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CORE_FLAGS = {"--list", "--version", "--help", "-l", "-h", "-V"}


def placeholder(word: str) -> bool:
    """`<task>`, `NAME`, `…`: a slot in a synopsis, not a name to check."""
    return word.startswith(("<", "…", "...")) or word.isupper()


TIER_NAMES = {"ready", "merge", "nightly", "weekly"}


def code_snippets(path: Path) -> list[str]:
    """Inline code spans and the lines of code blocks (indented lines joined to the one above)."""
    text = path.read_text()
    snippets: list[str] = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```$", text, re.MULTILINE | re.DOTALL):
        lines: list[str] = []
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and lines:
                lines[-1] += " " + line.strip()
            else:
                lines.append(line)
        snippets.extend(lines)
    prose = re.sub(r"^```[a-z]*\n.*?^```$", "", text, flags=re.MULTILINE | re.DOTALL)
    snippets.extend(re.findall(r"`([^`\n]+)`", prose))
    return snippets


def segment(words: str) -> str:
    """The part of a command line that holds its own options: up to ` -- `, `&&`, `;`, `#`."""
    words = re.sub(r"\[[^\]]*\]", lambda m: m.group(0).replace("|", ","), words)
    return re.split(r" -- |\s--$|&&|;| #|\$\(| \| ", " " + words + " ", maxsplit=1)[0]


def options(words: str) -> set[str]:
    return {m.split("=", 1)[0] for m in re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", words)}


@cache
def task_flags() -> dict[str, set[str]]:
    from ci.tasks import definitions

    flags: dict[str, set[str]] = {}
    for name, task in definitions().items():
        flags[name] = {o.flag for o in task.options} | {"--help", "-h"}
    return flags


def tier_flags() -> set[str]:
    """`nox -s TIER -- OPTIONS` takes the `tier` task's options."""
    return task_flags()["tier"] - {"--name"}


@cache
def session_names() -> set[str]:
    listing = subprocess.run(["nox", "-l"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    return set(re.findall(r"^[*-] (\S+)", listing.stdout, re.MULTILINE))


def doc_commands(pattern: str) -> list[tuple[str, str]]:
    """(doc name, group 1 of PATTERN) for every match in the docs' code snippets."""
    return [
        (doc.name, match.group(1))
        for doc in DOCS
        for snippet in code_snippets(doc)
        for match in re.finditer(pattern, snippet)
    ]


def task_commands() -> list[tuple[str, str]]:
    """The text after `vllm-omni-ci `/`inv ` of every task command in the docs."""
    return doc_commands(r"(?:^|[\s(=$])(?:vllm-omni-ci|inv) (\S.*)")


def nox_commands() -> list[tuple[str, str]]:
    return doc_commands(r"(?:^|\s)nox -s (\S.*)")


def test_the_docs_show_commands_at_all() -> None:
    assert len(task_commands()) > 60
    assert len(nox_commands()) > 5


@pytest.mark.parametrize(("doc", "command"), task_commands())
def test_task_command_names_a_task_and_its_options(doc: str, command: str) -> None:
    name, _, rest = command.partition(" ")
    name = name.rstrip(".,:)`")
    if placeholder(name):
        return
    if name.startswith("-"):
        assert name in CORE_FLAGS, f"{doc}: unknown core option in `{command}`"
        return
    flags = task_flags()
    assert name in flags, f"{doc}: no task {name!r} in `{command}`"
    unknown = options(segment(rest)) - flags[name]
    assert not unknown, f"{doc}: `{command}`: {sorted(unknown)} not options of {name}"


@pytest.mark.parametrize(("doc", "command"), nox_commands())
def test_nox_command_names_sessions_and_their_options(doc: str, command: str) -> None:
    before, _, after = f"{command} ".partition(" -- ")
    sessions = [w for w in before.split() if not w.startswith("-")]
    assert sessions, f"{doc}: `nox -s {command}` names no session"
    for session in (s for word in sessions for s in word.strip("`.,").split("|")):
        if not placeholder(session):
            assert session in session_names(), f"{doc}: no nox session {session!r}"
    if set(sessions) & TIER_NAMES and after.strip():
        unknown = options(segment(after)) - tier_flags()
        assert not unknown, f"{doc}: `nox -s {command}`: {sorted(unknown)} not tier options"
    # nox runs from the noxfile's directory: `--repo .` would be vllm-omni-ci itself.
    assert not re.search(r"--repo \.(\s|$)", after), f"{doc}: `nox -s {command}` uses --repo ."


def test_every_environment_knob_of_ours_is_documented() -> None:
    """A `VLLM_OMNI_CI_*` variable the code reads is named in README.md or docs/."""
    code = "\n".join(p.read_text() for p in (ROOT / "ci").rglob("*.py"))
    names = set(re.findall(r"\bVLLM_OMNI_CI_[A-Z_]*[A-Z]\b", code))
    docs = "\n".join(doc.read_text() for doc in DOCS)
    assert names, "no VLLM_OMNI_CI_* names found in ci/"
    assert not sorted(n for n in names if n not in docs)


def test_plan_md_inputs_table_lists_every_plan_option() -> None:
    text = (ROOT / "docs" / "plan.md").read_text()
    table = text.split("## Inputs", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(--[a-z-]+)", table, re.MULTILINE))
    listed |= set(re.findall(r"`(--[a-z-]+)`", table))
    assert task_flags()["plan"] - {"--help", "-h"} <= listed


# Paths under these roots are ours; a doc naming one that moved is stale.
OUR_ROOTS = ("ci", "scripts", "docs", "examples", "benchmarks", ".ci")
VLLM_OMNI_PATHS = {"scripts/simple_test.sh"}  # vLLM-Omni's own legacy script (migration.md)


def test_every_path_of_ours_a_doc_names_exists() -> None:
    """A path of ours a doc names exists, unless git ignores it (a generated folder,
    such as the sample's wheelhouse, is named before anything has made it)."""
    roots = "|".join(re.escape(r) for r in OUR_ROOTS)
    missing: list[str] = []
    for doc in DOCS:
        for span in re.findall(r"`([^`\n]+)`", doc.read_text()):
            for path in re.findall(rf"(?<![\w./-])((?:{roots})/[\w./-]*)", span):
                path = path.rstrip(".,")
                if path not in VLLM_OMNI_PATHS and not (ROOT / path).exists():
                    missing.append(f"{doc.name}: {path}")
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=ROOT,
        input="\n".join(m.split(": ", 1)[1] for m in missing),
        capture_output=True,
        text=True,
    ).stdout.split()
    assert [m for m in missing if m.split(": ", 1)[1] not in ignored] == []


def test_differences_headings_cited_by_tests_exist() -> None:
    """Tests cite `docs/differences.md "<heading>"`; a renamed entry must not orphan them."""
    text = (ROOT / "docs" / "differences.md").read_text()
    headings = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("##")]
    cited: list[tuple[str, str]] = []
    for test_file in sorted((ROOT / "tests").glob("*.py")):
        if test_file.name == Path(__file__).name:
            continue
        source = test_file.read_text()
        for found in re.finditer(r'docs/differences\.md[,:]?\s*\(?"([^"]+?)["…]', source):
            cite = " ".join(found.group(1).replace("\\n", " ").split()).rstrip("…")
            cited.append((test_file.name, cite))
    assert len(cited) >= 10
    orphans = [c for c in cited if not any(h.startswith(c[1]) for h in headings)]
    assert not orphans


def test_core_help_offers_only_our_own_options() -> None:
    """`vllm-omni-ci --help` showed Invoke's internals (`--complete`, `--write-pyc`, `-D`,
    "[other tasks here ...]"); it offers the three core options it has, then the tasks."""
    from tests.inproc import run_inproc

    done = run_inproc("--help")
    assert done.code == 0, done.stderr
    core = done.stdout.split("Core options:", 1)[1].split("Tasks:", 1)[0]
    assert set(re.findall(r"--([a-z][a-z-]*)", core)) == {"list", "version", "help"}
    assert "other tasks" not in done.stdout
    assert "  step " in done.stdout  # the task list follows


def test_every_shim_is_named_in_the_migration_guide() -> None:
    """A maintainer keeping an old script path needs to know its drop-in exists."""
    guide = (ROOT / "docs" / "migration.md").read_text()
    shims = [p.relative_to(ROOT).as_posix() for p in (ROOT / "scripts").rglob("*.sh")]
    assert shims
    assert not [s for s in shims if f"`{s}" not in guide]


def migration_scripts() -> str:
    """The first column of docs/migration.md's table: the scripts (and idioms) replaced."""
    rows = re.findall(r"^\| (.+?) \| ", (ROOT / "docs" / "migration.md").read_text(), re.M)
    return "\n".join(rows)


@pytest.mark.parametrize("task", sorted(task_flags()))
def test_every_tasks_help_says_what_it_replaces(task: str) -> None:
    """Only `bootstrap` and `select-suites` said which old script they replace (issue 35,
    item 6): every task's help has the line, and each script it names is a row of
    docs/migration.md (its first word: `skip_ci.py gate` is the `skip_ci.py` row)."""
    from ci.tasks import TASKS
    from tests.inproc import run_inproc

    done = run_inproc(task, "--help")
    assert done.code == 0, done.stderr
    text = " ".join(done.stdout.split())
    definition = TASKS[task]
    assert " ".join(definition.lineage.split()) in text
    scripts = migration_scripts()
    for replaced in definition.replaces:
        assert replaced.split()[0] in scripts, (task, replaced)
