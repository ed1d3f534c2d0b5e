"""`shellcheck-steps`: shellcheck over every pipeline step's commands (ci.gates.shellsteps)."""

from __future__ import annotations

from collections.abc import Sequence

from ci.taskdef import task


@task(
    help={
        "severity": "lowest shellcheck level reported: error, warning, info or style (default)",
        "exclude": "codes to ignore, comma-separated (e.g. SC2086,SC2046,upload-expansion)",
        "dry_run": "print the shellcheck command and run nothing",
        "from_ref": "check only the pipeline YAMLs changed since this git revision",
    }
)
def shellcheck_steps(
    repo: str = "",
    severity: str = "style",
    exclude: str = "",
    dry_run: bool = False,
    from_ref: str = "",
    to_ref: str = "",
    words: Sequence[str] = (),
) -> None:
    """shellcheck the commands of every pipeline step, in the shell dialect it runs under.

    YAML files after `--` limit the check (default: every pipeline under
    .buildkite/); `$$` is the job shell's `$`. Exit 1 on findings or a pipeline its
    consumer refuses; 2 on bad input or when shellcheck is missing.
    """
    options = {name: value for name, value in locals().items() if name not in ("repo", "words")}
    from ci.gates.shellsteps import shellcheck_steps as run

    run(repo, words, **options)
