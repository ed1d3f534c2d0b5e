"""HTTP and docker SDK calls go through the door's adapters: said, masked, dry-run honoured."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ci import door_docker, webclient
from ci.redact import MASK

TOKEN = "query-token-98765"


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def answer(self) -> None:
            seen.append(f"{self.command} {self.path}")
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        do_GET = do_DELETE = answer

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}", seen
    httpd.shutdown()


def test_a_request_is_said_masked_then_sent(
    server: tuple[str, list[str]], capfd: pytest.CaptureFixture[str]
) -> None:
    url, seen = server
    request = urllib.request.Request(f"{url}/v2/?token={TOKEN}")
    with webclient.send(request, timeout=5, secrets=[TOKEN]) as response:
        assert response.read() == b"ok"
    assert seen == [f"GET /v2/?token={TOKEN}"]
    assert capfd.readouterr().err == f"http: GET {url}/v2/?token={MASK}\n"


def test_a_dry_run_request_is_said_and_not_sent(
    server: tuple[str, list[str]], capfd: pytest.CaptureFixture[str]
) -> None:
    url, seen = server
    request = urllib.request.Request(f"{url}/tags/x", method="DELETE")
    with pytest.raises(webclient.NotSent):
        webclient.send(request, timeout=5, dry_run=True)
    assert seen == []
    assert capfd.readouterr().err == f"(dry-run) not sent: DELETE {url}/tags/x\n"


def test_docker_sdk_calls_are_said_and_a_dry_run_change_is_not_made(
    capfd: pytest.CaptureFixture[str],
) -> None:
    made: list[str] = []
    assert door_docker.ask("look up image a:b", lambda: made.append("ask") or 7) == 7
    door_docker.change("remove image a:b", lambda: made.append("change"), dry_run=True)
    door_docker.change("kill container c", lambda: made.append("kill"), quiet=True)
    assert made == ["ask", "kill"]
    assert capfd.readouterr().err.splitlines() == [
        "docker sdk: look up image a:b",
        "(dry-run) not asked: docker sdk: remove image a:b",
    ]
