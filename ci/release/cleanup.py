"""Prune old `nightly-*` tags of vllm/vllm-omni on Docker Hub, keeping the newest N.

Replaces `.buildkite/release/scripts/cleanup-nightly-builds.sh`: log in, page
through the filtered tag list, keep names starting `nightly-` (Hub's filter is a
substring match), newest first, keep N, delete the rest with a pause, exit 1 if a
delete failed. Unlike it (docs/differences.md), a listing error exits 1,
timestamps compare as datetimes, and no credential is printed.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NoReturn

from ci import door
from ci.errors import FAILURE, Stop, UserError
from ci.redact import Redactor
from ci.release.hub import DEFAULT_HUB_URL, HubClient, HubError, Response, check_url

TAG_PREFIX = "nightly-"
REPO = "vllm/vllm-omni"
DEFAULT_KEEP = 14
PAGE_SIZE = 100
MAX_PAGES = 1000
_FRACTION = re.compile(r"\.(\d+)")


@dataclass(frozen=True)
class Tag:
    name: str
    last_updated: datetime | None  # None: missing or unparseable, kept as if newest


def parse_keep(value: str) -> int:
    """`--keep` as a number (Invoke would let a bad `int` escape as a ValueError): exit 2."""
    try:
        return int(value.strip())
    except ValueError:
        raise UserError(f"--keep: {value!r} is not a positive number of tags to keep") from None


def parse_time(value: object) -> datetime | None:
    """Hub's ISO-8601 `last_updated` (any fraction length, `Z` suffix) as UTC."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed


def matching(results: Iterable[Any], prefix: str = TAG_PREFIX) -> list[Tag]:
    """The results whose name starts with the prefix (the client-side filter)."""
    return [
        Tag(item["name"], parse_time(item.get("last_updated")))
        for item in results
        if isinstance(item, dict) and str(item.get("name")).startswith(prefix)
    ]


def newest_first(tags: Iterable[Tag]) -> list[Tag]:
    """Newest first; a tag without a usable time counts as newest, so it is never deleted.

    Ties break by name, descending, as the script's reverse sort of
    `<last_updated>|<name>` lines did.
    """
    by_name = sorted(tags, key=lambda t: t.name, reverse=True)
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(
        by_name, key=lambda t: (t.last_updated is None, t.last_updated or epoch), reverse=True
    )


def collect(hub: HubClient, log: Logger) -> list[Tag]:
    """Every page of the name-filtered list; an HTTP error stops the task with exit 1."""
    found: list[Tag] = []
    for page in range(1, MAX_PAGES + 1):
        try:
            body = hub.tags_page(REPO, page, PAGE_SIZE, TAG_PREFIX)
        except HubError as exc:
            log.fail(f"error: failed to list tags (page {page}): {exc}")
        results = body.get("results")
        if not isinstance(results, list) or not results:
            return found
        found += matching(results)
        if "next" in body and not body["next"]:
            return found  # the last page; asking past it would only get a 404
    log.fail(f"error: failed to list tags: more than {MAX_PAGES} pages")


class Logger:
    """The script's messages, on stderr, with every credential masked."""

    def __init__(self, *secrets: str) -> None:
        self.secrets = [value for value in secrets if value]

    def __call__(self, message: str) -> None:
        door.note(message, redact=Redactor.for_env(extra=self.secrets))

    def fail(self, message: str) -> NoReturn:
        raise Stop(FAILURE, Redactor.for_env(extra=self.secrets)(message))


def cleanup(
    *,
    hub_url: str = DEFAULT_HUB_URL,
    keep: int = DEFAULT_KEEP,
    delete_interval: float = 1.0,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
) -> None:
    source = os.environ if env is None else env
    reason = check_url(hub_url)
    problems = [f"--hub-url: {hub_url!r} {reason}"] if reason else []
    if keep < 1:
        problems.append(f"--keep: {keep} is not a positive number of tags to keep")
    if delete_interval < 0:
        problems.append("--delete-interval: must not be negative")
    UserError.collect(problems)

    token = source.get("DOCKERHUB_TOKEN", "")
    username = source.get("DOCKERHUB_USERNAME", "")
    log = Logger(token)
    log(f"Cleaning up tags with prefix: {TAG_PREFIX} in repository: {REPO}")
    hub = HubClient(hub_url, dry_run=dry_run)
    if dry_run and not (token and username):
        # Listing a public repository's tags needs no login; only deleting does.
        log("(dry-run) DOCKERHUB_USERNAME/DOCKERHUB_TOKEN not both set: listing tags anonymously")
    else:  # the script's credential checks and login: its messages, exit 1 on any failure
        if not token:
            log.fail("Error: DOCKERHUB_TOKEN environment variable is not set")
        if not username:
            log.fail("Error: DOCKERHUB_USERNAME environment variable is not set")
        log("Getting DockerHub bearer token...")
        try:
            hub.login(username, token)
        except HubError as exc:
            log.fail(f"Error: Failed to get DockerHub bearer token ({exc})")
        log.secrets += hub.secrets

    log("Fetching all tags from DockerHub...")
    tags = newest_first(collect(hub, log))
    if not tags:
        log("No tags found to clean up")
        return
    log(f"Found {len(tags)} tags")
    doomed = tags[keep:]
    if not doomed:
        log(f"No tags need to be deleted (only {len(tags)} tags found, keeping {keep})")
        return
    log(f"Will delete {len(doomed)} old tags, keeping the newest {keep}")

    if dry_run:
        for tag in doomed:
            log(f"(dry-run) Would delete tag: {tag.name}")
        print("".join(f"{t.name}\n" for t in doomed), end="")
        return

    log("Deleting old tags...")
    failures = 0
    for tag in doomed:
        log(f"Deleting tag: {tag.name}")
        if delete(hub, tag.name, log):
            print(tag.name, flush=True)
        else:
            failures += 1
        time.sleep(delete_interval)
    if failures:
        log.fail(f"Cleanup finished with {failures} deletion failure(s)")
    log("Cleanup completed successfully")


def delete(hub: HubClient, name: str, log: Logger) -> bool:
    try:
        resp = hub.delete_tag(REPO, name)
    except HubError as exc:  # no answer: the script's curl said HTTP 000, with no body
        log(f"Error: Failed to delete tag {name} (HTTP 000): no answer ({exc})")
        return False
    if resp.ok:
        log(f"Successfully deleted tag: {name} (HTTP {resp.status})")
        return True
    log(f"Error: Failed to delete tag {name} (HTTP {resp.status:03d}): {detail_of(resp)}")
    return False


def detail_of(resp: Response) -> str:
    """The script's detail of a failed delete: `.detail` of a JSON body as `jq -r` prints
    it (unless null or false), else the raw body without its trailing newlines (what
    `$(…)` kept), else `(empty response body)`."""
    found = resp.json()
    value = found.get("detail") if isinstance(found, dict) else None
    if value is not None and value is not False:
        return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    return resp.body.decode("utf-8", errors="replace").rstrip("\n") or "(empty response body)"
