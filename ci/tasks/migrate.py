"""`migrate`: switch a vLLM-Omni checkout from the old CI scripts to vllm-omni-ci (ci.migrate)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    help={
        "apply": "write the changes (default: print them as a unified diff, exit 1 if any)",
        "pin": "vllm-omni-ci to pin in the CI Dockerfiles, and the entry steps' tools image"
        " (vllm-omni-ci/tools:VERSION): a version, a git URL at a tag"
        " (git+https://HOST/ORG/vllm-omni-ci@vVERSION) or a wheel URL"
        " (https://…/vllm_omni_ci-VERSION-py3-none-any.whl)",
        "delete_replaced": "also delete the replaced scripts and their tests (a script a"
        " step still calls is listed instead)",
        "check": "instead, run the old CI and the new CI side by side on clones of the"
        " checkout and compare their uploads job by job (no edits to the checkout;"
        " exit 1 unless every build is the same)",
        "format": "--check only: table (default), json or markdown (short enough for a PR"
        " description; the full report goes to --full-report)",
        "full_report": "--check only: write the full per-cell report (Markdown) to this file"
        " (default with --format markdown: ./migrate-check-full.md)",
    }
)
def migrate(
    repo: str = "",
    apply: bool = False,
    pin: str = "",
    delete_replaced: bool = False,
    check: bool = False,
    format: str = "",
    full_report: str = "",
) -> None:
    """Apply docs/migration.md's done rows to a vLLM-Omni checkout: a diff, or --apply.

    Job commands in .buildkite/ that call a replaced script get the new command,
    the check-mark and check-buildkite pre-commit hooks run vllm-omni-ci,
    .buildkite/intel/xpu-tests.txt gets the test commands of run-xpu-test.sh
    (never overwritten), and --pin adds the pinned install to the CI
    Dockerfiles. Only the lines that change are touched. The lint-pipelines gate
    then checks the migrated result in a temporary copy (without --apply the
    checkout is only read): each problem is a `would fail: lint-pipelines: FILE: …`
    line on stderr. Exit 1 while changes are pending, a call is left for a person
    (`manual:` lines on stderr) or the gate would fail, also after --apply; 0 when
    there is nothing to do.
    """
    from ci.errors import Stop, UserError
    from ci.target import resolve_repo

    if check:
        given = [("--apply", apply), ("--pin", pin), ("--delete-replaced", delete_replaced)]
        UserError.collect(f"{name}: cannot be combined with --check" for name, on in given if on)
        from pathlib import Path

        from ci.migrate.check import run as report

        written = Path(full_report) if full_report else None
        raise Stop(report(resolve_repo(repo), format or "table", full_report=written))
    UserError.collect(
        f"{name}: applies to `migrate --check` only"
        for name, given in (("--format", format), ("--full-report", full_report))
        if given
    )
    from ci.migrate.apply import run

    run(resolve_repo(repo), apply=apply, pin=pin, delete_replaced=delete_replaced)
