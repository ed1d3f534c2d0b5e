"""`sandbox up | status | down` on this machine's real engine and registry, and its pure parts."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from ci.sandbox import debs
from ci.sandbox.debs import ENGINE, Pin
from ci.sandbox.layout import Layout
from ci.sandbox.parts import _program
from ci.sandbox.run import choose
from ci.sandbox.settings import Settings
from tests.conftest import StandIns, run_cli
from tests.inproc import Outcome, run_task

PARTS = ["engine", "buildx", "registry", "base image", "builder"]


@pytest.mark.parametrize("where", ["--root", "VLLM_OMNI_CI_SANDBOX", "DOCKER_CONFIG"])
def test_status_with_an_unknown_users_home_reports_instead_of_a_traceback(
    where: str, tmp_path: Path, inproc: Callable[..., Outcome]
) -> None:
    """`~nouser` stays as written, as a shell leaves it (pathlib raised RuntimeError)."""
    env = {**os.environ, "PATH": os.environ.get("PATH", ""), "DOCKER_HOST": "unix:///nonexistent"}
    argv = ["sandbox", "status"]
    if where == "--root":
        argv += ["--root", "~no-such-user-x"]
    else:
        env[where] = "~no-such-user-x"
    done = inproc(*argv, env=env, cwd=tmp_path)
    assert "Traceback" not in done.stderr and done.code in (0, 1), done.stderr
    if where != "DOCKER_CONFIG":
        assert done.stdout.startswith("sandbox: ~no-such-user-x"), done.stdout


@pytest.mark.docker
def test_status_lists_every_part_ok_here(tmp_path: Path) -> None:
    done = run_cli("sandbox", "status", "--json", "--root", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert [p["name"] for p in report["parts"]] == PARTS
    assert report["ok"] is True and all(p["ok"] for p in report["parts"])


@pytest.mark.docker
def test_up_on_a_ready_machine_reuses_every_part_and_changes_nothing(tmp_path: Path) -> None:
    done = run_cli("sandbox", "up", "--root", str(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [ln.split(":", 1)[0] for ln in lines[1:-1]] == PARTS
    assert all(": reused: " in ln for ln in lines[1:-1]), done.stdout
    assert lines[-1].startswith("sandbox up: 5 parts ready in ")
    state = json.loads((tmp_path / "state.json").read_text())
    # nothing started, so nothing for down; the settings recorded for status and down
    settings = {"socket": "/var/run/docker.sock", "registry_port": 5000}
    assert state == {"links": [], "folders": [], "services": {}, "settings": settings}


@pytest.mark.docker
def test_status_names_a_missing_engine_with_its_fix_and_exits_1(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no.sock"}
    done = run_cli("sandbox", "status", "--root", str(tmp_path), env=env)
    assert done.returncode == 1
    engine = next(ln for ln in done.stdout.splitlines() if ln.startswith("engine: "))
    assert engine.startswith("engine: missing: no engine answers")
    assert "(fix: run `vllm-omni-ci sandbox up`)" in engine
    assert "registry: ok: " in done.stdout  # the other parts are still judged


def test_down_leaves_alone_what_up_did_not_start(tmp_path: Path) -> None:
    done = run_task("sandbox", "down", "--root", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "registry: not started by sandbox up: left as it is" in done.stdout
    assert "engine: not started by sandbox up: left as it is" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("sandbox down: images and registry data kept")


def test_down_stops_the_service_up_recorded_and_only_once(tmp_path: Path) -> None:
    service = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        started = psutil.Process(service.pid).create_time()
        record = {"pid": service.pid, "started": started, "argv": ["sleep", "300"], "log": ""}
        (tmp_path / "state.json").write_text(
            json.dumps({"services": {"registry": record}, "links": []})
        )
        done = run_task("sandbox", "down", "--root", str(tmp_path))
        assert done.returncode == 0, done.stderr
        assert f"registry: stopped (pid {service.pid})" in done.stdout
        assert service.wait(timeout=30) == -15  # SIGTERM
        again = run_task("sandbox", "down", "--root", str(tmp_path))
        assert "registry: not started by sandbox up" in again.stdout
    finally:
        service.kill()
        service.wait()


def test_a_recycled_pid_is_never_signalled(tmp_path: Path) -> None:
    """A recorded pid whose start time differs is another program: left alone."""
    service = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        record = {"pid": service.pid, "started": 1.0, "argv": ["dockerd"], "log": ""}
        (tmp_path / "state.json").write_text(json.dumps({"services": {"engine": record}}))
        done = run_task("sandbox", "down", "--root", str(tmp_path))
        assert f"engine: already stopped (pid {service.pid})" in done.stdout
        assert service.poll() is None
    finally:
        service.kill()
        service.wait()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sandbox", "bogus"], "error: action: unknown value 'bogus': allowed values are up,"),
        (["sandbox", "up", "--json"], "error: --json: applies to `sandbox status` only"),
        (["sandbox", "status", "--purge"], "error: --purge: applies to `sandbox down` only"),
    ],
)
def test_usage_errors_exit_2_before_anything_runs(args: list[str], message: str) -> None:
    done = run_task(*args)
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("26.1.5+dfsg1-9+deb13u1+b1", True),
        ("26.1.5-1", True),
        ("26.1.5", True),
        ("26.1.50-1", False),
        ("26.1.4+dfsg1-1", False),
        ("1:26.1.5-1", False),
    ],
)
def test_a_pin_is_an_upstream_version(version: str, ok: bool) -> None:
    assert Pin("docker.io", "trixie", "26.1.5").matches(version) is ok


def test_the_engine_pins_are_the_ones_checked_by_hand() -> None:
    assert {(p.package, p.suite, p.upstream) for p in ENGINE} >= {
        ("docker.io", "trixie", "26.1.5"),
        ("docker-cli", "trixie", "26.1.5"),
        ("containerd", "trixie", "1.7.24"),
        ("runc", "bookworm", "1.1.5"),
    }


def test_the_mirror_is_the_one_apt_uses(tmp_path: Path) -> None:
    deb822 = tmp_path / "debian.sources"
    deb822.write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm\n"
    )
    assert debs.mirror([deb822]) == "http://mirror.example/debian"
    one_line = tmp_path / "sources.list"
    one_line.write_text("# comment\ndeb [arch=amd64] https://m.example/debian bookworm main\n")
    assert debs.mirror([one_line]) == "https://m.example/debian"
    assert debs.mirror([tmp_path / "none"]) == debs.DEFAULT_MIRROR
    listed = debs.sources_list("http://m/debian").splitlines()
    assert [ln.split()[-2] for ln in listed] == ["trixie", "bookworm"]


def test_leftover_mounts_are_the_ones_under_the_root_deepest_first(tmp_path: Path) -> None:
    from ci.sandbox.run import leftover_mounts

    root = tmp_path / "sandbox"
    table = tmp_path / "mounts"
    table.write_text(
        f"nsfs {root}/run/docker/netns/default nsfs rw 0 0\n"
        f"overlay {root}/docker/x overlay rw 0 0\n"
        f"tmpfs {tmp_path}/sandbox-other tmpfs rw 0 0\n"
        "proc /proc proc rw 0 0\n"
    )
    assert leftover_mounts(root, table) == [
        f"{root}/run/docker/netns/default",
        f"{root}/docker/x",
    ]


def test_without_docker_on_path_buildx_is_missing_with_the_path_fix(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {**os.environ, "PATH": f"{bare}{os.pathsep}{Path(sys.executable).parent}"}
    done = run_task("sandbox", "status", "--root", str(tmp_path / "root"), env=env)
    assert done.returncode == 1
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("buildx: "))
    assert line.startswith("buildx: missing: no `docker` on PATH")
    assert f"export PATH={tmp_path}/root/prefix/usr/bin:$PATH" in line


def test_a_pidfile_left_by_a_killed_dockerd_is_removed(tmp_path: Path) -> None:
    from ci.sandbox.parts import _drop_stale_pidfile

    other = subprocess.Popen(["sleep", "300"])  # a live pid that is not dockerd
    try:
        pidfile = tmp_path / "dockerd.pid"
        pidfile.write_text(f"{other.pid}\n")
        _drop_stale_pidfile(pidfile)
        assert not pidfile.exists()
        assert other.poll() is None  # and nothing was signalled
    finally:
        other.kill()
        other.wait()


def test_a_missing_program_is_unpacked_before_its_path_is_chosen(
    tmp_path: Path, standins: StandIns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """debootstrap lives in usr/sbin: the path is asked of the prefix only once it is unpacked
    (asked before, it was usr/bin's, and a fresh machine's `sandbox up` got exit 127)."""
    if shutil.which("dpkg-deb") is None or shutil.which("debootstrap") is not None:
        pytest.skip("needs dpkg-deb, and no debootstrap on PATH")
    (pin,) = debs.DEBOOTSTRAP
    version = f"{pin.upstream}+nmu1"
    package = tmp_path / "package"
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN" / "control").write_text(
        f"Package: {pin.package}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: test <test@example.invalid>\nDescription: a stand-in\n"
    )
    (package / "usr" / "sbin").mkdir(parents=True)
    (package / "usr" / "sbin" / pin.package).write_text("#!/bin/sh\n")
    deb = tmp_path / f"{pin.package}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--build", str(package), str(deb)], check=True, capture_output=True)
    # A private apt that offers the pin and "downloads" the .deb into the current folder.
    standins.add("apt-get", f'[[ " $* " != *" download "* ]] || cp {deb} .')
    standins.add("apt-cache", f"echo ' {pin.package} | {version} | http://m {pin.suite}/main'")
    monkeypatch.setenv("PATH", standins.env()["PATH"])
    layout = Layout(tmp_path / "sandbox")
    program, installed = _program(layout, pin.package, debs.DEBOOTSTRAP)
    assert program == str(layout.prefix / "usr" / "sbin" / pin.package)
    assert Path(program).is_file()
    assert installed == f"{pin.package} {version} into {layout.prefix}"
    assert debs.installed(layout) == {pin.package: version}


# ------------------------------------------------------- where the engine and registry go


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Registry(http.server.BaseHTTPRequestHandler):
    """A registry that answers /v2/ and has every manifest."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Docker-Content-Digest", "sha256:" + "0" * 64)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def registry_port() -> Iterator[int]:
    """The port of a registry stand-in on 127.0.0.1, answering in a background thread."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


# A docker client whose engine has the containerd store, whose buildx runs and whose
# builder is running: every part of `up` is then reused, and nothing is started.
READY_DOCKER = """
case "$1" in
  info) printf '{"ServerVersion": "26.1.5", "DriverStatus": [["%s", "%s"]]}' \
          driver-type io.containerd.snapshotter.v1 ;;
  buildx) if [ "$2" = version ]; then echo 'github.com/docker/buildx 0.13.1'
          else printf 'Name: default\\nDriver: docker\\nStatus: running\\n'; fi ;;
  context) echo default ;;
  image) exit 0 ;;
  *) exit 1 ;;
esac
"""


def ready_machine(standins: StandIns) -> dict[str, str]:
    """Stand-ins for a machine where every part works; what would install or start fails."""
    standins.add("docker", READY_DOCKER, env_keys=("DOCKER_HOST",))
    for program in ("apt-get", "apt-cache", "dpkg", "dockerd", "docker-registry", "debootstrap"):
        standins.add(program, "exit 99")
    env = standins.env()
    env.pop("DOCKER_HOST", None)
    return env


def test_up_with_a_port_and_socket_names_them_records_them_and_status_reads_them(
    tmp_path: Path,
    standins: StandIns,
    registry_port: int,
    inproc: Callable[..., Outcome],
) -> None:
    """Every docker call goes to the chosen socket, each line names it and the port, and
    `status` (no options) looks where `up` recorded."""
    env = {**ready_machine(standins), "DOCKER_CONFIG": str(tmp_path / "docker-config")}
    root, sock = tmp_path / "sandbox", tmp_path / "engine.sock"
    port = str(registry_port)
    done = inproc(
        "sandbox",
        "up",
        "--root",
        str(root),
        "--registry-port",
        port,
        "--socket",
        str(sock),
        env=env,
    )
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    host, registry = f"unix://{sock}", f"127.0.0.1:{port}"
    assert lines[0] == f"sandbox: {root} (engine at {host}, registry at {registry})"
    assert [ln.split(":", 1)[0] for ln in lines[1:-1]] == PARTS
    assert all(": reused: " in ln for ln in lines[1:-1]), done.stdout
    assert f" at {host} " in lines[1]  # engine
    assert f"http://{registry}/v2/ answers" in lines[3]  # registry
    assert f"{registry}/omni-ci/python-base:bookworm" in lines[4]  # base image
    assert f"export DOCKER_HOST={host}" in done.stderr
    assert {c["env"]["DOCKER_HOST"] for c in standins.calls("docker")} == {host}  # type: ignore[index]
    state = json.loads((root / "state.json").read_text())
    assert state["settings"] == {"socket": str(sock), "registry_port": registry_port}
    assert state["services"] == {} and state["links"] == [] == state["folders"]

    standins.log.unlink()
    status = inproc("sandbox", "status", "--json", "--root", str(root), env=env)
    assert status.code == 0, status.stdout + status.stderr
    report = json.loads(status.stdout)
    assert report["settings"] == {
        "socket": str(sock),
        "registry_port": registry_port,
        "recorded": True,
    }
    wheres = {t["where"] for t in report["touches"]}
    assert {str(sock), registry, f"{tmp_path}/docker-config/cli-plugins/docker-buildx"} <= wheres
    assert {c["env"]["DOCKER_HOST"] for c in standins.calls("docker")} == {host}  # type: ignore[index]
    text = inproc("sandbox", "status", "--root", str(root), env=env)
    assert text.stdout.splitlines()[0] == lines[0]


def test_without_options_up_keeps_todays_socket_and_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    settings = choose(Layout(tmp_path))
    assert (settings.docker_host, settings.registry) == (
        "unix:///var/run/docker.sock",
        "127.0.0.1:5000",
    )
    assert settings.base_image == "127.0.0.1:5000/omni-ci/python-base:bookworm"
    # A client pointed elsewhere by DOCKER_HOST: the sandbox's engine goes where it looks.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/d.sock")
    assert choose(Layout(tmp_path)).socket == f"{tmp_path}/d.sock"
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
    assert choose(Layout(tmp_path)).socket == "/var/run/docker.sock"


def test_the_planned_daemon_and_registry_use_the_chosen_socket_and_port(tmp_path: Path) -> None:
    from ci.sandbox.parts import daemon_config, registry_config

    layout = Layout(tmp_path)
    layout.state.settings = Settings(f"{tmp_path}/engine.sock", 5123)
    assert daemon_config(layout)["hosts"] == [f"unix://{tmp_path}/engine.sock"]
    assert "http:\n  addr: 127.0.0.1:5123\n" in registry_config(layout)


def test_the_choice_round_trips_through_the_state_file(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    assert layout.state.settings is None  # no `up` yet
    layout.state.settings = Settings("/run/x/docker.sock", 65535)
    layout.state.folders = [f"{tmp_path}/cfg"]
    layout.save_state()
    again = Layout(tmp_path)
    assert again.state.settings == Settings("/run/x/docker.sock", 65535)
    assert again.settings == Settings("/run/x/docker.sock", 65535)
    assert again.state.folders == [f"{tmp_path}/cfg"]
    # A record edited by hand into nonsense is no record: the defaults apply.
    for bad in (
        {"socket": "rel.sock", "registry_port": 5000},
        {"socket": "/a", "registry_port": 0},
        {"socket": "/a", "registry_port": "x"},
        "5000",
    ):
        (tmp_path / "state.json").write_text(json.dumps({"settings": bad}))
        assert Layout(tmp_path).state.settings is None, bad


@pytest.fixture
def not_a_socket(tmp_path: Path) -> Path:
    path = tmp_path / "file"
    path.write_text("keep me\n")
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--registry-port", "0"],
            "error: --registry-port: '0' is not a port: allowed values are whole numbers"
            " 1 to 65535",
        ),
        (["--registry-port", "65536"], "error: --registry-port: '65536' is not a port"),
        (["--registry-port", "5e3"], "error: --registry-port: '5e3' is not a port"),
        (["--registry-port", "-1"], "error: --registry-port: '-1' is not a port"),
        (["--socket", "docker.sock"], "error: --socket: 'docker.sock' is not an absolute path"),
        (
            ["--socket", "/no/such/dir/d.sock"],
            "error: --socket: '/no/such/dir/d.sock': its folder /no/such/dir does not exist",
        ),
        (["--socket", "{file}"], "error: --socket: '{file}' exists and is not a socket"),
        (["--socket", "{file}/d.sock"], "error: --socket: '{file}/d.sock': {file} is not a folder"),
        (["--socket", "/" + "s" * 107], "error: --socket: '/sss"),
        (["--registry-port", "\u0665"], "error: --registry-port: '\u0665' is not a port"),
    ],
)
def test_a_bad_port_or_socket_exits_2_before_anything_runs(
    args: list[str],
    message: str,
    tmp_path: Path,
    standins: StandIns,
    not_a_socket: Path,
    inproc: Callable[..., Outcome],
) -> None:
    env = ready_machine(standins)
    root = tmp_path / "sandbox"
    args = [a.replace("{file}", str(not_a_socket)) for a in args]
    done = inproc("sandbox", "up", "--root", str(root), *args, env=env)
    assert done.code == 2, done.stdout + done.stderr
    assert done.stderr.startswith(message.replace("{file}", str(not_a_socket))), done.stderr
    assert "Traceback" not in done.stderr
    assert not root.exists() and standins.calls() == []
    assert not_a_socket.read_text() == "keep me\n"


def test_every_bad_option_is_named_in_one_round(inproc: Callable[..., Outcome]) -> None:
    done = inproc("sandbox", "status", "--registry-port", "x", "--socket", "/s", "--purge")
    assert done.code == 2
    assert done.stderr.splitlines()[:3] == [
        "error: --purge: applies to `sandbox down` only",
        "error: --registry-port: applies to `sandbox up` only (status and down use what up"
        " recorded)",
        "error: --socket: applies to `sandbox up` only (status and down use what up recorded)",
    ]
    both = inproc(
        "sandbox", "up", "--registry-port", "x", "--socket", "rel", "--root", "/nonexistent/r"
    )
    assert both.code == 2
    assert [ln.split(":", 2)[1] for ln in both.stderr.splitlines()[:2]] == [
        " --registry-port",
        " --socket",
    ]


def test_up_refuses_to_move_a_service_it_started_that_still_runs(
    tmp_path: Path, standins: StandIns, inproc: Callable[..., Outcome]
) -> None:
    """`down` would no longer find it where `status` looks: stop it first."""
    service = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        started = psutil.Process(service.pid).create_time()
        record = {"pid": service.pid, "started": started, "argv": ["docker-registry"], "log": ""}
        settings = {"socket": "/var/run/docker.sock", "registry_port": 5000}
        state = {"services": {"registry": record}, "settings": settings}
        (tmp_path / "state.json").write_text(json.dumps(state))
        env = ready_machine(standins)
        done = inproc("sandbox", "up", "--root", str(tmp_path), "--registry-port", "5001", env=env)
        assert done.code == 2, done.stdout + done.stderr
        assert done.stderr.startswith(
            f"error: --registry-port: the registry `sandbox up` started (pid {service.pid})"
            " still runs at 127.0.0.1:5000: run `vllm-omni-ci sandbox down` first"
        ), done.stderr
        assert standins.calls() == [] and service.poll() is None
        assert json.loads((tmp_path / "state.json").read_text()) == state
        # The same port again is no move: allowed (the other socket too: no engine of ours).
        same = inproc(
            "sandbox",
            "up",
            "--root",
            str(tmp_path),
            "--registry-port",
            "5000",
            "--socket",
            f"{tmp_path}/d.sock",
            env=env,
        )
        assert not same.stderr.startswith("error: --"), same.stderr
    finally:
        service.kill()
        service.wait()


def test_the_buildx_link_and_the_folders_made_for_it_are_recorded_and_purged(
    tmp_path: Path, standins: StandIns, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ci.sandbox.parts import check_buildx, up_buildx
    from ci.sandbox.run import down

    env = ready_machine(standins)
    monkeypatch.setenv("PATH", env["PATH"])
    config = tmp_path / "home" / ".docker"
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    layout = Layout(tmp_path / "sandbox")
    (pin,) = debs.BUILDX
    layout.root.mkdir()
    layout.installed.write_text(json.dumps({pin.package: f"{pin.upstream}+ds1-1"}))
    verb, _ = up_buildx(layout, check_buildx(layout))
    link = config / "cli-plugins" / "docker-buildx"
    assert verb == "installed" and link.is_symlink()
    assert layout.state.links == [str(link)]
    assert layout.state.folders == [str(config), str(config / "cli-plugins")]
    layout.save_state()
    (config / "config.json").write_text("{}")  # a file of the user's: .docker stays
    down(str(layout.root), purge=True)
    assert not link.is_symlink() and not (config / "cli-plugins").exists()
    assert (config / "config.json").exists()
    assert Layout(layout.root).state.folders == []


def test_the_touches_name_every_place_the_parts_use(tmp_path: Path) -> None:
    """The list `status --json` reports and the README shows, against the planners."""
    from ci.sandbox.parts import PARTS as PART_LIST
    from ci.sandbox.parts import daemon_config, registry_config
    from ci.sandbox.touches import touches

    layout = Layout(tmp_path)
    layout.state.settings = Settings(f"{tmp_path}/e.sock", 5123)
    link = f"{tmp_path}/cfg/cli-plugins/docker-buildx"
    rows = touches(layout.settings, str(layout.root), link)
    wheres = {t.where for t in rows}
    hosts = daemon_config(layout)["hosts"]
    assert isinstance(hosts, list) and len(hosts) == 1
    assert str(hosts[0]).removeprefix("unix://") in wheres
    addr = registry_config(layout).split("addr: ", 1)[1].strip()
    assert addr in wheres and link in wheres and str(Path(link).parent) in wheres
    assert f"{layout.run}/docker" in wheres  # the exec root, where dockerd's mounts are
    assert daemon_config(layout)["exec-root"] == str(layout.run / "docker")
    services = {p.name for p in PART_LIST if p.service}
    assert services <= {t.part for t in rows} <= {p.name for p in PART_LIST}


def test_the_readme_lists_what_up_changes_outside_its_folder() -> None:
    """README.md's table is `touches.readme_table()`, word for word."""
    from ci.sandbox.touches import readme_table

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert readme_table() in readme, "README.md lacks ci.sandbox.touches.readme_table()"


def test_doctor_asks_the_registry_up_recorded(
    tmp_path: Path, registry_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ci import doctor

    root = tmp_path / "sandbox"
    root.mkdir()
    monkeypatch.setenv("VLLM_OMNI_CI_SANDBOX", str(root))
    state = {"settings": {"socket": "/var/run/docker.sock", "registry_port": registry_port}}
    (root / "state.json").write_text(json.dumps(state))
    report = doctor.probe(engine=False)
    assert report.registry and report.sandbox.registry == f"127.0.0.1:{registry_port}"
    nobody = closed_port()
    state["settings"]["registry_port"] = nobody
    (root / "state.json").write_text(json.dumps(state))
    report = doctor.probe(engine=False)
    registry = next(f for f in doctor.judge(report, False) if f.name == "registry")
    assert not registry.ok
    assert registry.problem == f"nothing answers at http://127.0.0.1:{nobody}/v2/"
