"""Live DAG changes of a running Kafka job (issue 13): ``modify`` replaces a transform's function
at a savepoint, ``rescale`` changes the parallelism; the output stays exact and window state
carries over the switch. The downtime of each change is printed (``-s`` shows it)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from millrace import Configuration, KafkaSource, ParquetSink, StreamExecutionEnvironment, tumbling
from millrace.cli.transform_file import load_transform
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.jobmaster.job_change import JobChangeRequest, JobChangeResult
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.integration.helpers import expected_flight_delays, read_flights
from tests.integration.kafka_flights import (
    FLIGHTS_SCHEMA,
    create_topic,
    flight_messages,
    index_before,
    produce_range,
)
from tests.integration.streams import assert_exactly, committed, wait_for_rows
from tests.waiting import result_within, wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]

PARTITIONS = 4
CHANGE_WAIT = 180.0  # seconds a change (savepoint, restart) may take

TAG_V2 = """
from pyspark.sql import functions as F


def tag(df):
    return df.withColumn("version", F.lit(2))
"""


def tag_v1(df: Any) -> Any:
    from pyspark.sql import functions as F

    return df.withColumn("version", F.lit(1))


def month_ms(month: int) -> int:
    return pd.Timestamp(f"2013-{month:02d}-01", tz="UTC").value // 10**6


class FlightsTopic:
    """The flights produced into a fresh topic month by month; the expected windows."""

    def __init__(self, bootstrap: str, flights_dir: Path) -> None:
        self.bootstrap, self.topic = bootstrap, f"live-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, self.topic, PARTITIONS)
        self.messages = flight_messages(flights_dir)
        self.flights = read_flights(flights_dir)
        self.expected = expected_flight_delays(self.flights)
        self.produced = 0

    def arrive_until(self, month: int) -> None:
        stop = index_before(self.messages, month_ms(month))
        produce_range(self.bootstrap, self.topic, self.messages, self.produced, stop, PARTITIONS)
        self.produced = stop

    def fired_before(self, month: int) -> pd.DataFrame:
        """Windows fired once the flights before ``month`` arrived (end 1 h before the last)."""
        before = self.flights[
            self.flights["time_hour"] < pd.Timestamp(month_ms(month), unit="ms", tz="UTC")
        ]
        last = before["time_hour"].max()
        return self.expected[self.expected["window_end"] <= last - pd.Timedelta(hours=1)]


def start_job(
    spark: Any, topic: FlightsTopic, tmp_path: Path, name: str, parallelism: int = 2
) -> tuple[Configuration, Any, Path]:
    """The flight-delays job over ``topic``; at parallelism 1 the window is chained into the
    source (one vertex)."""
    out = tmp_path / "out"
    conf = Configuration(
        {
            "parallelism.default": parallelism,
            "minicluster.number-of-taskmanagers": 2,
            "taskmanager.numberOfTaskSlots": 2,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "state.savepoints.dir": str(tmp_path / "savepoints"),
            "execution.checkpointing.interval": "500 ms",
            "execution.bundle.max-records": 20_000,
        }
    )
    from pyspark.sql import functions as F

    env = StreamExecutionEnvironment(conf, spark)
    flights = env.from_source(
        KafkaSource.json(topic.bootstrap, topic.topic, FLIGHTS_SCHEMA),
        event_time="time_hour",
        max_out_of_orderness="1 h",
    )
    (
        flights.transform(tag_v1, name="tag")
        .transform(lambda df: df.where(F.col("dep_delay").isNotNull()), name="departed")
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(
            F.count("*").alias("flights"),
            F.avg("dep_delay").alias("avg_dep_delay"),
            F.sum("version").alias("versions"),
        )
        .sink_to(ParquetSink(str(out)))
    )
    return conf, env.get_job_graph(name), out


def change(
    dispatcher: DispatcherGateway, job_id: str, request: JobChangeRequest
) -> JobChangeResult:
    result: JobChangeResult = dispatcher.change_job(job_id, request, timeout=CHANGE_WAIT).result(
        CHANGE_WAIT
    )
    print(f"\n{result.change}: {result.downtime()}")
    details = dispatcher.request_job_details(job_id).result(30)
    assert details.status is JobStatus.RUNNING
    return result


def test_modify_replaces_a_transform_at_a_barrier_and_keeps_window_state(
    spark, kafka_broker, flights_dir, tmp_path
) -> None:
    topic = FlightsTopic(kafka_broker.bootstrap_servers, flights_dir)
    conf, graph, out = start_job(spark, topic, tmp_path, "live-modify", parallelism=1)
    assert len(graph.vertices) == 1  # the transform is replaced in the chained vertex
    function_file = tmp_path / "tag_v2.py"
    function_file.write_text(TAG_V2)
    name, payload = load_transform(f"tag={function_file}:tag")
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        topic.arrive_until(3)  # January and February, through the old function
        wait_for_rows(out, len(topic.fired_before(3)))
        before = committed(out)
        change(dispatcher, graph.job_id, JobChangeRequest(transform=name, payload=payload))
        topic.arrive_until(4)  # March, through the new one
        wait_for_rows(out, len(topic.fired_before(4)))
        dispatcher.cancel_job(graph.job_id).result(30)

    output = committed(out)
    assert_exactly(output, topic.fired_before(4))  # every record once; windows across it full
    assert (before["versions"] == before["flights"]).all()  # fired before: all version 1
    march = output[output["window_start"] >= pd.Timestamp("2013-03-01", tz="UTC")]
    assert len(march) > 0 and (march["versions"] == 2 * march["flights"]).all()
    assert (
        (output["versions"] >= output["flights"]) & (output["versions"] <= 2 * output["flights"])
    ).all()


@pytest.mark.parametrize(
    ("start", "steps"), [(2, (1, 3)), (1, (2,))], ids=["two-one-three", "chained-one-to-two"]
)
def test_rescale_keeps_the_output_exact(
    spark, kafka_broker, flights_dir, tmp_path, start, steps
) -> None:
    """2 -> 1 -> 3, and 1 -> 2: at parallelism 1 the window is chained into the source (one
    vertex), and the rescale splits it into the source and the window, their state restored
    from the chain's savepoint. The next month arrives during each change."""
    topic = FlightsTopic(kafka_broker.bootstrap_servers, flights_dir)
    conf, graph, out = start_job(spark, topic, tmp_path, "live-rescale", parallelism=start)
    assert len(graph.vertices) == (1 if start == 1 else 2)
    month = 2
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        topic.arrive_until(month)
        wait_for_rows(out, len(topic.fired_before(month)))
        with ThreadPoolExecutor(1) as producer:
            for parallelism in steps:
                month += 1
                producing = producer.submit(topic.arrive_until, month)
                change(dispatcher, graph.job_id, JobChangeRequest(parallelism=parallelism))
                result_within(producing, CHANGE_WAIT, what=f"month {month - 1} produced")
                wait_for_rows(out, len(topic.fired_before(month)))
        info = dispatcher.request_execution_graph_info(graph.job_id).result(30)
        dispatcher.cancel_job(graph.job_id).result(30)

    assert_exactly(committed(out), topic.fired_before(month))
    assert [v.parallelism for v in info.vertices] == [steps[-1]] * 2
    unchained = [u.vertex_id for v in graph.vertices for u in v.unchained()[0]]
    assert [v.vertex_id for v in info.vertices] == unchained


def test_a_job_on_an_empty_topic_runs_every_task_and_rescales(
    spark, kafka_broker, flights_dir, tmp_path
) -> None:
    """No message yet: the windows still deploy once the sources run (a source's first event
    is its starting watermark), so a live change's savepoint completes on an idle stream, and
    the records that come later are counted exactly. (Deployed on the first records instead,
    a Kafka job restored with no new input took no savepoint and fired no restored window:
    CI's rescale test.)"""
    topic = FlightsTopic(kafka_broker.bootstrap_servers, flights_dir)
    conf, graph, out = start_job(spark, topic, tmp_path, "live-idle")
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        wait_value(
            lambda: dispatcher.request_job_details(graph.job_id).result(30),
            lambda d: all(v.states == {"RUNNING": v.parallelism} for v in d.vertices),
            what="every task RUNNING with no message in the topic",
        )
        result = change(dispatcher, graph.job_id, JobChangeRequest(parallelism=1))
        topic.arrive_until(2)
        wait_for_rows(out, len(topic.fired_before(2)))
        dispatcher.cancel_job(graph.job_id).result(30)

    assert result.running_ms > 0  # every task of the changed job ran, the windows included
    assert_exactly(committed(out), topic.fired_before(2))
