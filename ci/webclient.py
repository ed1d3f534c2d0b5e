"""HTTP requests through the door: echoed, masked, said-not-sent under a dry-run.

Redirects are never followed (urllib resends every header, `Authorization`
included, wherever a 3xx points): the caller gets the 3xx's HTTPError instead.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Sequence
from typing import Any

from ci import door
from ci.redact import Redactor


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: the 3xx reaches the caller as an HTTPError."""

    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None


class NotSent(Exception):
    """A request that `--dry-run` said and did not send."""


def send(
    request: urllib.request.Request,
    *,
    timeout: float,
    secrets: Sequence[str] = (),
    quiet: bool = False,
    dry_run: bool = False,
) -> Any:
    """Open `request` (a response to use as a context manager), after saying so on stderr.
    `quiet` for probes that poll; under `dry_run` it is said and `NotSent` raised."""
    redact = Redactor.for_env(extra=[s for s in secrets if s])
    what = f"{request.get_method()} {request.full_url}"
    if dry_run:
        door.note(f"(dry-run) not sent: {what}", redact=redact)
        raise NotSent(what)
    if not quiet:
        door.note(f"http: {what}", redact=redact)
    return urllib.request.build_opener(NoRedirect()).open(request, timeout=timeout)
