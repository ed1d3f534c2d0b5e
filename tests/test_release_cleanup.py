"""`release.cleanup-nightly` against a small Docker Hub on 127.0.0.1.

The server implements the three endpoints the script uses (login, the tag
list with its substring `name` filter and pagination, tag delete) and checks
the credentials it receives. Canary secrets are set for the username's token
and the bearer token; none may show up in stdout, stderr, exception text or
any file the run writes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from ci.errors import Stop, UserError
from ci.release import cleanup
from ci.release.hub import HubClient, HubError, Response
from tests.conftest import cli_path
from tests.inproc import Outcome, run_inproc

USERNAME = "vllmbot"
TOKEN = "CANARY-hub-token-7d1e0f4a9b2c"
BEARER = "CANARY-bearer-3e8f1a6c0d5b"
CANARIES = (TOKEN, BEARER)
REPO_PATH = "/v2/repositories/vllm/vllm-omni/tags"
SERVER_PAGE = 15  # Hub caps page_size; this server pages by 15 whatever is asked
BASE = datetime(2026, 11, 1, tzinfo=timezone.utc)


def stamp(hours: float) -> str:
    return (BASE + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def catalogue() -> list[dict[str, object]]:
    """40 results over 3 pages: 15 matching, 15 that only contain 'nightly-', 10 matching.

    Page 2 has no tag with the prefix, so a client that stops at the first
    page without matches (the indexed script's bug) misses page 3.
    """
    matching = [{"name": f"nightly-{i:040x}", "last_updated": stamp(i)} for i in range(23)]
    matching[5]["name"] = "nightly-x86_64"
    matching[6]["name"] = "nightly-aarch64"
    # Same second, different fraction length: string order and time order disagree.
    matching.append({"name": "nightly-fraction-late", "last_updated": "2026-10-20T10:00:00.5Z"})
    matching.append({"name": "nightly-no-time", "last_updated": None})
    decoys = [{"name": f"pre-nightly-{i}", "last_updated": stamp(100 + i)} for i in range(15)]
    order = [7, 19, 0, 12, 3, 24, 16, 9, 21, 1, 14, 5, 23, 10, 18]
    first = [matching[i] for i in order]
    rest = [m for i, m in enumerate(matching) if i not in order]
    return [*first, *decoys, *rest]


EXTRA = [
    {"name": "nightly", "last_updated": stamp(-500)},  # no dash: the filter does not return it
    {"name": "latest", "last_updated": stamp(-400)},
]


@dataclass
class FakeHub:
    tags: list[dict[str, object]] = field(default_factory=catalogue)
    fail_list_page: int | None = None
    flaky_pages: dict[int, int] = field(default_factory=dict)  # page -> 503s before success
    fail_delete: dict[str, int] = field(default_factory=dict)
    hang: bool = False  # GETs are never answered while the test runs
    released: threading.Event = field(default_factory=threading.Event)
    requests: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    bad_auth: int = 0
    anonymous_reads: bool = False  # as the real Hub: a public repo's tags list without a login

    def handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def reply(self, code: int, body: object | None = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def authorized(self) -> bool:
                if self.headers.get("Authorization") == f"Bearer {BEARER}":
                    return True
                if (
                    hub.anonymous_reads
                    and self.command == "GET"
                    and "Authorization" not in (self.headers)
                ):
                    return True
                hub.bad_auth += 1
                self.reply(401, {"detail": "unauthorized"})
                return False

            def do_POST(self) -> None:
                hub.requests.append(("POST", self.path))
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/v2/users/login" and body == {
                    "username": USERNAME,
                    "password": TOKEN,
                }:
                    self.reply(200, {"token": BEARER})
                else:
                    self.reply(401, {"detail": "Incorrect authentication credentials"})

            def do_GET(self) -> None:
                hub.requests.append(("GET", self.path))
                if hub.hang:
                    hub.released.wait()
                    return
                url = urllib.parse.urlsplit(self.path)
                if url.path != REPO_PATH or not self.authorized():
                    return
                query = dict(urllib.parse.parse_qsl(url.query))
                page = int(query["page"])
                if page == hub.fail_list_page:
                    self.reply(500, {"detail": "internal error"})
                    return
                if hub.flaky_pages.get(page, 0) > 0:
                    hub.flaky_pages[page] -= 1
                    self.reply(503, {"detail": "try later"})
                    return
                name = query.get("name", "")
                found = [t for t in [*hub.tags, *EXTRA] if name in str(t["name"])]
                chunk = found[(page - 1) * SERVER_PAGE : page * SERVER_PAGE]
                if not chunk:
                    self.reply(404, {"message": "httperror 404: object not found"})
                    return
                more = page * SERVER_PAGE < len(found)
                nxt = f"http://hub{REPO_PATH}?page={page + 1}" if more else None
                self.reply(200, {"count": len(found), "next": nxt, "results": chunk})

            def do_DELETE(self) -> None:
                hub.requests.append(("DELETE", self.path))
                if not self.path.startswith(REPO_PATH + "/") or not self.authorized():
                    return
                tag = urllib.parse.unquote(self.path[len(REPO_PATH) + 1 :])
                if tag in hub.fail_delete:
                    self.reply(hub.fail_delete[tag], {"detail": f"cannot delete {tag}"})
                    return
                hub.deleted.append(tag)
                hub.tags = [t for t in hub.tags if t["name"] != tag]
                self.reply(204)

        return Handler


@pytest.fixture
def hub() -> Iterator[tuple[FakeHub, str]]:
    fake = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        fake.released.set()
        server.shutdown()
        server.server_close()


def expected_doomed(keep: int = 14) -> list[str]:
    """Independent of our code: the fixture's times, newest first, by construction."""
    matching = [t for t in catalogue() if str(t["name"]).startswith("nightly-")]
    timed = [t for t in matching if t["last_updated"] is not None]
    untimed = [str(t["name"]) for t in matching if t["last_updated"] is None]

    def when(t: dict[str, object]) -> datetime:
        text = str(t["last_updated"])
        if text == "2026-10-20T10:00:00.5Z":
            return datetime(2026, 10, 20, 10, 0, 0, 500000, tzinfo=timezone.utc)
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)

    order = untimed + [str(t["name"]) for t in sorted(timed, key=when, reverse=True)]
    return order[keep:]


def run(hub_url: str, tmp_path: Path, *args: str, **env: str) -> Outcome:
    """The task in this process (`tests.inproc.run_inproc`, the console script's code path);
    the fake hub answers from its own thread."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DOCKERHUB_")}
    base.update(
        {"DOCKERHUB_USERNAME": USERNAME, "DOCKERHUB_TOKEN": TOKEN, "HOME": str(tmp_path), **env}
    )
    return run_inproc(
        "release.cleanup-nightly", "--hub-url", hub_url, "--delete-interval", "0s", *args,
        env=base, cwd=tmp_path, timeout=120,
    )  # fmt: skip


def assert_no_canary(tmp_path: Path, *texts: str) -> None:
    for text in texts:
        for canary in CANARIES:
            assert canary not in text
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(c.encode() in data for c in CANARIES), path


def test_deletes_all_but_the_newest_14_over_every_page(
    hub: tuple[FakeHub, str], tmp_path: Path
) -> None:
    fake, url = hub
    assert len(catalogue()) == 40 and -(-40 // SERVER_PAGE) == 3
    done = run(url, tmp_path)
    assert done.code == 0, done.stderr
    doomed = expected_doomed()
    assert len(doomed) == 11
    assert fake.deleted == doomed
    assert done.stdout.splitlines() == doomed
    lists = [p for m, p in fake.requests if m == "GET"]
    assert lists == [f"{REPO_PATH}?page={n}&page_size=100&name=nightly-" for n in (1, 2, 3)]
    # Kept: the tag without a time, and the late fraction that string order would misplace.
    assert "nightly-no-time" not in fake.deleted
    assert not any(name.startswith("pre-nightly") for name in fake.deleted)
    assert "Found 25 tags" in done.stderr
    assert "Will delete 11 old tags, keeping the newest 14" in done.stderr
    assert f"Successfully deleted tag: {doomed[0]} (HTTP 204)" in done.stderr
    assert done.stderr.rstrip().endswith("Cleanup completed successfully")
    assert fake.bad_auth == 0
    assert_no_canary(tmp_path, done.stdout, done.stderr)


def test_failed_delete_exits_1_after_trying_the_rest(
    hub: tuple[FakeHub, str], tmp_path: Path
) -> None:
    fake, url = hub
    doomed = expected_doomed()
    fake.fail_delete = {doomed[2]: 403}
    done = run(url, tmp_path)
    assert done.code == 1
    assert fake.deleted == [t for t in doomed if t != doomed[2]]
    assert f"Error: Failed to delete tag {doomed[2]} (HTTP 403): cannot delete {doomed[2]}" in (
        done.stderr
    )
    assert "Cleanup finished with 1 deletion failure(s)" in done.stderr
    assert_no_canary(tmp_path, done.stdout, done.stderr)


def test_http_500_while_listing_exits_1_and_deletes_nothing(
    hub: tuple[FakeHub, str], tmp_path: Path
) -> None:
    fake, url = hub
    fake.fail_list_page = 2
    done = run(url, tmp_path)
    assert done.code == 1
    assert "error: failed to list tags (page 2)" in done.stderr and "HTTP 500" in done.stderr
    pages = [p.split("&")[0] for m, p in fake.requests if m == "GET"]
    assert pages == [f"{REPO_PATH}?page={n}" for n in (1, 2, 2, 2)]  # retried twice
    assert "No tags found" not in done.stderr
    assert fake.deleted == [] and not any(m == "DELETE" for m, _ in fake.requests)
    assert_no_canary(tmp_path, done.stdout, done.stderr)


def test_http_500_on_first_page_is_not_no_tags(hub: tuple[FakeHub, str], tmp_path: Path) -> None:
    fake, url = hub
    fake.fail_list_page = 1
    done = run(url, tmp_path)
    assert done.code == 1
    assert "No tags found to clean up" not in done.stderr


def test_dry_run_lists_and_deletes_nothing(hub: tuple[FakeHub, str], tmp_path: Path) -> None:
    fake, url = hub
    done = run(url, tmp_path, "--dry-run")
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == expected_doomed()
    assert not any(m == "DELETE" for m, _ in fake.requests)
    assert_no_canary(tmp_path, done.stdout, done.stderr)


@pytest.mark.parametrize(
    "missing",
    [("DOCKERHUB_TOKEN", "DOCKERHUB_USERNAME"), ("DOCKERHUB_TOKEN",), ("DOCKERHUB_USERNAME",)],
)
def test_dry_run_needs_no_credentials(
    hub: tuple[FakeHub, str], tmp_path: Path, missing: tuple[str, ...]
) -> None:
    """Listing a public repository's tags needs no login: the dry-run lists anonymously."""
    fake, url = hub
    fake.anonymous_reads = True
    done = run(url, tmp_path, "--dry-run", **dict.fromkeys(missing, ""))
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == expected_doomed()
    assert [m for m, _ in fake.requests] == ["GET", "GET", "GET"]  # no login, no delete
    assert "listing tags anonymously" in done.stderr
    assert "Error: DOCKERHUB_TOKEN environment variable is not set" not in done.stderr
    assert f"(dry-run) Would delete tag: {expected_doomed()[0]}" in done.stderr.splitlines()
    assert_no_canary(tmp_path, done.stdout, done.stderr)


def test_a_real_run_still_needs_credentials_though_listing_would_work(
    hub: tuple[FakeHub, str], tmp_path: Path
) -> None:
    fake, url = hub
    fake.anonymous_reads = True
    done = run(url, tmp_path, DOCKERHUB_TOKEN="")
    assert done.code == 1
    assert "Error: DOCKERHUB_TOKEN environment variable is not set" in done.stderr
    assert fake.requests == []


def test_keep_option(hub: tuple[FakeHub, str], tmp_path: Path) -> None:
    _fake, url = hub
    done = run(url, tmp_path, "--keep", "30", "--dry-run")
    assert done.code == 0
    assert done.stdout == ""
    assert "No tags need to be deleted (only 25 tags found, keeping 30)" in done.stderr


@pytest.mark.process
def test_delete_interval_waits_between_deletes(hub: tuple[FakeHub, str], tmp_path: Path) -> None:
    """With an hour between deletes, the second never starts: stopped in the wait, one is gone.

    A process of its own: the subject is SIGTERM sent to it while it waits (exit 143)."""
    fake, url = hub
    fake.tags = [t for t in fake.tags if str(t["name"]).startswith("nightly-")][:16]
    proc = subprocess.Popen(
        [cli_path(), "release.cleanup-nightly", "--hub-url", url, "--delete-interval", "1h"],
        env={**os.environ, "DOCKERHUB_USERNAME": USERNAME, "DOCKERHUB_TOKEN": TOKEN},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()  # printed once the first delete succeeded
        assert first and fake.deleted == [first], proc.communicate(timeout=60)
        assert proc.poll() is None  # waiting, not done
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert (rest, fake.deleted) == ("", [first])
    assert f"Successfully deleted tag: {first} (HTTP 204)" in err
    assert err.count("Deleting tag: ") == 1


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DOCKERHUB_TOKEN": ""}, "Error: DOCKERHUB_TOKEN environment variable is not set"),
        ({"DOCKERHUB_USERNAME": ""}, "Error: DOCKERHUB_USERNAME environment variable is not set"),
        ({"DOCKERHUB_USERNAME": "someone"}, "Error: Failed to get DockerHub bearer token"),
    ],
)
def test_credential_problems_exit_1(
    hub: tuple[FakeHub, str], tmp_path: Path, env: dict[str, str], message: str
) -> None:
    fake, url = hub
    done = run(url, tmp_path, **env)
    assert done.code == 1
    assert message in done.stderr
    assert not any(m == "GET" for m, _ in fake.requests)
    assert_no_canary(tmp_path, done.stdout, done.stderr)


def test_bad_options_exit_2(tmp_path: Path) -> None:
    done = run("http://example.com", tmp_path, "--keep", "0")
    assert done.code == 2
    assert done.stderr.splitlines() == [
        "error: --hub-url: 'http://example.com' must be an https:// URL "
        "(plain http only for 127.0.0.1/localhost)",
        "error: --keep: 0 is not a positive number of tags to keep",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--keep", "x"), "error: --keep: 'x' is not a positive number of tags to keep"),
        (("--keep", "-3"), "error: --keep: -3 is not a positive number of tags to keep"),
        (
            ("--delete-interval", "soon"),
            "error: --delete-interval: 'soon' is not a duration (examples: 90s, 80m, 1h30m)",
        ),
    ],
)
def test_bad_values_are_one_error_line_not_a_traceback(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    done = run_inproc(
        "release.cleanup-nightly", *args, env={**os.environ, "DOCKERHUB_TOKEN": TOKEN}, cwd=tmp_path
    )
    assert (done.code, done.stdout, done.stderr) == (2, "", message + "\n")


# --------------------------------------------------------------------------- library


def test_every_request_times_out(hub: tuple[FakeHub, str]) -> None:
    fake, url = hub
    fake.hang = True  # the server never answers: only the timeout ends the request
    client = HubClient(url, timeout=0.5, attempts=1)
    client.login(USERNAME, TOKEN)
    with pytest.raises(HubError) as err:
        client.tags_page("vllm/vllm-omni", 1, 100, "nightly-")
    assert str(err.value).startswith(f"GET {url}/v2/repositories/vllm/vllm-omni/tags?")
    assert str(err.value).endswith(": TimeoutError")
    assert [m for m, _ in fake.requests] == ["POST", "GET"]
    for canary in CANARIES:
        assert canary not in str(err.value) and canary not in repr(err.value)
        assert canary not in repr(client)


def test_transient_errors_are_retried_but_deletes_are_not(hub: tuple[FakeHub, str]) -> None:
    fake, url = hub
    fake.flaky_pages = {1: 2}
    client = HubClient(url, backoff=0.01)
    client.login(USERNAME, TOKEN)
    assert len(client.tags_page("vllm/vllm-omni", 1, 100, "nightly-")["results"]) == SERVER_PAGE
    fake.fail_delete = {"nightly-x86_64": 503}
    assert client.delete_tag("vllm/vllm-omni", "nightly-x86_64").status == 503
    assert [m for m, _ in fake.requests].count("DELETE") == 1


def test_exceptions_carry_no_secret(hub: tuple[FakeHub, str]) -> None:
    fake, url = hub
    fake.fail_list_page = 1
    with pytest.raises(Stop) as err:
        cleanup.cleanup(
            hub_url=url,
            delete_interval=0,
            env={"DOCKERHUB_USERNAME": USERNAME, "DOCKERHUB_TOKEN": TOKEN},
        )
    assert err.value.code == 1
    text = " ".join([str(err.value), repr(err.value), *err.value.lines])
    assert not any(c in text for c in CANARIES)
    with pytest.raises(HubError) as bad:
        HubClient(url).login(USERNAME, "wrong-" + TOKEN)
    assert not any(c in str(bad.value) for c in CANARIES)


def test_redirects_are_refused(tmp_path: Path) -> None:
    class Redirect(BaseHTTPRequestHandler):
        seen: ClassVar[list[str | None]] = []

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            Redirect.seen.append(self.headers.get("Authorization"))
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_address[1]}/x")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        client = HubClient(f"http://127.0.0.1:{server.server_address[1]}")
        client._bearer = BEARER
        with pytest.raises(HubError) as err:
            client.tags_page("vllm/vllm-omni", 1, 100, "nightly-")
        assert ": HTTP 302" in str(err.value)  # the redirect is the answer
        assert len(Redirect.seen) == 1  # not followed
    finally:
        server.shutdown()
        server.server_close()


def test_newest_first_uses_times_not_strings() -> None:
    tags = cleanup.matching(
        [
            {"name": "nightly-a", "last_updated": "2026-10-20T10:00:00Z"},
            {"name": "nightly-b", "last_updated": "2026-10-20T10:00:00.5Z"},
            {"name": "nightly-c", "last_updated": None},
            {"name": "nightly-d", "last_updated": "2026-10-19T23:59:59.999999+00:00"},
            {"name": "nightly", "last_updated": "2030-01-01T00:00:00Z"},
            {"name": "x-nightly-e", "last_updated": "2030-01-01T00:00:00Z"},
        ]
    )
    order = [t.name for t in cleanup.newest_first(tags)]
    assert order == ["nightly-c", "nightly-b", "nightly-a", "nightly-d"]


def test_keep_must_be_positive() -> None:
    with pytest.raises(UserError) as err:
        cleanup.cleanup(hub_url="https://hub.docker.com", keep=-1, env={})
    assert err.value.code == 2


# --------------------------------------------------------------------------- messages


def closed_port_url() -> str:
    """A loopback URL nothing listens on: every request there gets no answer."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_a_failed_login_keeps_the_scripts_line_and_adds_its_cause(
    hub: tuple[FakeHub, str], tmp_path: Path
) -> None:
    """docs/differences.md, "Failures say their cause": the script's words, then (why)."""
    _fake, url = hub
    done = run(url, tmp_path, DOCKERHUB_USERNAME="someone")
    assert done.code == 1
    assert done.stderr.splitlines()[-1] == (
        f"Error: Failed to get DockerHub bearer token (POST {url}/v2/users/login: HTTP 401, "
        "no token)"
    )
    nobody = closed_port_url()
    with pytest.raises(Stop) as stopped:
        cleanup.cleanup(
            hub_url=nobody, env={"DOCKERHUB_USERNAME": USERNAME, "DOCKERHUB_TOKEN": TOKEN}
        )
    (line,) = stopped.value.lines
    assert stopped.value.code == 1
    assert line.startswith(
        f"Error: Failed to get DockerHub bearer token (POST {nobody}/v2/users/login: "
    )


def test_a_failed_delete_says_what_the_script_said(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """`.detail` as `jq -r` prints it, else the body, else `(empty response body)`; with no
    answer at all (the script's HTTP 000) the cause is added."""
    said = {
        b"": "(empty response body)",
        b"\n\n": "(empty response body)",
        b"  not json\n": "  not json",
        b'{"detail": "gone"}': "gone",
        b'{"detail": 0}': "0",
        b'{"detail": true}': "true",
        b'{"detail": {"why": "x"}}': '{\n  "why": "x"\n}',
        b'{"detail": null, "x": 1}': '{"detail": null, "x": 1}',
        b'{"detail": false}': '{"detail": false}',
    }
    for body, detail in said.items():
        assert cleanup.detail_of(Response(404, body)) == detail, body
    nobody = closed_port_url()
    assert not cleanup.delete(HubClient(nobody), "nightly-x", cleanup.Logger())
    line = capfd.readouterr().err.splitlines()[-1]  # after webclient's `http: DELETE …`
    assert line.startswith(
        "Error: Failed to delete tag nightly-x (HTTP 000): no answer (DELETE "
        f"{nobody}/v2/repositories/vllm/vllm-omni/tags/nightly-x: "
    )
