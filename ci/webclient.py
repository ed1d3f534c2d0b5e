"""HTTP requests we make with a credential: never followed across a redirect.

urllib's default redirect handler resends every header, `Authorization`
included, to wherever a 3xx points, another host too. Every request that
carries a token (GitHub's PR labels, Docker Hub) is made through `opener()`,
which turns a redirect into the HTTPError of the 3xx itself, so the caller
says what happened and the token goes nowhere else.
"""

from __future__ import annotations

import urllib.request
from email.message import Message
from typing import IO


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: the 3xx reaches the caller as an HTTPError."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


def opener() -> urllib.request.OpenerDirector:
    """A urllib opener that never follows a redirect."""
    return urllib.request.build_opener(NoRedirect())
