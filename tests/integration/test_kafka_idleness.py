"""Source idleness over Kafka: a partition nobody writes to holds event time back until its
subtask is declared idle (``from_source(idleness=...)``, Flink's ``withIdleness``)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from millrace import Configuration, KafkaSource, ParquetSink, StreamExecutionEnvironment
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.integration.helpers import expected_flight_delays, read_flights
from tests.integration.kafka_flights import (
    FLIGHTS_SCHEMA,
    create_topic,
    flight_messages,
    index_before,
    produce,
)
from tests.integration.streams import WAIT, assert_exactly, committed, delays_per_day, wait_for_rows

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def run_with_one_silent_partition(
    spark, bootstrap: str, flights_dir: Path, tmp_path: Path, idleness: str | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """January's flights all go to partition 0 of a 2-partition topic read by 2 subtasks;
    partition 1 stays empty. Returns (committed rows once the source read every message and two
    more checkpoints completed, or once the wanted rows are committed; the wanted rows)."""
    topic = f"idle-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    messages = flight_messages(flights_dir)
    stop = index_before(messages, pd.Timestamp("2013-02-01", tz="UTC").value // 10**6)
    conf = Configuration(
        {
            "parallelism.default": 2,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.bundle.max-records": 20_000,
        }
    )
    env = StreamExecutionEnvironment(conf, spark).enable_checkpointing(200)
    out = tmp_path / "out"
    flights_stream = env.from_source(
        KafkaSource.json(bootstrap, topic, FLIGHTS_SCHEMA),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        idleness=idleness,
    )
    delays_per_day(flights_stream).sink_to(ParquetSink(str(out)))
    graph = env.get_job_graph("kafka-idleness")
    flights = read_flights(flights_dir)
    january = flights[flights["time_hour"] < pd.Timestamp("2013-02-01", tz="UTC")]
    last = january["time_hour"].max()
    expected = expected_flight_delays(flights)
    wanted = expected[expected["window_end"] <= last - pd.Timedelta(hours=1)]

    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        produce(
            bootstrap,
            topic,
            messages.values[:stop],
            [0] * stop,
            keys=messages.keys[:stop],
            timestamps_ms=messages.timestamps_ms[:stop],
        )
        if idleness is not None:
            wait_for_rows(out, len(wanted))
        else:
            deadline = time.monotonic() + WAIT
            while True:  # every message read, then two more checkpoints
                details = dispatcher.request_job_details(graph.job_id).result(30)
                if details.vertices[0].metrics.records_in == stop:
                    break
                assert time.monotonic() < deadline, details
                time.sleep(0.2)
            read_at = details.checkpoints
            while dispatcher.request_job_details(graph.job_id).result(30).checkpoints < read_at + 2:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        dispatcher.cancel_job(graph.job_id).result(30)
    return committed(out), wanted


def test_a_silent_partition_holds_event_time_back_without_idleness(
    spark, kafka_broker, flights_dir, tmp_path
) -> None:
    actual, wanted = run_with_one_silent_partition(
        spark, kafka_broker.bootstrap_servers, flights_dir, tmp_path, idleness=None
    )
    assert len(wanted) > 0
    assert actual.empty  # subtask 1's watermark never moved: no window could fire


def test_with_idleness_the_silent_subtask_goes_idle_and_windows_fire_exactly(
    spark, kafka_broker, flights_dir, tmp_path
) -> None:
    actual, wanted = run_with_one_silent_partition(
        spark, kafka_broker.bootstrap_servers, flights_dir, tmp_path, idleness="500 ms"
    )
    assert_exactly(actual, wanted)
