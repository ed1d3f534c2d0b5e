"""Recording stand-ins for the programs an old or new bootstrap calls that cannot run here.

`migrate --check` runs the checkout's own CI scripts and our commands with a
folder of these first on PATH. They answer what the build implies and record
what the job hands to Buildkite:

* `buildkite-agent`: `pipeline upload [FILE]` (else stdin) writes the YAML to
  the record folder as `upload-N.yml`; `annotate TEXT` appends `STYLE<tab>TEXT`
  to `annotations.txt` (`--style`, else `default`); every other subcommand
  (artifact upload, meta-data) succeeds.
* `curl`: a GitHub pull-request URL answers `{"labels": [...]}` with the
  build's labels; any other URL (the minijinja installer) prints nothing.
* `minijinja-cli TEMPLATE DATA -D k=v ...`: the `minijinja` package from PyPI,
  the same template engine, with the YAML data file's keys and the -D strings.
* `docker`, `aws`: succeed and print nothing (images are not built here).
* `python3`, `python`, `vllm-omni-ci`: this interpreter and this installation,
  so the old scripts find PyYAML and the new commands are the version checked.

`BASH_ENV` in the folder defines `source` so that the cargo env the minijinja installer
would have written (an absolute path on the agents) is a no-op.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Final

# Private to the stand-ins and the check that starts them (not knobs for users).
RECORD_ENV: Final = "MIGRATE_CHECK_RECORD"
LABELS_ENV: Final = "MIGRATE_CHECK_LABELS"
CARGO_ENV: Final = "/var/lib/buildkite-agent/.cargo/env"
BASH_ENV: Final = "bash_env.sh"  # the jobs' bash startup file, in the stand-ins' folder

_AGENT = f'''
import os, sys
from pathlib import Path
record = Path(os.environ["{RECORD_ENV}"])
args = sys.argv[1:]
if args[:2] == ["pipeline", "upload"]:
    files = [a for a in args[2:] if not a.startswith("-")]
    text = Path(files[0]).read_text() if files else sys.stdin.read()
    n = len(list(record.glob("upload-*.yml")))
    (record / f"upload-{{n}}.yml").write_text(text)
elif args[:1] == ["annotate"]:
    words, style, rest = [], "default", args[1:]
    while rest:
        word = rest.pop(0)
        name, equals, value = word.partition("=")
        if name in ("--style", "--context", "--priority", "--job", "--scope"):
            value = value if equals else (rest.pop(0) if rest else "")
            style = value if name == "--style" else style
        elif not word.startswith("-"):
            words.append(word)
    text = words[0] if words else sys.stdin.read()
    with open(record / "annotations.txt", "a") as out:
        out.write(style + "\\t" + text.replace("\\n", " ") + "\\n")
'''

_CURL = f'''
import json, os, sys
if any("api.github.com" in a and "/pulls/" in a for a in sys.argv[1:]):
    labels = [x for x in os.environ.get("{LABELS_ENV}", "").split(",") if x]
    print(json.dumps({{"labels": [{{"name": x}} for x in labels]}}))
'''

# minijinja-cli 2.3.1 `TEMPLATE DATA -D k=v ...`, as the `minijinja` package renders it:
# that CLI read the data file into sorted maps (file order came in 2.5.0), so every
# mapping is sorted first; undefined values print as nothing; escaping follows the
# name after `.j2` (html/xml, json/yaml), none for `test-template.j2`; one newline
# ends the output.
_MINIJINJA = """
import sys, yaml, minijinja
def ordered(value):
    if isinstance(value, dict):
        return {key: ordered(value[key]) for key in sorted(value)}
    return [ordered(v) for v in value] if isinstance(value, list) else value
args, defines = sys.argv[1:], {}
for i, word in enumerate(args):
    if word == "-D":
        key, _, value = args[i + 1].partition("=")
        defines[key] = value
template, data = args[0], args[1]
with open(data) as stream:
    context = {**ordered(yaml.safe_load(stream) or {}), **defines}
kind = template.removesuffix(".j2").rsplit(".", 1)[-1]
escape = {"htm": "html", "html": "html", "xml": "html", "xhtml": "html",
          "json": "json", "json5": "json", "yml": "json", "yaml": "json"}.get(kind)
env = minijinja.Environment(undefined_behavior="lenient", auto_escape_callback=lambda _: escape)
with open(template) as stream:
    sys.stdout.write(str(env.render_str(stream.read(), template, **context)) + "\\n")
"""

_CLI = "from ci.cli import main\nsys.exit(main())\n"

_BASH_ENV = f"""source() {{
  if [[ "${{1:-}}" == "{CARGO_ENV}" ]]; then return 0; fi
  builtin source "$@"
}}
"""


def install(folder: Path) -> None:
    """Write the stand-ins and `BASH_ENV` into `folder` (made if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    programs = {
        "buildkite-agent": _AGENT,
        "curl": _CURL,
        "minijinja-cli": _MINIJINJA,
        "vllm-omni-ci": _CLI,
        "docker": "",
        "aws": "",
    }
    # Every interpreter starts without `site` (whose .pth files cost more than the
    # stand-in itself) and with this process's import path instead: this
    # installation's `ci` package first, then the packages it runs with.
    home = str(Path(__file__).resolve().parents[2])
    paths = [home, *(p for p in sys.path if p and p != home and Path(p).is_dir())]
    preamble = f"import sys\nsys.path[:0] = {paths!r}\n"
    for name, body in programs.items():
        _write(folder / name, f"#!{sys.executable} -S\n{preamble}{body}")
    for name in ("python3", "python"):  # for the old scripts, with PyYAML found
        joined = os.pathsep.join(paths[1:])  # the checkout's own `tests` must win
        _write(folder / name, f'#!/bin/sh\nPYTHONPATH="{joined}${{PYTHONPATH:+:$PYTHONPATH}}"'
                              f' exec {sys.executable} -S "$@"\n')  # fmt: skip
    (folder / BASH_ENV).write_text(_BASH_ENV)


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)
