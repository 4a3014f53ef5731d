"""The data plane on a Spark standalone cluster (issue 15): a Millrace standalone cluster of
real processes (a JobManager, two TaskManagers) whose TaskManagers run their SparkSessions on a
Spark standalone master with two workers (``spark.master=spark://...``), started from the jars
pyspark ships (``SparkStandaloneCluster``). The output equals pandas row for row, failure-free
and with a Spark worker killed mid-job (Spark runs the lost tasks again on new executors)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.runtime.job_result import JobResultSuccess
from millrace.spark.standalone_cluster import SparkStandaloneCluster
from tests.integration.helpers import (
    assert_same_result,
    expected_flight_delays,
    load_example,
    read_flights,
    read_output,
)
from tests.integration.standalone_cluster import WAIT, StandaloneCluster
from tests.spark_standalone import running_spark_standalone
from tests.waiting import result_within

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(scope="module")
def spark_standalone(tmp_path_factory) -> Iterator[SparkStandaloneCluster]:
    """A Spark master and two workers (2 cores, 1 GiB each) on loopback, shared by this
    module's tests (the worker-kill test comes last)."""
    with running_spark_standalone(tmp_path_factory.mktemp("spark-cluster")) as started:
        yield started


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory, spark_standalone: SparkStandaloneCluster
) -> Iterator[StandaloneCluster]:
    """JobManager and two TaskManagers whose SparkSessions are applications of
    ``spark_standalone``, one core each."""
    on_spark = StandaloneCluster(
        tmp_path_factory.mktemp("millrace-cluster"),
        {
            "spark.master": spark_standalone.master_url,
            "spark.cores.max": "1",  # each TaskManager's application: one core of the workers
            "spark.executor.memory": "512m",
            "heartbeat.interval": "200 ms",
            "heartbeat.pause": "10 s",
            "rpc.ask-timeout": "30 s",
            "execution.bundle.max-records": "30000",  # a month per Spark job: a longer job
        },
    )
    with on_spark.running() as started:
        yield started


def submit_flight_delays(spark, cluster: StandaloneCluster, flights_dir, out):
    conf = Configuration({**cluster.settings, "parallelism.default": 2})
    env = StreamExecutionEnvironment(conf, spark)
    load_example("flight_delays").build(env, str(flights_dir), str(out))
    return env.get_job_graph("flight-delays")


def millrace_applications(spark_standalone: SparkStandaloneCluster) -> list[dict]:
    return [
        app
        for app in spark_standalone.state().get("activeapps", [])
        if app.get("name") == "millrace-taskmanager"
    ]


def test_flight_delays_on_a_spark_standalone_cluster_equal_pandas(
    spark, flights_dir, tmp_path, cluster, spark_standalone
) -> None:
    graph = submit_flight_delays(spark, cluster, flights_dir, tmp_path / "out")
    with cluster.remote() as client:
        result = result_within(client.job_client.submit_job_wait(graph), WAIT, what="the job")
    assert isinstance(result, JobResultSuccess), result

    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
    applications = millrace_applications(spark_standalone)
    assert len(applications) == 2, "each TaskManager's SparkSession is a Spark application"
    assert all(app["cores"] == 1 for app in applications), applications
    assert sum(spark_standalone.executors(i) for i in range(2)) == 2, "one executor each"


def test_a_spark_worker_killed_mid_job_loses_no_row(
    spark, flights_dir, tmp_path, cluster, spark_standalone
) -> None:
    graph = submit_flight_delays(spark, cluster, flights_dir, tmp_path / "out")
    with cluster.remote() as client:
        waiting = client.job_client.submit_job_wait(graph)
        cluster.wait_until(
            lambda: cluster.job(graph.job_id).get("splits-assigned", 0) >= 3,
            what="three months read",
        )
        [victim] = [i for i in range(2) if spark_standalone.executors(i)][:1]
        spark_standalone.kill_worker(victim)  # the worker and its executors: kill -9
        assert not waiting.done(), "the job ended before the kill"
        result = result_within(waiting, WAIT, what="the job's result after the kill")
    assert isinstance(result, JobResultSuccess), result
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
    # Spark replaced the lost executors on the surviving worker
    survivor = 1 - victim
    assert spark_standalone.executors(survivor) == 2
    assert spark_standalone.pid(f"worker-{survivor}") is not None
