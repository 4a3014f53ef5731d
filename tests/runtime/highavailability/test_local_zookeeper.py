"""LocalZooKeeper: a real standalone ZooKeeper on loopback serves kazoo, keeps its znodes across
a restart and a crash, leaves no process behind, and says clearly what is missing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from millrace.errors import LocalServerError
from millrace.runtime.highavailability.local_zookeeper import LocalZooKeeper
from tests.processes import running
from tests.zookeeper_server import free_port, running_zookeeper

CONNECT_WAIT = 30.0  # seconds for a kazoo client to connect


@contextmanager
def client(server: LocalZooKeeper, session_timeout: float = 10.0) -> Iterator[KazooClient]:
    kazoo = KazooClient(hosts=server.connect_string, timeout=session_timeout)
    kazoo.start(timeout=CONNECT_WAIT)
    try:
        yield kazoo
    finally:
        kazoo.stop()
        kazoo.close()


def test_a_kazoo_client_creates_and_reads_a_znode(zookeeper: LocalZooKeeper) -> None:
    assert zookeeper.connect_string == f"127.0.0.1:{zookeeper.port}"
    with client(zookeeper) as kazoo:
        kazoo.create("/millrace/default/leader", b"jobmanager-1", makepath=True)
        data, _ = kazoo.get("/millrace/default/leader")
    assert data == b"jobmanager-1"
    assert zookeeper.four_letter_word("ruok") == "imok"


@pytest.mark.parametrize("session_timeout", [1.0, 60.0])
def test_session_timeouts_of_1_to_60_s_are_granted(
    zookeeper: LocalZooKeeper, session_timeout: float
) -> None:
    with client(zookeeper, session_timeout) as kazoo:
        granted_ms = kazoo._session_timeout  # negotiated with the server at connect
    assert granted_ms == session_timeout * 1000


def test_restart_keeps_the_znodes_on_the_same_port(zookeeper: LocalZooKeeper) -> None:
    with client(zookeeper) as kazoo:
        kazoo.create("/survivor", b"kept", makepath=True)
    first_pid, port = zookeeper.pid, zookeeper.port
    zookeeper.restart()
    assert zookeeper.port == port and zookeeper.pid not in (None, first_pid)
    assert first_pid is not None and not running(first_pid)
    with client(zookeeper) as kazoo:
        assert kazoo.get("/survivor")[0] == b"kept"


def test_a_killed_server_restarts_with_its_znodes(zookeeper: LocalZooKeeper) -> None:
    with client(zookeeper) as kazoo:
        kazoo.create("/acknowledged", b"before the crash")
    pid = zookeeper.pid
    zookeeper.kill()
    assert pid is not None and not running(pid) and zookeeper.pid is None
    zookeeper.start()
    with client(zookeeper) as kazoo:
        assert kazoo.get("/acknowledged")[0] == b"before the crash"


def test_stop_leaves_no_process_and_is_idempotent(tmp_path: Path) -> None:
    with running_zookeeper(tmp_path / "zk") as server:
        pid = server.pid
        assert pid is not None and running(pid)
        assert server.pid_file.read_text().strip() == str(pid)
        server.stop()
        assert not running(pid)
        assert server.pid is None and not server.pid_file.exists()
        assert not server.is_serving()
        server.stop()


def test_another_process_finds_and_stops_the_server_by_its_pid_file(tmp_path: Path) -> None:
    with running_zookeeper(tmp_path / "zk") as server:
        found = LocalZooKeeper.running_in(server.data_dir)
        assert found is not None
        assert (found.pid, found.connect_string) == (server.pid, server.connect_string)
        found.stop()
        assert server.pid is None
        assert LocalZooKeeper.running_in(server.data_dir) is None


def test_a_pid_file_naming_another_process_is_not_trusted(tmp_path: Path) -> None:
    server = LocalZooKeeper(tmp_path / "zk", port=free_port())
    server.data_dir.mkdir(parents=True)
    server.pid_file.write_text(f"{os.getpid()}\n")  # the test process: no QuorumPeerMain
    assert server.pid is None
    assert LocalZooKeeper.running_in(server.data_dir) is None
    assert not server.pid_file.exists()
    server.stop()  # signals nothing


def test_missing_jars_name_the_directory_and_the_install_command(tmp_path: Path) -> None:
    server = LocalZooKeeper(tmp_path / "zk", port=free_port(), jar_dir=tmp_path / "no-jars")
    with pytest.raises(LocalServerError) as raised:
        server.start()
    message = str(raised.value)
    assert "no zookeeper.jar in" in message and str(tmp_path / "no-jars") in message
    assert "apt-get install zookeeper" in message
    assert server.pid is None


def test_missing_java_names_the_install_command(tmp_path: Path) -> None:
    server = LocalZooKeeper(tmp_path / "zk", port=free_port(), java="/nonexistent/bin/java")
    with pytest.raises(LocalServerError, match=r"java is missing.*openjdk-17-jre-headless"):
        server.start()


def test_a_taken_port_is_refused_before_the_jvm_starts(zookeeper: LocalZooKeeper) -> None:
    second = LocalZooKeeper(zookeeper.data_dir.parent / "second", port=zookeeper.port)
    with pytest.raises(LocalServerError, match="another process holds the port"):
        second.start()
    assert second.pid is None


def test_a_server_that_exits_at_start_fails_with_its_log(tmp_path: Path) -> None:
    jars = tmp_path / "broken-jars"
    jars.mkdir()
    (jars / "zookeeper.jar").write_bytes(b"not a jar")
    server = LocalZooKeeper(tmp_path / "zk", port=free_port(), jar_dir=jars)
    with pytest.raises(LocalServerError) as raised:
        server.start()
    assert "exited with code" in raised.value.reason
    assert "ClassNotFoundException" in raised.value.log_tail  # java's complaint, from the log
    assert server.pid is None and not server.pid_file.exists()
