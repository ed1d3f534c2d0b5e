"""Every file change `migrate` makes to a vLLM-Omni checkout, as values.

* `.buildkite/**.yml`: each command that calls a replaced script becomes its new
  command (`rewrites`); an entry pipeline in the old two-document design loses
  its second document, which nothing reads once the bootstrap reads the
  platform's `bootstrap-upload-steps.yml`.
* `.pre-commit-config.yaml`: the `check-mark` and `check-buildkite` hooks run
  vllm-omni-ci (`language: system`, nothing to install).
* With a pin (`ci.migrate.pin`: a version, or a URL that says one): the CI
  Dockerfiles install that vllm-omni-ci, and the CUDA and NPU entry steps run in
  the tools image of that version.
* `.buildkite/intel/xpu-tests.txt` (new): the test commands of the checkout's own
  `run-xpu-test.sh`, which `run-tests --platform xpu` reads; never overwritten.
* With `delete_replaced`: the replaced scripts and their tests, unless a step
  still calls the script (or its XPU test commands could not be taken over).

Each YAML edit is checked by loading the result: it must equal the original
documents with only the intended fields changed, else the file is listed for
a person instead. So is every call of a replaced script left after rewriting.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ci import yamlio
from ci.bootstraps import BOOTSTRAP_FILES, CLI
from ci.errors import Failure
from ci.migrate import rewrites, spans
from ci.migrate.pin import ToolPin
from ci.migrate.spans import Splice
from ci.pipeline import files
from ci.runner import xputests


@dataclass(frozen=True)
class FileChange:
    path: str  # relative to the checkout
    old: str
    new: str | None  # None: the file is deleted
    created: bool = False  # a new file (`old` is "")


@dataclass
class Migration:
    """The changes, the calls left for a person (`manual`), and what to know (`notes`)."""

    changes: list[FileChange] = field(default_factory=list)
    manual: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # A replaced script's file name -> where a command still calls it.
    calls: dict[str, str] = field(default_factory=dict)
    # A replaced script that must stay (its path) -> why, for `--delete-replaced`.
    keep: dict[str, str] = field(default_factory=dict)

    def change(self, path: str, old: str, new: str | None) -> None:
        if new != old:
            self.changes.append(FileChange(path, old, new))

    def create(self, path: str, text: str) -> None:
        self.changes.append(FileChange(path, "", text, created=True))


PRE_COMMIT: Final = ".pre-commit-config.yaml"
# hook id -> (the old script's file name, the new entry, whether it gets pass_filenames: false)
HOOKS: Final[Mapping[str, tuple[str, str, bool]]] = {
    "check-mark": ("check_test_marks.py", f"{CLI} check-marks --repo . --", False),
    "check-buildkite": ("check_buildkite.py", f"{CLI} lint-pipelines --repo .", True),
}
# Dockerfile -> the stage that ends with the pinned install (None: the last one).
DOCKERFILES: Final[Mapping[str, str | None]] = {
    "docker/Dockerfile.rocm": "deps",
    "docker/Dockerfile.ci": "deps",
    "docker/Dockerfile.npu.ci": None,
    "docker/Dockerfile.xpu": None,
}
# Formatted with the pin's requirement: `vllm-omni-ci==VERSION` or `vllm-omni-ci @ URL`.
PIN_LINE: Final = 'RUN python3 -m pip install --no-cache-dir "{}"'
# An install of vllm-omni-ci already pinned, either way: a new pin replaces it.
_PINNED = re.compile(r"vllm-omni-ci[ \t]*(?:==|@)[ \t]*[^\"'\s]+")
TOOLS_IMAGE: Final = "vllm-omni-ci/tools"
_TOOLS_TAG = re.compile(rf"({re.escape(TOOLS_IMAGE)}:)[\w.-]+")
TOOLS_PLUGIN: Final = (
    '- docker#v5.12.0: {{image: "{image}", mount-buildkite-agent: true,'
    " propagate-environment: true}}"
)
# platform -> its entry pipeline, the one the bootstrap step runs from.
ENTRY_PIPELINES: Final[Mapping[str, str]] = {
    "cuda": ".buildkite/cuda/pipeline.yml",
    "npu": ".buildkite/npu/pipeline-npu.yml",
}
# The old two-document entry pipelines' sentinels, replaced at upload time.
_SENTINEL = re.compile(r"__\w+_IF__|vllm-omni:placeholder:")
_NAMES: Final = {Path(p).name for p in rewrites.REPLACED_SCRIPTS}


def _short(command: str) -> str:
    line = command.strip().splitlines()[0] if command.strip() else ""
    return line if len(line) <= 72 else line[:69] + "..."


def replaced_in(command: str) -> list[str]:
    """The file names of the replaced scripts that `command` names: a call `migrate`
    rewrites, or one it lists for a person."""
    return sorted(name for name in _NAMES if name in command)


def _leftovers(work: Migration, rel: str, text: str, nodes: list[Any], what: str) -> None:
    """A `manual:` line for each replaced script a scalar still names, with the reason:
    `what`, unless the script is called at a path migrate does not know (an older layout's),
    which is then the reason."""
    for node in nodes:
        for name in replaced_in(node.value):
            where = f"{rel}:{spans.line_of(text, text.index(name, node.start_mark.index))}"
            work.calls.setdefault(name, where)
            why = _older_path(name, node.value) or what
            work.manual.append(f"{where}: {name}: {why}: {_short(node.value)}")


def _older_path(name: str, command: str) -> str | None:
    """ "at an older path …" when the command calls `name` by a path that is none of the
    replaced scripts' paths (the rewrite table matches those paths only); None otherwise."""
    known = [p for p in rewrites.REPLACED_SCRIPTS if Path(p).name == name]
    for found in re.finditer(rf"[^\s;&|()\"'`]*(?<![\w.-]){re.escape(name)}(?![\w.-])", command):
        path = found.group().removeprefix("./")
        # Only a path is a path: a bare name may run from the script's own folder.
        if "/" in path and not any(path == k or path.endswith("/" + k) for k in known):
            return f"called at an older path, {path} (migrate knows {' or '.join(known)})"
    return None


def _rewritten(value: Any, command: bool = False) -> Any:
    """A loaded document with `rewrite` applied to every command, as the edits should give."""
    if isinstance(value, str):
        return rewrites.rewrite(value)[0] if command else value
    if isinstance(value, list):
        return [_rewritten(item, command) for item in value]
    if isinstance(value, dict):
        return {k: _rewritten(v, k in spans.COMMAND_KEYS) for k, v in value.items()}
    return value


def _checked(
    rel: str,
    old: str,
    new: str,
    expect: Callable[[list[Any]], list[Any]] | None,
    work: Migration,
) -> str:
    """`new`, when it loads as `expect` makes the old documents (None: when it loads);
    else `old`, listed."""
    if new == old:
        return old
    try:
        loaded = yamlio.loads_all(new, source=rel)
        same = expect is None or loaded == expect(yamlio.loads_all(old, source=rel))
    except Failure:
        same = False
    if same:
        return new
    work.manual.append(f"{rel}:1: cannot edit this file in place; apply its rows by hand")
    return old


def _one_document(repo: Path, rel: str, text: str, roots: list[Any], work: Migration) -> str:
    """An old two-document entry pipeline without its second document."""
    platform = next((p for p, path in ENTRY_PIPELINES.items() if path == rel), None)
    if platform is None or len(roots) < 2:
        return text
    cut = text.rfind("\n---", 0, roots[1].start_mark.index) + 1
    if cut <= 0 or not _SENTINEL.search(text, cut):
        return text
    steps = BOOTSTRAP_FILES[platform]
    if not files.exists(repo / steps):
        work.manual.append(
            f"{rel}:{spans.line_of(text, cut)}: old two-document design, and no {steps}"
            " for `vllm-omni-ci bootstrap` to read: write it first"
        )
        return text
    work.notes.append(
        f"{rel}: second document removed (the old two-document design; "
        f"`{CLI} bootstrap --platform {platform}` reads {steps})"
    )
    return re.sub(r"(?:[ \t]*\r?\n)+\Z", spans.newline(text), text[:cut])


def _commands(rel: str, text: str, work: Migration) -> str:
    edits: list[Splice] = []
    for node in spans.command_scalars(spans.compose(text, rel)):
        new, applied = rewrites.rewrite(node.value)
        made = spans.replace_scalar(text, node, new) if applied else None
        if made is not None:
            edits.append(made)
        elif applied:  # a block whose lines do not map onto its value
            names = ", ".join(Path(r.script).name for r in applied)
            work.manual.append(
                f"{rel}:{node.start_mark.line + 1}: {names}: cannot rewrite this block in place"
            )
    edited = spans.splice(text, edits)
    return _checked(rel, text, edited, lambda docs: [_rewritten(d) for d in docs], work)


def _line_end(text: str, node: Any) -> int:
    """The offset after the line `node` ends on (a block value ends at a line start)."""
    if node.end_mark.column == 0:
        return int(node.end_mark.index)
    found = text.find("\n", node.end_mark.index)
    return len(text) if found < 0 else found + 1


def _line_start(text: str, node: Any) -> int:
    return text.rfind("\n", 0, node.start_mark.index) + 1


def _tools_image(rel: str, text: str, version: str, work: Migration) -> str:
    """The entry step that runs the bootstrap, in the tools image of `version`."""
    import yaml

    if _TOOLS_TAG.search(text):
        return _TOOLS_TAG.sub(lambda m: f"{m[1]}{version}", text)
    step = next(
        (
            m
            for root in spans.compose(text, rel)
            for m in spans.mappings(root)
            if any(f"{CLI} bootstrap" in n.value for n in spans.own_commands(m))
        ),
        None,
    )
    plugin = TOOLS_PLUGIN.format(image=f"{TOOLS_IMAGE}:{version}")
    nl = spans.newline(text)
    fields = spans.pairs(step) if step is not None and not step.flow_style else {}
    plugins = spans.field(step, "plugins") if fields else None
    one_line = [
        k
        for k, v in fields.values()
        if isinstance(v, yaml.ScalarNode)
        and v.style in (None, "'", '"')
        and v.end_mark.line == k.start_mark.line
    ]
    if isinstance(plugins, yaml.SequenceNode) and plugins.value and not plugins.flow_style:
        first = plugins.value[0]
        at = _line_start(text, first)
        dash = text[at : first.start_mark.index].rstrip().removesuffix("-")
        edit = Splice(at, at, f"{dash}{plugin}{nl}")
    elif plugins is None and one_line:
        indent = " " * one_line[-1].start_mark.column
        at = _line_end(text, fields[one_line[-1].value][1])
        edit = Splice(at, at, f"{indent}plugins:{nl}{indent}  {plugin}{nl}")
    else:
        work.manual.append(
            f"{rel}:1: no step here runs `{CLI} bootstrap` in block style: add {plugin}"
        )
        return text
    return _checked(rel, text, spans.splice(text, [edit]), None, work)


def _pipeline_files(repo: Path) -> list[Path]:
    root = repo / ".buildkite"
    return files.walk(root, lambda n: n.endswith((".yml", ".yaml"))) if root.is_dir() else []


def _pipelines(repo: Path, pin: ToolPin | None, work: Migration) -> None:
    for path in _pipeline_files(repo):
        rel = path.relative_to(repo).as_posix()
        old = files.read_text(path, rel)
        text = _one_document(repo, rel, old, spans.compose(old, rel), work)
        text = _commands(rel, text, work)
        if pin and rel in ENTRY_PIPELINES.values():
            text = _tools_image(rel, text, pin.version, work)
        what = "called in a shape migrate cannot rewrite"
        _leftovers(work, rel, text, spans.command_scalars(spans.compose(text, rel)), what)
        work.change(rel, old, text)


def _hook(hook_id: str, entry: str) -> tuple[str, str, bool] | None:
    """The HOOKS row of a hook that runs the old script or already the new entry, else None."""
    row = HOOKS.get(hook_id)
    return row if row is not None and (row[0] in entry or entry == row[1]) else None


def _hooks(roots: list[Any]) -> Iterator[tuple[Any, tuple[str, str, bool]]]:
    for mapping in (m for root in roots for m in spans.mappings(root)):
        entry = spans.scalar(spans.field(mapping, "entry")) or ""
        if hook := _hook(spans.scalar(spans.field(mapping, "id")) or "", entry):
            yield mapping, hook


def _hook_edits(text: str, mapping: Any, hook: tuple[str, str, bool]) -> list[Splice]:
    """Entry, `language: system`, `pass_filenames: false`; no `additional_dependencies`.
    A missing field goes after the last of these the hook has."""
    import yaml

    fields = spans.pairs(mapping)
    indent, nl = " " * fields["entry"][0].start_mark.column, spans.newline(text)
    want = {"entry": hook[1], "language": "system"}
    want |= {"pass_filenames": "false"} if hook[2] else {}
    edits, added, last = [], [], fields["entry"][1]
    for name, value in want.items():
        if name not in fields:
            added.append(f"{indent}{name}: {value}{nl}")
            continue
        node = fields[name][1]
        last = max(last, node, key=lambda n: n.start_mark.index)
        if spans.scalar(node) != value:
            new = spans.flow_text(value, node.style) if name == "entry" else value
            edits.append(Splice(node.start_mark.index, node.end_mark.index, new))
    at = _line_end(text, last)
    edits.append(Splice(at, at, "".join(added)))
    if "additional_dependencies" in fields:
        key, value = fields["additional_dependencies"]
        if isinstance(value, yaml.SequenceNode) and value.value and not value.flow_style:
            value = value.value[-1]
        edits.append(Splice(_line_start(text, key), _line_end(text, value), ""))
    return edits


def _migrated_hooks(documents: list[Any]) -> list[Any]:
    """The loaded config as the hook edits should leave it."""
    for repo in (documents[0] or {}).get("repos") or [] if documents else []:
        for hook in (repo or {}).get("hooks") or []:
            if target := _hook(str(hook.get("id")), str(hook.get("entry"))):
                hook |= {"entry": target[1], "language": "system"}
                hook |= {"pass_filenames": False} if target[2] else {}
                hook.pop("additional_dependencies", None)
    return documents


def _pre_commit(repo: Path, work: Migration) -> None:
    if not files.exists(repo / PRE_COMMIT):
        return
    old = files.read_text(repo / PRE_COMMIT, PRE_COMMIT)
    edits = [
        e for m, hook in _hooks(spans.compose(old, PRE_COMMIT)) for e in _hook_edits(old, m, hook)
    ]
    new = _checked(PRE_COMMIT, old, spans.splice(old, edits), _migrated_hooks, work)
    roots = spans.compose(new, PRE_COMMIT)
    entries = [spans.field(m, "entry") for root in roots for m in spans.mappings(root)]
    found = [node for node in entries if spans.scalar(node) is not None]
    _leftovers(work, PRE_COMMIT, new, found, "a hook still runs it")
    work.change(PRE_COMMIT, old, new)


def _dockerfile(text: str, stage: str | None, requirement: str) -> str | None:
    """`text` with the pinned install at the end of `stage`; None when there is no such stage."""
    if _PINNED.search(text):
        return _PINNED.sub(lambda _: requirement, text)
    lines = text.splitlines(keepends=True)
    froms = [i for i, line in enumerate(lines) if re.match(r"\s*FROM\s", line, re.IGNORECASE)]
    if stage is None:
        begin = froms[-1] if froms else 0
    else:
        named = rf"\s*FROM\s.*\sAS\s+{re.escape(stage)}\s*$"
        begin = next((i for i in froms if re.match(named, lines[i], re.IGNORECASE)), -1)
        if begin < 0:
            return None
    end = next((i for i in froms if i > begin), len(lines))
    body = [i for i in range(begin, end) if lines[i].strip() and lines[i].lstrip()[0] != "#"]
    at = body[-1] + 1 if body else end
    nl = spans.newline(text)
    before = lines[:at]
    if before and not before[-1].endswith("\n"):
        before[-1] += nl
    return "".join([*before, PIN_LINE.format(requirement) + nl, *lines[at:]])


def _dockerfiles(repo: Path, pin: ToolPin | None, work: Migration) -> None:
    if not pin:
        unpinned = [
            rel
            for rel in DOCKERFILES
            if not files.exists(repo / rel) or not _PINNED.search(files.read_text(repo / rel, rel))
        ]
        if unpinned:
            work.notes.append(
                f"no --pin: {', '.join(unpinned)} get no pinned install of vllm-omni-ci, and the"
                " entry steps no tools image (`--pin VERSION` or `--pin URL` adds both)"
            )
        return
    for rel, stage in DOCKERFILES.items():
        if not files.exists(repo / rel):
            work.notes.append(f"{rel}: not found, so it gets no pinned install of vllm-omni-ci")
            continue
        old = files.read_text(repo / rel, rel)
        new = _dockerfile(old, stage, pin.requirement)
        if new is None:
            line = PIN_LINE.format(pin.requirement)
            work.manual.append(f"{rel}:1: no `{stage}` stage: add {line}")
        else:
            work.change(rel, old, new)


def _xpu_tests(repo: Path, work: Migration) -> None:
    """The XPU test list file from the checkout's `run-xpu-test.sh`, so that the list stays
    the maintainers'; an existing file is theirs already and stays as it is."""
    script, target = xputests.SCRIPT, xputests.TESTS_FILE
    if files.exists(repo / target) or not files.exists(repo / script):
        return
    commands = xputests.extract(files.read_text(repo / script, script))
    if commands is None:
        why = f"its test commands cannot be found (no `bash -c '…'` program): write {target}"
        work.manual.append(f"{script}:1: {why} by hand, one command per line")
        work.keep[script] = f"{target} is not written yet"
        return
    work.create(target, xputests.render(commands))
    work.notes.append(
        f"{target}: {len(commands)} test commands taken from {script}"
        " (`run-tests --platform xpu` reads them from there)"
    )


def _deletions(repo: Path, work: Migration) -> None:
    kept = set()
    for rel in rewrites.REPLACED_SCRIPTS:
        if not files.exists(repo / rel):
            continue
        caller = work.calls.get(Path(rel).name)
        if caller is not None:
            kept.add(rel)
            work.manual.append(f"{rel}:1: not deleted: still called at {caller}")
        elif rel in work.keep:
            kept.add(rel)
            work.manual.append(f"{rel}:1: not deleted: {work.keep[rel]}")
        else:
            work.change(rel, files.read_text(repo / rel, rel), None)
    for rel, script in rewrites.REPLACED_TESTS.items():
        if files.exists(repo / rel) and script not in kept:
            work.change(rel, files.read_text(repo / rel, rel), None)


def write(repo: Path, change: FileChange) -> None:
    path = repo / change.path
    try:
        if change.new is None:
            os.unlink(path)
        elif change.created:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8", newline="") as handle:  # never over a file
                handle.write(change.new)
        else:
            path.write_text(change.new, encoding="utf-8", newline="")
    except OSError as exc:
        raise Failure(f"{change.path}: cannot write: {exc.strerror or exc}") from None


def apply(checkout: Path) -> None:
    """`migrate --apply` without a pin or deletions, in `checkout` (what `--check` compares)."""
    for change in plan(checkout, pin=None, delete_replaced=False).changes:
        write(checkout, change)


def plan(repo: Path, *, pin: ToolPin | None, delete_replaced: bool) -> Migration:
    """Every change for `repo`, in file order; nothing is written."""
    work = Migration()
    _pipelines(repo, pin, work)
    _pre_commit(repo, work)
    _dockerfiles(repo, pin, work)
    _xpu_tests(repo, work)
    if delete_replaced:
        _deletions(repo, work)
    return work


def old_calls(repo: Path) -> list[str]:
    """Where `repo`'s pipelines still call a replaced script (`<file>: <script>`, in file
    order): a checkout `migrate` has not been applied to, whose CI runs the old scripts.

    Cheap enough for `plan`: a file whose text names no replaced script, or no command
    key, is read, not parsed; one that is parsed goes through the C loader (no node
    positions). A file that does not load is left to whoever reads it next."""
    found: list[str] = []
    for path in _pipeline_files(repo):
        rel = path.relative_to(repo).as_posix()
        try:
            text = files.read_text(path, rel)
            # Both are needed for a call (an alias's anchor is in the same text): a
            # registry names scripts as paths, and no command.
            if "command" not in text or not any(name in text for name in _NAMES):
                continue
            documents = yamlio.loads_all(text, source=rel)
        except Failure:
            continue
        names = {name for command in _command_values(documents) for name in replaced_in(command)}
        found += [f"{rel}: {name}" for name in sorted(names)]
    return found


def _command_values(value: Any, command: bool = False) -> Iterator[str]:
    """Every string under a `command`/`commands` key of loaded documents (`_rewritten`'s walk)."""
    if isinstance(value, str):
        if command:
            yield value
    elif isinstance(value, list):
        for item in value:
            yield from _command_values(item, command)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _command_values(item, key in spans.COMMAND_KEYS)
