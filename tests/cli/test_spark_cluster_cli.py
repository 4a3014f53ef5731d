"""``millrace spark-cluster start|stop`` as an operator runs it: a separate process that leaves
a Spark master with its workers behind (ALIVE at the master), says so when started twice, and
stops them by their PIDs, idempotently, with a Spark Connect server when asked; a port already
taken fails the start with the reason."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from millrace.errors import LocalServerError
from millrace.spark.standalone_cluster import SparkStandaloneCluster
from tests.processes import millrace, running
from tests.zookeeper_server import free_port

pytestmark = [pytest.mark.slow]


def test_start_twice_then_stop_twice(tmp_path: Path) -> None:
    port, ui, connect = free_port(), free_port(), free_port()
    where = ["--dir", str(tmp_path / "spark")]
    ports = ["--port", str(port), "--webui-port", str(ui), "--connect-port", str(connect)]
    try:
        started = millrace("spark-cluster", "start", "--workers", "2", *ports, *where, cwd=tmp_path)
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"at spark://127.0.0.1:{port}" in started.stdout
        # the Connect server's application holds every core: only spark.remote is offered
        assert f"-D spark.remote=sc://127.0.0.1:{connect}" in started.stdout
        assert "spark.master=" not in started.stdout
        cluster = SparkStandaloneCluster.running_in(tmp_path / "spark")
        assert cluster is not None, "the cluster outlived the command"
        assert cluster.alive_workers() == 2
        assert cluster.connect_url == f"sc://127.0.0.1:{connect}"
        apps = [app["name"] for app in cluster.state()["activeapps"]]
        assert apps == ["Spark Connect server"]
        pids = [cluster.pid(p) for p in ("master", "worker-0", "worker-1", "connect")]
        assert None not in pids

        again = millrace("spark-cluster", "start", *ports, *where, cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        assert f"already runs at spark://127.0.0.1:{port}" in again.stdout

        stopped = millrace("spark-cluster", "stop", *where, cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert f"stopped the Spark cluster at spark://127.0.0.1:{port}" in stopped.stdout
        assert not any(running(pid) for pid in pids if pid is not None)
        assert SparkStandaloneCluster.running_in(tmp_path / "spark") is None

        twice = millrace("spark-cluster", "stop", *where, cwd=tmp_path)
        assert twice.returncode == 0 and "no Spark cluster runs" in twice.stdout
    finally:
        left = SparkStandaloneCluster.running_in(tmp_path / "spark")
        if left is not None:
            left.stop()


def test_a_taken_port_fails_the_start_with_the_masters_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = SparkStandaloneCluster(tmp_path / "spark", port=port, start_timeout=60)
        with pytest.raises(LocalServerError) as info:
            cluster.start()
    assert info.value.server == "Spark master"
    assert str(port) in info.value.log_tail
    assert cluster.pid("master") is None and cluster.pid("worker-0") is None


def test_a_taken_connect_port_fails_the_start_and_stops_the_rest(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = SparkStandaloneCluster(tmp_path / "spark", connect_port=port, start_timeout=90)
        with pytest.raises(LocalServerError) as info:
            cluster.start()
    assert info.value.server == "Spark Connect server"
    assert f"BindException: Failed to bind to address /127.0.0.1:{port}" in str(info.value)
    assert not any(cluster.pid(p) for p in ("master", "worker-0", "connect"))
