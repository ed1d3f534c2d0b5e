"""The recording stand-in fixture records exact argv and honours its script."""

import subprocess

from tests.conftest import StandIns


def test_standin_records_argv_and_exit_code(standins: StandIns) -> None:
    standins.add("buildkite-agent", "echo uploaded; exit 3", env_keys=("FOO",))
    done = subprocess.run(
        ["buildkite-agent", "pipeline", "upload", "a b"],
        env={**standins.env(), "FOO": "bar"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3
    assert done.stdout == "uploaded\n"
    assert standins.argvs("buildkite-agent") == [["pipeline", "upload", "a b"]]
    assert standins.calls()[0]["env"] == {"FOO": "bar"}
