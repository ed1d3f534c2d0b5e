"""`sandbox up | status | down` on this machine's real engine and registry, and its pure parts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from ci.sandbox import debs
from ci.sandbox.debs import ENGINE, Pin
from ci.sandbox.layout import Layout
from ci.sandbox.parts import _program
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
