"""``millrace zookeeper start|stop`` as an operator runs it: a separate process that leaves a
serving ZooKeeper behind, says so when started twice, and stops it by its PID, idempotently."""

from __future__ import annotations

import re
from pathlib import Path

from millrace.runtime.highavailability.local_zookeeper import LocalZooKeeper
from tests.processes import millrace, running
from tests.zookeeper_server import ensure_zookeeper_installed, free_port


def test_start_twice_then_stop_twice_in_the_default_directory(tmp_path: Path) -> None:
    ensure_zookeeper_installed()
    port = free_port()
    settings = ["-D", f"io.tmp.dirs={tmp_path / 'tmp'}"]
    directory = tmp_path / "tmp" / "zookeeper"
    try:
        started = millrace("zookeeper", "start", "--port", str(port), *settings, cwd=tmp_path)
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"-D high-availability.zookeeper.quorum=127.0.0.1:{port}" in started.stdout
        match = re.search(r"\(pid (\d+)\)", started.stdout)
        assert match is not None, started.stdout
        pid = int(match.group(1))
        server = LocalZooKeeper.running_in(directory)
        assert server is not None and server.pid == pid  # outlived the command
        assert server.four_letter_word("ruok") == "imok"

        again = millrace("zookeeper", "start", "--port", str(port), *settings, cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        assert f"already runs (pid {pid}) at 127.0.0.1:{port}" in again.stdout

        stopped = millrace("zookeeper", "stop", *settings, cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert f"stopped ZooKeeper (pid {pid})" in stopped.stdout
        assert not running(pid)
        assert not (directory / "zookeeper.pid").exists()

        idle = millrace("zookeeper", "stop", *settings, cwd=tmp_path)
        assert idle.returncode == 0, idle.stdout + idle.stderr
        assert "no ZooKeeper runs" in idle.stdout
    finally:
        leftover = LocalZooKeeper.running_in(directory)
        if leftover is not None:
            leftover.kill()


def test_start_without_the_jars_exits_1_naming_the_install_command(tmp_path: Path) -> None:
    result = millrace(
        "zookeeper",
        "start",
        "--port",
        str(free_port()),
        "--data-dir",
        str(tmp_path / "zk"),
        "--jar-dir",
        str(tmp_path / "no-jars"),
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"no zookeeper.jar in {tmp_path / 'no-jars'}" in result.stdout
    assert "apt-get install zookeeper" in result.stdout
    assert LocalZooKeeper.running_in(tmp_path / "zk") is None
