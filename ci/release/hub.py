"""A small Docker Hub API client: login, one page of tags, delete a tag.

Not curl through the door: the bearer token would travel in an argv or a
header file, visible to other processes or left on disk; urllib keeps it in
memory. Every request has a timeout, and redirects are refused so the
Authorization header never follows one to another host. No credential is
ever put in an exception message or a repr.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from ci import webclient

DEFAULT_HUB_URL = "https://hub.docker.com"
TIMEOUT = 30.0  # seconds, for every request
ATTEMPTS = 3  # tries per request on 429/5xx or no answer (DELETE: one)
BACKOFF = 1.0  # seconds before the first retry, doubling after
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class HubError(Exception):
    """A request that got no usable answer."""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON; None when it is not JSON."""
        try:
            return json.loads(self.body.decode("utf-8"))
        except ValueError:
            return None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def check_url(url: str) -> str | None:
    """Why `url` cannot be the Hub base URL (None when it can)."""
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme == "https" and parts.hostname
    if secure or (parts.scheme == "http" and parts.hostname in _LOOPBACK):
        return None
    return "must be an https:// URL (plain http only for 127.0.0.1/localhost)"


@dataclass
class HubClient:
    base_url: str = DEFAULT_HUB_URL
    timeout: float = TIMEOUT
    attempts: int = ATTEMPTS
    backoff: float = BACKOFF
    dry_run: bool = False  # a DELETE is said, not sent (`webclient.NotSent`)
    _bearer: str = field(default="", repr=False)

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values to mask in anything printed (the bearer token, once logged in)."""
        return (self._bearer,) if self._bearer else ()

    def url(self, path: str, query: dict[str, str] | None = None) -> str:
        full = self.base_url.rstrip("/") + path
        return f"{full}?{urllib.parse.urlencode(query)}" if query else full

    def request(self, method: str, url: str, payload: object = None) -> Response:
        """One call, retried on 429/5xx and connection errors; a DELETE is never repeated
        (a retry after a lost answer would report a 404 for a tag in fact deleted)."""
        attempts = 1 if method == "DELETE" else self.attempts
        for attempt in range(1, attempts + 1):
            try:
                resp = self._once(method, url, payload)
            except HubError:
                if attempt == attempts:
                    raise
            else:
                if resp.status not in RETRY_STATUSES or attempt == attempts:
                    return resp
            time.sleep(self.backoff * 2 ** (attempt - 1))
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, method: str, url: str, payload: object) -> Response:
        headers = {"Accept": "application/json"}
        data = None
        if payload is not None:
            data = json.dumps(payload).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self._bearer:
            headers["Authorization"] = f"Bearer {self._bearer}"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        dry = self.dry_run and method == "DELETE"
        try:
            with webclient.send(
                req, timeout=self.timeout, secrets=self.secrets, dry_run=dry
            ) as resp:
                return Response(resp.status, resp.read())
        except urllib.error.HTTPError as exc:
            with exc:
                body = exc.read()
            return Response(exc.code, body)
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc.__class__.__name__
            raise HubError(f"{method} {url}: {reason}") from None

    def login(self, username: str, password: str) -> None:
        """POST /v2/users/login; keeps the bearer token for later requests."""
        url = self.url("/v2/users/login")
        resp = self.request("POST", url, {"username": username, "password": password})
        found = resp.json() if resp.ok else None
        token = found.get("token") if isinstance(found, dict) else None
        if not isinstance(token, str) or not token or token == "null":
            raise HubError(f"POST {url}: HTTP {resp.status}, no token")
        self._bearer = token

    def tags_page(self, repo: str, page: int, page_size: int, name: str) -> dict[str, Any]:
        """One page of GET /v2/repositories/<repo>/tags, the script's query."""
        query = {"page": str(page), "page_size": str(page_size), "name": name}
        url = self.url(f"/v2/repositories/{repo}/tags", query)
        resp = self.request("GET", url)
        found = resp.json() if resp.ok else None
        if not isinstance(found, dict):
            what = "" if not resp.ok else ", not a JSON object"
            raise HubError(f"GET {url}: HTTP {resp.status}{what}")
        return found

    def delete_tag(self, repo: str, tag: str) -> Response:
        path = f"/v2/repositories/{repo}/tags/{urllib.parse.quote(tag, safe='')}"
        return self.request("DELETE", self.url(path))
