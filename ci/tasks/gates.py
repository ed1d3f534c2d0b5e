"""Gates over a target checkout: `check-marks` and `shellcheck-steps`.

Named apart from this repository's own `lint` / `shellcheck` / `mypy` sessions:
these check vLLM-Omni (`--repo`), not vllm-omni-ci.
"""

from __future__ import annotations

from invoke.context import Context

from ci.taskkit import task

__all__ = ["check_marks", "shellcheck_steps"]


@task(
    help={
        "repo": "target checkout (default: git top-level of the current directory)",
        "from_ref": "check only the tests/ files changed since this git revision",
        "to_ref": "end of that range (default HEAD; WORKTREE = include uncommitted work)",
    }
)
def check_marks(c: Context, repo: str = "", from_ref: str = "", to_ref: str = "") -> None:
    """Every test file has a CI level and a hardware marker, and no direct SKU marker.

    Static scan (imports nothing). Files after `--` limit the scan (pre-commit
    passes the changed ones); default: every .py under tests/. Problems go to
    stdout, grouped per file (Level, Hardware, Direct SKU, Invalid hardware helper,
    Conflicting CPU/GPU marks); exit 1 on problems, 2 on bad input (no tests/,
    no tagged marker registry in pyproject.toml).
    """
    from ci.argv import after_dashdash
    from ci.gates.marks import check_marks as run

    run(repo, after_dashdash(), from_ref=from_ref, to_ref=to_ref)


@task(
    help={
        "repo": "target checkout (default: git top-level of the current directory)",
        "severity": "lowest shellcheck level reported: error, warning, info or style (default)",
        "exclude": "codes to ignore, comma-separated (e.g. SC2086,SC2046,upload-expansion)",
        "dry_run": "print the shellcheck command and run nothing",
        "from_ref": "check only the pipeline YAMLs changed since this git revision",
        "to_ref": "end of that range (default HEAD; WORKTREE = include uncommitted work)",
    }
)
def shellcheck_steps(
    c: Context,
    repo: str = "",
    severity: str = "style",
    exclude: str = "",
    dry_run: bool = False,
    from_ref: str = "",
    to_ref: str = "",
) -> None:
    """shellcheck the commands of every pipeline step, in the shell dialect it runs under.

    Reports the YAML file and step label of each finding. YAML files after `--`
    limit the check; default: every pipeline under .buildkite/. `$$` is read as the
    job shell's `$`; AMD tier steps are checked as the runner's bash (pipefail, no
    errexit), all others as Buildkite's `bash -e -c`. Exit 1 on findings, and on a
    pipeline file it cannot read or that its consumer refuses (the AMD bootstrap,
    the uploader); 2 on bad input or when shellcheck is missing (never downloaded).
    """
    from ci.argv import after_dashdash
    from ci.gates.shellsteps import shellcheck_steps as run

    run(
        repo,
        after_dashdash(),
        severity=severity,
        exclude=exclude,
        dry_run=dry_run,
        from_ref=from_ref,
        to_ref=to_ref,
    )
