"""`skip-ci`: may this build stop before its L2/L3 tests? (was `skip_ci.py gate`; ci.skipci)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    replaces=("skip_ci.py gate", "resolve_skip_ci.sh"),
    help={
        "platform": "rocm (amd), cuda, npu or xpu (intel); required",
        "level": "l2 (ready) or l3 (merge); required",
    },
)
def skip_ci(platform: str = "", level: str = "", repo: str = "") -> None:
    """Exit 0 with `skip-all` or `skip-l23` on stdout to stop; exit 1 to run the tests.

    The range comes from git and the Buildkite env, as README's "Which build" says;
    the decision and its reason go to stderr. Bad input exits 2, no git 127;
    callers treat both as "run".
    """
    from ci import skipci

    skipci.run_gate(platform, level, repo)
