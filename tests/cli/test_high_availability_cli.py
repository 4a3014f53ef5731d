"""The CLI with high availability: a standby needs the HA settings, ZooKeeper missing fails at
start with the quorum named, and several JobManagers of one machine are all recorded."""

from __future__ import annotations

from millrace.config import Configuration
from millrace.runtime.entrypoint.cluster_files import ClusterFiles, ProcessInfo
from tests.integration.helpers import run_cli
from tests.integration.standalone_cluster import free_port


def test_a_standby_jobmanager_without_high_availability_exits_2(tmp_path) -> None:
    result = run_cli(["jobmanager", "start"], cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert "high-availability.type=zookeeper" in result.stdout.replace("\n", "")


def test_a_jobmanager_whose_zookeeper_does_not_answer_exits_1_naming_the_quorum(tmp_path) -> None:
    quorum = f"127.0.0.1:{free_port()}"
    settings = {
        "high-availability.type": "zookeeper",
        "high-availability.zookeeper.quorum": quorum,
        "high-availability.storageDir": str(tmp_path / "ha"),
        "high-availability.zookeeper.client.connection-timeout": "1 s",
    }
    args = ["jobmanager", "start", "--foreground"]
    for key, value in settings.items():
        args += ["-D", f"{key}={value}"]
    result = run_cli(args, cwd=tmp_path, timeout=60)
    assert result.returncode == 1
    assert quorum in result.stdout.replace("\n", "")


def test_every_jobmanager_of_a_machine_is_recorded(tmp_path) -> None:
    files = ClusterFiles(Configuration({"io.tmp.dirs": str(tmp_path)}))
    leader, standby = (ProcessInfo("jobmanager", pid, f"127.0.0.1:{pid}") for pid in (1, 2))
    files.register(leader)
    files.register(standby)
    assert sorted(p.name for p in files.directory.glob("*.json")) == [
        "jobmanager-1.json",
        "jobmanager-2.json",
    ]
