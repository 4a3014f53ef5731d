"""An unbounded job over a Kafka topic that the flights keep arriving in: windows fire as the
partitions' event time advances, output becomes visible checkpoint by checkpoint, and a
TaskManager lost mid-stream costs nothing (the partitions rewind to the checkpoint's offsets).
"""

from __future__ import annotations

import uuid

import pandas as pd
import pytest

from millrace import Configuration, KafkaSource, ParquetSink, StreamExecutionEnvironment
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.helpers import expected_flight_delays, read_flights
from tests.integration.kafka_flights import (
    FLIGHTS_SCHEMA,
    create_topic,
    flight_messages,
    index_before,
    produce_range,
)
from tests.integration.streams import assert_exactly, committed, delays_per_day, wait_for_rows
from tests.waiting import wait_until, wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]

PARTITIONS = 4


def records_in(dispatcher: DispatcherGateway, job_id: str) -> int:
    details = dispatcher.request_job_details(job_id).result(30)
    return details.vertices[0].metrics.records_in


def test_flights_arriving_in_a_topic_stream_through_windows_exactly_once(
    spark, kafka_broker, flights_dir, tmp_path
) -> None:
    bootstrap, out = kafka_broker.bootstrap_servers, tmp_path / "out"
    topic = f"stream-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    messages = flight_messages(flights_dir)
    conf = Configuration(
        {
            "parallelism.default": 2,
            "minicluster.number-of-taskmanagers": 3,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.checkpointing.interval": "300 ms",
            "execution.bundle.max-records": 20_000,
            "heartbeat.interval": "100 ms",
            "heartbeat.pause": "1 s",
            "restart-strategy.fixed-delay.delay": "100 ms",
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    flights_stream = env.from_source(
        KafkaSource.json(bootstrap, topic, FLIGHTS_SCHEMA),
        event_time="time_hour",
        max_out_of_orderness="1 h",
    )
    delays_per_day(flights_stream).sink_to(ParquetSink(str(out)))
    graph = env.get_job_graph("kafka-stream-delays")
    flights = read_flights(flights_dir)
    expected = expected_flight_delays(flights)

    def month_start_ms(month: int) -> int:
        return pd.Timestamp(f"2013-{month:02d}-01", tz="UTC").value // 10**6

    def fired_before(month: int) -> pd.DataFrame:
        """Windows that must have fired once the flights before ``month`` (UTC) arrived: those
        ending at least one hour (the out-of-orderness) before the last event."""
        before = flights[flights["time_hour"] < pd.Timestamp(f"2013-{month:02d}-01", tz="UTC")]
        last = before["time_hour"].max()
        return expected[expected["window_end"] <= last - pd.Timedelta(hours=1)]

    produced = 0

    def arrive_until(month: int) -> None:
        nonlocal produced
        stop = index_before(messages, month_start_ms(month))
        produce_range(bootstrap, topic, messages, produced, stop, PARTITIONS)
        produced = stop

    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        arrive_until(3)  # January and February
        wait_for_rows(out, len(fired_before(3)))

        crash_task_executor(busy_task_executor(cluster))
        arrive_until(4)  # March
        wait_for_rows(out, len(fired_before(4)))
        details = dispatcher.request_job_details(graph.job_id).result(30)
        assert details.status is JobStatus.RUNNING and details.restarts >= 1
        dispatcher.cancel_job(graph.job_id).result(30)

    assert_exactly(committed(out), fired_before(4))  # no window twice, none missing


def test_latest_starting_offsets_skip_what_the_topic_held_when_the_job_started(
    spark, kafka_broker, flights_dir, tmp_path
) -> None:
    bootstrap, out = kafka_broker.bootstrap_servers, tmp_path / "out"
    topic = f"latest-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    messages = flight_messages(flights_dir)
    february = index_before(messages, pd.Timestamp("2013-02-01", tz="UTC").value // 10**6)
    march = index_before(messages, pd.Timestamp("2013-03-01", tz="UTC").value // 10**6)
    produce_range(bootstrap, topic, messages, 0, february, PARTITIONS)  # January: before the job
    conf = Configuration(
        {
            "parallelism.default": 2,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.bundle.max-records": 20_000,
        }
    )
    env = StreamExecutionEnvironment(conf, spark).enable_checkpointing(300)
    flights_stream = env.from_source(
        KafkaSource.json(bootstrap, topic, FLIGHTS_SCHEMA, starting_offsets="latest"),
        event_time="time_hour",
        max_out_of_orderness="1 h",
    )
    delays_per_day(flights_stream).sink_to(ParquetSink(str(out)))
    graph = env.get_job_graph("kafka-latest")
    flights = read_flights(flights_dir)
    in_february = flights[
        (flights["time_hour"] >= pd.Timestamp("2013-02-01", tz="UTC"))
        & (flights["time_hour"] < pd.Timestamp("2013-03-01", tz="UTC"))
    ]
    expected = expected_flight_delays(in_february)
    wanted = expected[
        expected["window_end"] <= in_february["time_hour"].max() - pd.Timedelta(hours=1)
    ]

    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        wait_until(
            lambda: (
                dispatcher.request_job_details(graph.job_id).result(30).splits_assigned
                >= PARTITIONS
            ),
            what=f"{PARTITIONS} partitions assigned",
        )
        produce_range(bootstrap, topic, messages, february, march, PARTITIONS)
        wait_for_rows(out, len(wanted))
        read = wait_value(  # counters are reported about once a second: let them settle
            lambda: records_in(dispatcher, graph.job_id),
            lambda n: n >= march - february,
            what=f"the sources' records-in to reach {march - february}",
        )
        dispatcher.cancel_job(graph.job_id).result(30)

    assert read == march - february  # January was never read
    assert_exactly(committed(out), wanted)
