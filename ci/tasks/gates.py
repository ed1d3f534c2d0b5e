"""Gates over a target checkout: `check-marks` and `shellcheck-steps`.

Named apart from this repository's own `lint` / `shellcheck` / `mypy` sessions:
these check vLLM-Omni (`--repo`), not vllm-omni-ci.
"""

from __future__ import annotations

from invoke.context import Context

from ci.taskkit import task


@task(
    help={
        "from_ref": "check only the tests/ files changed since this git revision",
        "to_ref": "end of that range (default HEAD; WORKTREE = include uncommitted work)",
    }
)
def check_marks(c: Context, repo: str = "", from_ref: str = "", to_ref: str = "") -> None:
    """Every test file has a CI level and a hardware marker, and no direct SKU marker.

    A static scan of the files after `--` (default: every .py under tests/).
    Problems go to stdout, grouped per file; exit 1 on problems, 2 on bad input.
    """
    from ci.argv import after_dashdash
    from ci.gates.marks import check_marks as run

    run(repo, after_dashdash(), from_ref=from_ref, to_ref=to_ref)


@task(
    help={
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

    YAML files after `--` limit the check (default: every pipeline under
    .buildkite/); `$$` is the job shell's `$`. Exit 1 on findings or a pipeline its
    consumer refuses; 2 on bad input or when shellcheck is missing.
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
