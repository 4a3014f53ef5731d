"""High availability on a real ZooKeeper (issue 12): standby JobManagers take over a running job.

Each test runs a ZooKeeper server (Debian's package), JobManager processes that contend for the
leadership, TaskManager processes and a client that follows the leader through ZooKeeper, all on
loopback; the leader is killed with SIGKILL (or frozen with SIGSTOP) while the job runs. The
job's input is held at December until the failure happened, so the job cannot end before it,
and its output is compared row by row with pandas on the same files.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.runtime.highavailability.leader_retrieval import retrieve_leader
from millrace.runtime.highavailability.zookeeper_client import (
    start_zookeeper_client,
    stop_zookeeper_client,
)
from millrace.runtime.highavailability.zookeeper_paths import REST_SERVER, ZooKeeperPaths
from millrace.runtime.job_result import JobResultSuccess
from tests.integration.helpers import (
    assert_same_result,
    build_flight_delays_held,
    expected_flight_delays,
    read_flights,
    read_output,
)
from tests.integration.standalone_cluster import (
    WAIT,
    ClusterProcess,
    StandaloneCluster,
    free_port,
)
from tests.waiting import result_within

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SETTINGS = {
    "heartbeat.interval": "0.2 s",
    "heartbeat.pause": "2 s",
    "rpc.ask-timeout": "10 s",
    "rpc.lookup-timeout": "3 s",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "3",
    "restart-strategy.fixed-delay.delay": "200 ms",
    "execution.bundle.max-records": "30000",
    "execution.checkpointing.interval": "1 s",
    "high-availability.type": "zookeeper",
}


class HaCluster:
    """A StandaloneCluster whose JobManagers contend on ZooKeeper, each on its own ports."""

    def __init__(self, work: Path, quorum: str) -> None:
        self.cluster = StandaloneCluster(
            work,
            {
                **SETTINGS,
                "high-availability.zookeeper.quorum": quorum,
                "high-availability.storageDir": str(work / "ha"),
                "high-availability.cluster-id": f"/test-{os.getpid()}-{time.monotonic_ns()}",
                "state.checkpoints.dir": str(work / "checkpoints"),
            },
        )
        self.configuration = Configuration(self.cluster.settings)
        self.paths = ZooKeeperPaths.from_configuration(self.configuration)
        self.zookeeper = start_zookeeper_client(self.configuration)

    def start_jobmanager(self) -> ClusterProcess:
        ports = {"jobmanager.rpc.port": str(free_port()), "rest.port": str(free_port())}
        return self.cluster._start("jobmanager", ["cluster", "start", "--foreground"], ports)

    def leader_rest(self, timeout: float = WAIT) -> str:
        """The REST URL the current leader published."""
        return retrieve_leader(self.zookeeper, self.paths, REST_SERVER, timeout).address

    def rest(self, path: str) -> Any:
        response = httpx.get(f"{self.leader_rest()}{path}", timeout=10)
        response.raise_for_status()
        return response.json()

    def job(self, job_id: str) -> dict[str, Any]:
        """The job on the current leader, or {} while it does not know it (yet)."""
        try:
            return self.rest(f"/jobs/{job_id}")  # type: ignore[no-any-return]
        except httpx.HTTPError:
            return {}

    def completed_checkpoints(self, job_id: str) -> list[str]:
        node = self.paths.checkpoints(job_id)  # type: ignore[arg-type]
        return self.zookeeper.get_children(node) if self.zookeeper.exists(node) else []

    def close(self) -> None:
        stop_zookeeper_client(self.zookeeper)
        self.cluster.close()


@pytest.fixture
def ha_cluster(tmp_path, zookeeper) -> Iterator[HaCluster]:
    started = HaCluster(tmp_path, zookeeper.connect_string)
    try:
        yield started
    finally:
        started.close()


def running_everywhere(job: dict[str, Any]) -> bool:
    """The job RUNNING with every subtask RUNNING (its sources read again)."""
    return job.get("state") == "RUNNING" and all(
        set(v["tasks"]) == {"RUNNING"} for v in job.get("vertices", [])
    )


def test_sigkill_of_the_leading_jobmanager_mid_job_the_standby_recovers_it_exactly(
    spark, flights_dir, ha_cluster, tmp_path
) -> None:
    cluster = ha_cluster.cluster
    first = ha_cluster.start_jobmanager()
    leader_rest = ha_cluster.leader_rest()
    second = ha_cluster.start_jobmanager()
    for _ in range(2):
        cluster.start_taskmanager(slots=2)
    cluster.wait_until(lambda: len(ha_cluster.rest("/taskmanagers")["taskmanagers"]) == 2)
    conf = Configuration({**cluster.settings, "parallelism.default": 2})
    env = StreamExecutionEnvironment(conf, spark)
    gate = tmp_path / "december"
    build_flight_delays_held(env, flights_dir, tmp_path / "out", gate)
    graph = env.get_job_graph("flight-delays-ha")
    with cluster.remote() as client:
        waiting = client.job_client.submit_job_wait(graph)
        cluster.wait_until(
            lambda: len(ha_cluster.completed_checkpoints(graph.job_id)) >= 1,
            what="a checkpoint completed in ZooKeeper",
        )
        killed_at = time.monotonic()
        os.killpg(first.pid, signal.SIGKILL)
        first.process.wait(timeout=30)
        cluster.wait_until(
            lambda: ha_cluster.leader_rest(timeout=1) != leader_rest,
            what="the standby leading",
        )
        elected = time.monotonic() - killed_at
        cluster.wait_until(
            lambda: running_everywhere(ha_cluster.job(graph.job_id)),
            what="the job running again on the new leader",
        )
        failover = time.monotonic() - killed_at
        print(
            f"kill -9 of the leader: standby elected {elected:.1f} s, job running {failover:.1f} s"
        )
        gate.touch()  # December may go on
        result = result_within(waiting, WAIT, what="the job's result from the new leader")

    assert second.process.poll() is None, second.output()[-3000:]
    assert isinstance(result, JobResultSuccess), result
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
    # the finished job is recorded, and its HA data gone: no leader runs it again
    cluster.wait_until(
        lambda: (
            (tmp_path / "ha").rglob(f"{graph.job_id}.msgpack") is not None
            and any((tmp_path / "ha").rglob(f"job-result-store/{graph.job_id}.msgpack"))
        ),
        what="a clean job result entry",
    )
    assert not ha_cluster.zookeeper.exists(ha_cluster.paths.job_graph(graph.job_id))
