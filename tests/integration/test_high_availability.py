"""High availability on a real ZooKeeper (issue 12): standby JobManagers take over a running job.

Each test runs a ZooKeeper server (Debian's package), JobManager processes that contend for the
leadership, TaskManager processes and a client that follows the leader through ZooKeeper, all on
loopback; the leader is killed with SIGKILL (or frozen with SIGSTOP) while the job runs. The
job's input is held at December until the failure happened, so the job cannot end before it,
and its output is compared row by row with pandas on the same files.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError

from millrace import Configuration, StreamExecutionEnvironment
from millrace.errors import CheckpointError, HighAvailabilityError, JobChangeError
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointStorage
from millrace.runtime.highavailability.leader_retrieval import retrieve_leader
from millrace.runtime.highavailability.zookeeper_client import (
    start_zookeeper_client,
    stop_zookeeper_client,
)
from millrace.runtime.highavailability.zookeeper_paths import REST_SERVER, ZooKeeperPaths
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.jobmaster.job_change import JobChangeRequest
from tests.integration.helpers import (
    ROOT,
    assert_same_result,
    build_flight_delays_held,
    expected_flight_delays,
    offsets_read,
    read_flights,
    read_output,
)
from tests.integration.kafka_flights import produce_flights
from tests.integration.standalone_cluster import (
    WAIT,
    ClusterProcess,
    StandaloneCluster,
    free_port,
)
from tests.integration.test_postgres_sink_recovery import committed_rows, read_table
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
        self.rest_ports: dict[int, str] = {}

    def start_jobmanager(self) -> ClusterProcess:
        ports = {"jobmanager.rpc.port": str(free_port()), "rest.port": str(free_port())}
        started = self.cluster._start("jobmanager", ["cluster", "start", "--foreground"], ports)
        self.rest_ports[started.pid] = ports["rest.port"]
        return started

    def leader(self, processes: list[ClusterProcess]) -> ClusterProcess:
        """Which of ``processes`` leads now (its REST port is the published one)."""
        port = self.leader_rest().rsplit(":", 1)[1]
        return next(p for p in processes if self.rest_ports[p.pid] == port)

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

    def checkpointed_offsets(self, job_id: str) -> int:
        """Records the latest checkpoint in ZooKeeper covers (its sources' offsets), 0 if none."""
        ids = sorted(self.completed_checkpoints(job_id))
        if not ids:
            return 0
        node = f"{self.paths.checkpoints(job_id)}/{ids[-1]}"  # type: ignore[arg-type]
        storage = CheckpointStorage(str(self.cluster.work / "unused"), "")
        try:
            data, _ = self.zookeeper.get(node)
            return offsets_read(storage, json.loads(data)["location"])
        except (NoNodeError, CheckpointError):  # subsumed and deleted meanwhile
            return 0

    def await_checkpoint(self, job_id: str) -> None:
        """Wait until a checkpoint of the job completed: its pointer is in ZooKeeper."""
        self.cluster.wait_until(
            lambda: len(self.completed_checkpoints(job_id)) >= 1,
            what="a checkpoint completed in ZooKeeper",
        )

    def await_clean_result(self, job_id: str) -> None:
        """Wait until the job's result is recorded clean in the JobResultStore."""
        store = self.cluster.work / "ha"
        self.cluster.wait_until(
            lambda: any(store.rglob(f"job-result-store/{job_id}.msgpack")),
            what="a clean job result entry",
        )

    def checkpoint_id_counter(self, job_id: str) -> int:
        """The next id of the job's checkpoint id counter in ZooKeeper (0: no counter)."""
        node = self.paths.checkpoint_id_counter(job_id)  # type: ignore[arg-type]
        try:
            data, _ = self.zookeeper.get(node)
        except NoNodeError:
            return 0
        return int(data.decode())

    def published_rest_port(self) -> str | None:
        """The REST port the leader published, None while none is."""
        try:
            return self.leader_rest(timeout=1).rsplit(":", 1)[1]
        except HighAvailabilityError:
            return None

    def stored_job_graph(self, job_id: str) -> tuple[bytes, bytes]:
        """The job's entry in the JobGraph store: its znode's data (the payload's path) and
        the payload."""
        data, _ = self.zookeeper.get(self.paths.job_graph(job_id))  # type: ignore[arg-type]
        return data, Path(data.decode()).read_bytes()

    def leave_uncleaned(self, job_id: str, stored_graph: tuple[bytes, bytes]) -> None:
        """Put back what a leader that died between recording the job's result and its
        clean-up leaves: the job graph stored, the result entry dirty (FLIP-194)."""
        data, payload = stored_graph
        Path(data.decode()).write_bytes(payload)
        self.zookeeper.create(self.paths.job_graph(job_id), data)  # type: ignore[arg-type]
        [clean] = (self.cluster.work / "ha").rglob(f"job-result-store/{job_id}.msgpack")
        clean.rename(clean.with_name(f"{job_id}_DIRTY.msgpack"))

    def result_entries(self, job_id: str) -> list[str]:
        """The job's files in the JobResultStore."""
        store = self.cluster.work / "ha"
        return sorted(p.name for p in store.rglob(f"job-result-store/{job_id}*"))

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


def sources_running(job: dict[str, Any]) -> bool:
    """The job RUNNING with every subtask of its source vertex RUNNING."""
    vertices = job.get("vertices") or [{"tasks": {}}]
    return job.get("state") == "RUNNING" and set(vertices[0]["tasks"]) == {"RUNNING"}


def start_job(spark, flights_dir: Path, ha_cluster: HaCluster, work: Path, taskmanagers: int = 2):
    """TaskManagers registered, and the held flight-delays job's graph: (graph, gate, out)."""
    cluster = ha_cluster.cluster
    for _ in range(taskmanagers):
        cluster.start_taskmanager(slots=2)
    cluster.wait_until(
        lambda: len(ha_cluster.rest("/taskmanagers")["taskmanagers"]) == taskmanagers,
        what=f"{taskmanagers} TaskManagers registered at the leader",
    )
    conf = Configuration({**cluster.settings, "parallelism.default": 2})
    env = StreamExecutionEnvironment(conf, spark)
    gate, out = work / "december", work / "out"
    build_flight_delays_held(env, flights_dir, out, gate)
    return env.get_job_graph("flight-delays-ha"), gate, out


def jobmanager_log(process: ClusterProcess, work: Path) -> str:
    """What the JobManager ``process`` logged (its INFO log file)."""
    logs = sorted((work / "tmp" / "log").glob(f"jobmanager-*-{process.pid}.log"))
    return "".join(log.read_text(errors="replace") for log in logs)


def committed(process: ClusterProcess, work: Path) -> int:
    """How many checkpoint commits the JobManager ``process`` logged (its INFO log file)."""
    return jobmanager_log(process, work).count(": committed checkpoint")


def test_sigkill_of_the_leading_jobmanager_mid_job_the_standby_recovers_it_exactly(
    spark, flights_dir, ha_cluster, tmp_path
) -> None:
    cluster = ha_cluster.cluster
    first = ha_cluster.start_jobmanager()
    leader_rest = ha_cluster.leader_rest()
    second = ha_cluster.start_jobmanager()
    graph, gate, out = start_job(spark, flights_dir, ha_cluster, tmp_path)
    with cluster.remote() as client:
        waiting = client.job_client.submit_job_wait(graph)
        ha_cluster.await_checkpoint(graph.job_id)
        # the standby's REST API redirects to the leader's
        standby = httpx.get(
            f"http://127.0.0.1:{ha_cluster.rest_ports[second.pid]}/jobs/{graph.job_id}",
            follow_redirects=True,
            timeout=10,
        )
        assert [r.status_code for r in standby.history] == [307]
        assert standby.json()["state"] == "RUNNING"
        # a live change is refused under HA: a new leader would recover the submitted graph
        with pytest.raises(JobChangeError, match="high-availability"):
            changing = client.dispatcher().change_job(graph.job_id, JobChangeRequest(parallelism=1))
            result_within(changing, 30, what="the change's refusal")
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
    assert_same_result(read_output(out), expected_flight_delays(read_flights(flights_dir)))
    # the finished job is recorded, and its HA data gone: no leader runs it again
    ha_cluster.await_clean_result(graph.job_id)
    assert not ha_cluster.zookeeper.exists(ha_cluster.paths.job_graph(graph.job_id))


def test_a_leader_frozen_past_its_session_timeout_wakes_as_a_standby_and_commits_nothing(
    spark, flights_dir, ha_cluster, tmp_path
) -> None:
    cluster = ha_cluster.cluster
    first = ha_cluster.start_jobmanager()
    leader_rest = ha_cluster.leader_rest()
    second = ha_cluster.start_jobmanager()
    graph, gate, out = start_job(spark, flights_dir, ha_cluster, tmp_path)
    with cluster.remote() as client:
        waiting = client.job_client.submit_job_wait(graph)
        ha_cluster.await_checkpoint(graph.job_id)
        os.kill(first.pid, signal.SIGSTOP)
        try:
            cluster.wait_until(
                lambda: ha_cluster.leader_rest(timeout=1) != leader_rest,
                what="the standby leading while the leader is frozen",
            )
            cluster.wait_until(
                lambda: running_everywhere(ha_cluster.job(graph.job_id)),
                what="the job running on the new leader",
            )
            commits_before_waking = committed(first, tmp_path)
        finally:
            os.kill(first.pid, signal.SIGCONT)
        cluster.wait_until(
            lambda: "revoked" in first.output(), what="the thawed leader giving up its leadership"
        )
        gate.touch()  # December may go on
        result = result_within(waiting, WAIT, what="the job's result from the new leader")

    assert isinstance(result, JobResultSuccess), result
    assert_same_result(read_output(out), expected_flight_delays(read_flights(flights_dir)))
    assert first.process.poll() is None, "the former leader stays, as a standby"
    assert second.process.poll() is None
    assert committed(first, tmp_path) == commits_before_waking, "the former leader committed"
    assert ha_cluster.leader_rest() != leader_rest


def test_three_jobmanagers_survive_two_leader_kills_and_a_finished_job_never_runs_again(
    spark, flights_dir, ha_cluster, tmp_path
) -> None:
    """Two leaders killed mid-job, the third finishes it exactly. Then the finished job is
    left as if its leader had died after recording its result and before the clean-up (a
    dirty entry in the JobResultStore, its job graph stored again): the next leader must not
    start a JobMaster for it (the JobResultStore says it ended), clean up what it left, and
    list it once, FINISHED, once its recovery is done."""
    cluster = ha_cluster.cluster
    jobmanagers = [ha_cluster.start_jobmanager()]
    ha_cluster.leader_rest()
    jobmanagers += [ha_cluster.start_jobmanager(), ha_cluster.start_jobmanager()]
    graph, gate, out = start_job(spark, flights_dir, ha_cluster, tmp_path)
    with cluster.remote() as client:
        waiting = client.job_client.submit_job_wait(graph)
        for kill in range(2):
            leader_rest = ha_cluster.leader_rest()
            checkpoints = ha_cluster.completed_checkpoints(graph.job_id)
            cluster.wait_until(
                lambda c=checkpoints: set(ha_cluster.completed_checkpoints(graph.job_id)) - set(c),
                what=f"a new checkpoint before kill {kill + 1}",
            )
            leader = ha_cluster.leader(jobmanagers)
            os.killpg(leader.pid, signal.SIGKILL)
            leader.process.wait(timeout=30)
            jobmanagers.remove(leader)
            old_port = leader_rest.rsplit(":", 1)[1]
            cluster.wait_until(  # (none published for a while: the old one's session expired)
                lambda p=old_port: ha_cluster.published_rest_port() not in (None, p),
                what=f"a new leader after kill {kill + 1}",
            )
            cluster.wait_until(
                lambda: running_everywhere(ha_cluster.job(graph.job_id)),
                what=f"the job running again after kill {kill + 1}",
            )
        stored_graph = ha_cluster.stored_job_graph(graph.job_id)  # (znode data, payload)
        # the JobMasters reserved their checkpoint ids in ZooKeeper's counter: it is past them
        completed = [int(c) for c in ha_cluster.completed_checkpoints(graph.job_id)]
        assert ha_cluster.checkpoint_id_counter(graph.job_id) > max(completed)
        gate.touch()
        result = result_within(waiting, WAIT, what="the job's result from the third leader")
    assert isinstance(result, JobResultSuccess), result
    expected = expected_flight_delays(read_flights(flights_dir))
    assert_same_result(read_output(out), expected)

    # A finished job is never run again: its graph stored again and its result dirty, as if
    # its leader had died before the clean-up; one more failover.
    ha_cluster.await_clean_result(graph.job_id)
    assert not ha_cluster.zookeeper.exists(ha_cluster.paths.job_graph(graph.job_id))
    written = sorted(p.name for p in out.rglob("*.parquet"))
    ha_cluster.leave_uncleaned(graph.job_id, stored_graph)
    fresh = ha_cluster.start_jobmanager()
    os.killpg(jobmanagers[0].pid, signal.SIGKILL)
    fresh_port = ha_cluster.rest_ports[fresh.pid]
    cluster.wait_until(
        lambda: ha_cluster.published_rest_port() == fresh_port, what="the fresh JobManager leading"
    )
    # /jobs is answered once the new leader's recovery is done (calls wait for it): past the
    # point where a JobMaster for the job would have started
    listed = ha_cluster.rest("/jobs")["jobs"]
    assert Counter((j["id"], j["status"]) for j in listed) == Counter(
        {(graph.job_id, "FINISHED"): 1}
    ), "the finished job was started again"
    log = jobmanager_log(fresh, tmp_path)
    assert f"not recovering job {graph.job_id}: it already reached a globally terminal" in log
    assert f"({graph.job_id}) from" not in log, "the new leader recovered the finished job"
    assert f"submitted job {graph.name} ({graph.job_id})" not in log
    # what the job left is cleaned up by the new leader: no graph, a clean result
    assert not ha_cluster.zookeeper.exists(ha_cluster.paths.job_graph(graph.job_id))
    assert ha_cluster.result_entries(graph.job_id) == [f"{graph.job_id}.msgpack"]
    assert sorted(p.name for p in out.rglob("*.parquet")) == written
    assert_same_result(read_output(out), expected)
    assert fresh.process.poll() is None


def test_a_zookeeper_restart_mid_job_loses_no_job_and_runs_none_twice(
    spark, flights_dir, ha_cluster, tmp_path, zookeeper
) -> None:
    cluster = ha_cluster.cluster
    ha_cluster.start_jobmanager()
    leader_rest = ha_cluster.leader_rest()
    ha_cluster.start_jobmanager()
    graph, gate, out = start_job(spark, flights_dir, ha_cluster, tmp_path)
    with cluster.remote() as client:
        waiting = client.job_client.submit_job_wait(graph)
        ha_cluster.await_checkpoint(graph.job_id)
        zookeeper.restart()

        def back_and_running() -> bool:
            try:
                checkpoints = ha_cluster.completed_checkpoints(graph.job_id)
            except (ConnectionLoss, SessionExpiredError):
                return False  # the test's own session, lost in the restart: kazoo makes another
            return len(checkpoints) >= 1 and ha_cluster.job(graph.job_id).get("state") == "RUNNING"

        cluster.wait_until(back_and_running, what="ZooKeeper back and the job running")
        gate.touch()
        result = result_within(waiting, WAIT, what="the job's result")
    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts == 0, "a suspended ZooKeeper connection restarted the job"
    assert ha_cluster.leader_rest() == leader_rest, "the leadership moved"
    assert_same_result(read_output(out), expected_flight_delays(read_flights(flights_dir)))


KAFKA_JOB = '''
"""Flight delays from a bounded Kafka topic into Parquet and PostgreSQL, December held at the
source until GATE exists: ``job.py ROOT BOOTSTRAP TOPIC GATE OUT CONNINFO STAGING``."""
import sys

sys.path.insert(0, sys.argv[1])  # the repository: the tests' helpers

from pyspark.sql import functions as F

from millrace import KafkaSource, ParquetSink, PostgresSink, StreamExecutionEnvironment, tumbling
from tests.integration.helpers import held_at_december, load_example
from tests.integration.kafka_flights import FLIGHTS_SCHEMA

bootstrap, topic, gate, out, conninfo, staging = sys.argv[2:8]
env = StreamExecutionEnvironment.get_execution_environment()
delays = (
    env.from_source(
        KafkaSource.json(bootstrap, topic, FLIGHTS_SCHEMA, bounded=True),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        name="flights",
    )
    .transform(held_at_december(gate), name="held at december")
    .transform(load_example("flight_delays").departed, name="departed")
    .key_by("carrier")
    .window(tumbling("1 day"))
    .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
)
delays.sink_to(ParquetSink(out))
delays.sink_to(PostgresSink(conninfo, "delays", staging=staging))
env.execute("flight-delays-ha-kafka")
'''


def test_sigkill_of_the_leader_mid_kafka_stream_the_attached_cli_gets_the_exact_result(
    flights_dir, kafka_broker, postgres_conninfo, ha_cluster, tmp_path, monkeypatch
) -> None:
    """The issue's failure test: ``millrace run`` attached to an HA cluster, a Kafka source,
    checkpoints every second, a ParquetSink and a PostgresSink, EXACTLY_ONCE; the leading
    JobManager is killed with SIGKILL once a checkpoint completed in ZooKeeper. The standby
    recovers the job from that checkpoint (the source rewinds to its offsets), the CLI follows
    the new leader through ZooKeeper (it was even given the killed leader's address) and
    reports the job finished, and both sinks hold pandas' rows exactly."""
    cluster = ha_cluster.cluster
    topic = f"flights-ha-{uuid.uuid4().hex[:8]}"
    messages = produce_flights(kafka_broker.bootstrap_servers, topic, flights_dir, partitions=4)
    first = ha_cluster.start_jobmanager()
    leader_rest = ha_cluster.leader_rest()
    second = ha_cluster.start_jobmanager()
    for _ in range(2):
        cluster.start_taskmanager(slots=2)
    cluster.wait_until(
        lambda: len(ha_cluster.rest("/taskmanagers")["taskmanagers"]) == 2,
        what="2 TaskManagers registered at the leader",
    )
    script, gate, out = tmp_path / "job.py", tmp_path / "december", tmp_path / "out"
    script.write_text(KAFKA_JOB)
    monkeypatch.setenv("COLUMNS", "160")  # the summary's lines unwrapped
    args = [ROOT, kafka_broker.bootstrap_servers, topic, gate, out, postgres_conninfo]
    run = cluster._start(
        "client",
        [
            "run",
            str(script),
            *map(str, [*args, tmp_path / "staging"]),
        ],  # no --jobmanager: the client finds the leader, and follows it, in ZooKeeper
        {"parallelism.default": "2"},
    )

    def submitted() -> list[str]:
        assert run.process.poll() is None, f"millrace run exited:\n{run.output()[-3000:]}"
        try:
            return [job["id"] for job in ha_cluster.rest("/jobs")["jobs"]]
        except httpx.HTTPError:
            return []

    cluster.wait_until(lambda: len(submitted()) == 1, what="the job submitted by millrace run")
    [job_id] = submitted()
    # A checkpoint taken before the sources read anything would restore them at offset 0
    cluster.wait_until(
        lambda: submitted() and ha_cluster.checkpointed_offsets(job_id) > 0,
        what="a checkpoint in ZooKeeper that covers records read",
    )
    # Whether the killed leader committed rows to PostgreSQL already depends on timing: once a
    # source reads December it holds, and no later checkpoint completes before the kill.
    committed_before = committed_rows(postgres_conninfo)
    killed_at = time.monotonic()
    os.killpg(first.pid, signal.SIGKILL)
    first.process.wait(timeout=30)
    cluster.wait_until(
        lambda: ha_cluster.leader_rest(timeout=1) != leader_rest, what="the standby leading"
    )
    elected = time.monotonic() - killed_at
    # Only the sources: the windows are deployed on their first output, which may be December's
    cluster.wait_until(
        lambda: sources_running(ha_cluster.job(job_id)),
        what="the job's sources reading again on the new leader",
    )
    failover = time.monotonic() - killed_at
    print(
        f"kill -9 of the leader mid Kafka stream: standby elected {elected:.1f} s, "
        f"sources reading {failover:.1f} s; {committed_before} rows committed to PostgreSQL before"
    )
    assert ha_cluster.job(job_id)["state"] == "RUNNING", "the job ended before the kill"
    gate.touch()  # December may go on
    cluster.wait_until(lambda: run.process.poll() is not None, what="millrace run exiting")
    code, output = run.process.returncode, run.output()

    assert code == 0, output[-5000:]
    assert second.process.poll() is None, second.output()[-3000:]
    expected = expected_flight_delays(read_flights(flights_dir))
    assert "flight-delays-ha-kafka FINISHED" in output, output[-5000:]
    assert f"job {job_id}" in output
    # The summary counts the recovered execution only (as Flink's accumulators, which
    # checkpoints do not keep): its source started at the checkpoint's offsets, not at 0.
    records_in = int(re.search(r"records in ([\d,]+)", output)[1].replace(",", ""))
    assert 0 < records_in < len(messages), output[-5000:]
    assert len(re.findall(r"rows written: [\d,]+ -> (parquet|postgresql)", output)) == 2
    in_postgres = read_table(postgres_conninfo, expected)
    assert not in_postgres.duplicated(["carrier", "window_start"]).any()
    assert_same_result(in_postgres, expected)
    assert_same_result(read_output(out), expected)
    with psycopg.connect(postgres_conninfo) as conn:
        rows = conn.execute(
            "SELECT sum(rows) FROM millrace_sink_commits WHERE job_id = %s", (job_id,)
        ).fetchone()[0]
    assert rows == len(expected), "a commit inserted its rows twice, or one is missing"
    assert committed_before < len(expected)
