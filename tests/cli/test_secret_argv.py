"""A secret given by value never reaches a command line (issue 9, case 6): ``cluster start
-D security.cluster-secret=...`` hands it to the JobManager it starts through the environment,
and that JobManager serves with it. A real JobManager process on loopback, stopped by pid."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

import pytest

from millrace.cli.remote_cluster import RemoteCluster
from millrace.config import Configuration
from tests.integration.helpers import run_cli
from tests.integration.standalone_cluster import free_port

pytestmark = pytest.mark.slow

SECRET = "given-by-value-on-the-command-line-0123"
WAIT = 30.0


def test_a_secret_given_by_value_stays_off_the_processes_command_lines(tmp_path) -> None:
    port = free_port()
    settings = {
        "io.tmp.dirs": str(tmp_path / "tmp"),
        "jobmanager.rpc.port": str(port),
        "rest.port": str(free_port()),
    }
    arguments = [a for k, v in settings.items() for a in ("-D", f"{k}={v}")]
    pids: list[int] = []
    try:
        started = run_cli(
            [
                "cluster",
                "start",
                "--taskmanagers",
                "0",
                *arguments,
                "-D",
                f"security.cluster-secret={SECRET}",
            ],
            tmp_path,
            120,
        )
        assert started.returncode == 0, started.stdout + started.stderr
        pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", started.stdout)]
        [jobmanager] = pids
        command_line = Path(f"/proc/{jobmanager}/cmdline").read_bytes().replace(b"\0", b" ")
        assert SECRET.encode() not in command_line, command_line
        assert not (tmp_path / "tmp" / "cluster" / "secret").exists()  # it used the given one
        conf = Configuration({**settings, "security.cluster-secret": SECRET})
        with RemoteCluster(conf, f"127.0.0.1:{port}") as client:
            assert client.dispatcher().list_jobs().result(WAIT) == []
    finally:
        stopped = run_cli(["cluster", "stop", *arguments], tmp_path, 60)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    assert "stopped jobmanager" in stopped.stdout, stopped.stdout + stopped.stderr
