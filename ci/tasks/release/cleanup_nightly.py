"""`release.cleanup-nightly`: old nightly tags off Docker Hub (ci.release.cleanup)."""

from __future__ import annotations

from ci.taskdef import task


@task(
    replaces=("cleanup-nightly-builds.sh",),
    help={
        "hub_url": "Docker Hub API base URL (default: https://hub.docker.com)",
        "keep": "how many of the newest nightly- tags to keep (default: 14)",
        "delete_interval": "pause after each delete (default: 1s)",
        "dry_run": "list what would be deleted (stdout) and delete nothing; without"
        " DOCKERHUB_USERNAME/_TOKEN the tags are listed anonymously",
    },
)
def cleanup_nightly(
    hub_url: str = "https://hub.docker.com",
    keep: str = "14",
    delete_interval: str = "1s",
    dry_run: bool = False,
) -> None:
    """Delete old vllm/vllm-omni nightly- tags on Docker Hub (needs DOCKERHUB_USERNAME/_TOKEN).

    Replaces cleanup-nightly-builds.sh: log in, list every nightly- tag, keep the
    newest --keep by last update, delete the rest. stdout lists the deleted tags.
    Exit 1 on missing credentials, a failed login or listing, or a failed delete;
    2 on a bad option. --dry-run needs no credentials: it lists anonymously.
    """
    from ci.durations import parse_duration
    from ci.release.cleanup import cleanup, parse_keep

    count, interval = parse_keep(keep), parse_duration(delete_interval, name="--delete-interval")
    cleanup(hub_url=hub_url, keep=count, delete_interval=interval, dry_run=dry_run)
