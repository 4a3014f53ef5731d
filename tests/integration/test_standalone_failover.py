"""Failures of real processes on loopback: a TaskManager killed with SIGKILL, a TaskManager
frozen with SIGSTOP and thawed, the JobManager killed and started again on its address.

Every test builds its cluster of separate processes (1 JobManager, TaskManagers with their own
SparkSessions), submits from this process over authenticated TCP, and SIGKILLs every process
group it started in teardown. Output is compared row by row with pandas on the same files.
That no task of a dead JobManager's job writes on is checked once the TaskManagers' own
metrics show none of its tasks alive (a task leaves them at its final state), not after a
pause.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from millrace import Configuration, FileSource, ParquetSink, StreamExecutionEnvironment
from millrace.runtime.entrypoint.cluster_files import ClusterFiles
from millrace.runtime.job_result import JobResultSuccess
from tests.integration.helpers import (
    assert_same_result,
    expected_flight_delays,
    load_example,
    read_flights,
    read_output,
)
from tests.integration.standalone_cluster import WAIT, StandaloneCluster
from tests.waiting import result_within

pytestmark = [pytest.mark.slow, pytest.mark.spark]

INTERVAL, PAUSE = 0.2, 2.0  # heartbeat.interval and heartbeat.pause of these clusters (s)
SETTINGS = {
    "heartbeat.interval": f"{INTERVAL} s",
    "heartbeat.pause": f"{PAUSE} s",
    "rpc.ask-timeout": "10 s",
    "rpc.lookup-timeout": "3 s",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "3",
    "restart-strategy.fixed-delay.delay": "200 ms",
    "execution.bundle.max-records": "30000",  # one month per Spark job: a longer job
}


@pytest.fixture
def cluster(tmp_path) -> Iterator[StandaloneCluster]:
    started = StandaloneCluster(tmp_path, dict(SETTINGS))
    try:
        yield started
    finally:
        started.close()


def flight_delays_graph(spark, cluster: StandaloneCluster, flights_dir, out, parallelism=2):
    conf = Configuration({**cluster.settings, "parallelism.default": parallelism})
    env = StreamExecutionEnvironment(conf, spark)
    load_example("flight_delays").build(env, str(flights_dir), str(out))
    return env.get_job_graph("flight-delays")


def busy_taskmanager(cluster: StandaloneCluster) -> str:
    return next(i["id"] for i in cluster.taskmanagers() if i["freeSlots"] < i["slotsNumber"])


def test_sigkill_of_a_task_manager_mid_job_restarts_and_output_is_exact(
    spark, flights_dir, cluster, tmp_path
) -> None:
    cluster.start_jobmanager()
    for _ in range(3):
        cluster.start_taskmanager(slots=2)
    cluster.wait_for_taskmanagers(3)
    graph = flight_delays_graph(spark, cluster, flights_dir, tmp_path / "out")
    with cluster.remote() as client:
        waiting = client.job_client.submit_job_wait(graph)
        cluster.wait_until(
            lambda: cluster.job(graph.job_id).get("splits-assigned", 0) >= 3,
            what="three months read",
        )
        victim = busy_taskmanager(cluster)
        killed_at = time.monotonic()
        os.kill(cluster.pid_of(victim), signal.SIGKILL)
        restarted = cluster.wait_until(
            lambda: cluster.job(graph.job_id).get("restarts", 0) >= 1, what="a restart"
        )
        result = result_within(waiting, WAIT, what="the job's result after SIGKILL")
        print(
            f"SIGKILL {victim}: restart decided {restarted:.2f} s later, job done "
            f"{time.monotonic() - killed_at:.1f} s later"
        )

    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )


def tiny_job(spark, cluster: StandaloneCluster, work, parallelism: int):
    """A job whose every subtask needs a slot: text lines straight into Parquet."""
    lines = work / "lines"
    lines.mkdir(exist_ok=True)
    for i in range(parallelism):
        (lines / f"part-{i}.txt").write_text("\n".join(f"line {i}-{n}" for n in range(10)))
    conf = Configuration({**cluster.settings, "parallelism.default": parallelism})
    env = StreamExecutionEnvironment(conf, spark)
    env.from_source(FileSource.text(str(lines))).sink_to(ParquetSink(str(work / "lines-out")))
    return env.get_job_graph("lines")


def test_sigstop_declares_a_task_manager_dead_moves_its_tasks_and_sigcont_brings_it_back(
    spark, flights_dir, cluster, tmp_path
) -> None:
    cluster.start_jobmanager()
    for _ in range(3):
        cluster.start_taskmanager(slots=2)
    cluster.wait_for_taskmanagers(3)
    graph = flight_delays_graph(spark, cluster, flights_dir, tmp_path / "out")
    with cluster.remote() as client:
        waiting = client.job_client.submit_job_wait(graph)
        cluster.wait_until(
            lambda: cluster.job(graph.job_id).get("splits-assigned", 0) >= 2,
            what="two months read",
        )
        victim = busy_taskmanager(cluster)
        pid = cluster.pid_of(victim)
        os.kill(pid, signal.SIGSTOP)
        try:
            dead_after = cluster.wait_until(
                lambda: victim not in {i["id"] for i in cluster.taskmanagers()},
                what="the stopped TaskManager declared dead",
            )
            result = result_within(waiting, WAIT, what="the job's result after SIGSTOP")
        finally:
            os.kill(pid, signal.SIGCONT)
        back_after = cluster.wait_until(
            lambda: victim in {i["id"] for i in cluster.taskmanagers()},
            what="the thawed TaskManager registered again",
        )
        # every slot of the cluster free again: the thawed one let go of its old job
        cluster.wait_until(
            lambda: cluster.rest("/overview")["slots-available"] == 6, what="all 6 slots free"
        )
        lines = tiny_job(spark, cluster, tmp_path, parallelism=6)  # needs the thawed one
        second = result_within(
            client.job_client.submit_job_wait(lines), WAIT, what="the job needing every slot"
        )
    print(
        f"SIGSTOP {victim}: declared dead after {dead_after:.2f} s (pause {PAUSE} s + interval "
        f"{INTERVAL} s); SIGCONT: registered again after {back_after:.2f} s"
    )

    # detection follows the heartbeat timeout (BRIEF: running again within it + 5 s), not the
    # ask timeout (10 s) nor the lookup timeout
    assert dead_after < PAUSE + 5.0
    assert isinstance(result, JobResultSuccess) and result.details.restarts >= 1
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
    assert isinstance(second, JobResultSuccess), second
    assert second.accumulators[second.details.vertices[0].name].records_out == 60


def live_tasks(cluster: StandaloneCluster, job_id: str) -> set[str]:
    """The attempts of ``job_id``'s tasks alive on the TaskManagers, as their Prometheus
    reporters list them: a task is listed from its deployment until its TaskExecutor processed
    its final state, which the task thread reports as its last act (its Spark work done)."""
    alive = set()
    for info in ClusterFiles(cluster.configuration).processes():
        if info.kind != "taskmanager":
            continue
        assert info.metrics_url, f"TaskManager {info.pid} has no Prometheus reporter"
        page = httpx.get(info.metrics_url, timeout=10).text
        alive |= {
            sample.labels["task_attempt_id"]
            for family in text_string_to_metric_families(page)
            for sample in family.samples
            if sample.labels.get("job_id") == job_id
        }
    return alive


def test_task_managers_outlive_a_killed_job_manager_and_join_its_successor(
    spark, flights_dir, cluster, tmp_path
) -> None:
    jobmanager = cluster.start_jobmanager()
    for _ in range(2):
        cluster.start_taskmanager(slots=2)
    cluster.wait_for_taskmanagers(2)
    graph = flight_delays_graph(spark, cluster, flights_dir, tmp_path / "out")
    pending = tmp_path / "out" / ".pending" / graph.job_id
    with cluster.remote() as client:
        client.job_client.submit_job_detached(graph).result(timeout=60)
        cluster.wait_until(
            lambda: cluster.job(graph.job_id).get("splits-assigned", 0) >= 2,
            what="the job running",
        )
    cluster.wait_until(  # so that the check below, none left, is no vacuous one
        lambda: live_tasks(cluster, graph.job_id),
        what="the job's tasks in the TaskManagers' metrics",
    )
    os.kill(jobmanager.pid, signal.SIGKILL)
    jobmanager.process.wait(timeout=30)
    cluster.wait_until(  # the TaskManagers notice, fail their tasks, keep trying
        lambda: all(
            "lost the JobMaster of job" in p.output() or graph.job_id not in p.output()
            for p in cluster.processes
            if p.kind == "taskmanager"
        ),
        what="the TaskManagers noticing that their JobMaster is gone",
    )
    written = sorted(pending.glob("*")) if pending.exists() else []

    cluster.start_jobmanager()  # a new JobManager on the same address, same secret
    cluster.wait_for_taskmanagers(2)
    cluster.wait_until(
        lambda: cluster.rest("/overview")["slots-available"] == 4,
        what="the TaskManagers clean: all slots free",
    )
    # Every task of the dead JobManager's job has ended (no zombie runs on): only now can the
    # listing below tell that none wrote after its TaskManager noticed.
    cluster.wait_until(
        lambda: not live_tasks(cluster, graph.job_id),
        what="every task of the dead JobManager's job ended on its TaskManager",
    )
    assert (sorted(pending.glob("*")) if pending.exists() else []) == written, (
        "a task of the dead JobManager's job kept writing"
    )
    with cluster.remote() as client:
        lines = tiny_job(spark, cluster, tmp_path, parallelism=4)
        result = result_within(client.job_client.submit_job_wait(lines), WAIT, what="a new job")
    assert isinstance(result, JobResultSuccess), result
    for proc in cluster.processes:
        if proc.kind == "taskmanager":
            assert proc.process.poll() is None, "a TaskManager died with its JobManager"
            assert "lost the JobMaster of job" in proc.output() or graph.job_id not in (
                proc.output()
            )
