"""Source idleness over Kafka: a partition nobody writes to holds event time back until its
subtask is declared idle (``from_source(idleness=...)``, Flink's ``withIdleness``)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from millrace import Configuration, KafkaSource, ParquetSink, StreamExecutionEnvironment
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.io.partition_events import MIN_WATERMARK
from millrace.runtime.job_result import JobDetails
from millrace.runtime.jobmaster.clock_service import WatermarksInfo
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
from tests.waiting import wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class SilentPartitionRun:
    """What a run with one silent partition committed.

    Attributes:
        wanted: The windows ending at least an hour (the out-of-orderness) before January's
            last flight (pandas).
        actual: The committed rows at the end.
        held: Without idleness: the committed rows once every record had reached the window
            operator, the reading subtask's watermark had passed every wanted window, and two
            more checkpoints had completed (None with idleness).
        clocks: Without idleness: the job's clocks at that point (None with idleness).
        source: The source vertex's name.
    """

    wanted: pd.DataFrame
    actual: pd.DataFrame
    held: pd.DataFrame | None = None
    clocks: WatermarksInfo | None = None
    source: str = ""


def run_with_one_silent_partition(
    spark, bootstrap: str, flights_dir: Path, tmp_path: Path, idleness: str | None
) -> SilentPartitionRun:
    """January's flights all go to partition 0 of a 2-partition topic read by 2 subtasks;
    partition 1 stays empty. With idleness, runs until the wanted rows are committed. Without,
    takes the held-back output once the job provably moved past the point where the windows
    would have fired, then writes one record to partition 1 (at January's last hour, without a
    departure delay, so it is in no window) and runs until the wanted rows are committed."""
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
    last_ms = last.value // 10**6
    assert messages.timestamps_ms[stop - 1] == last_ms

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
            return SilentPartitionRun(wanted, committed(out))

        def details() -> JobDetails:
            return dispatcher.request_job_details(graph.job_id).result(30)

        def clocks() -> WatermarksInfo:
            return dispatcher.request_watermarks(graph.job_id).result(30)

        source = details().vertices[0].name
        reached = wait_value(  # every record read, every bundle at the window operator
            details,
            lambda d: (
                d.vertices[0].metrics.records_in == stop
                and d.vertices[-1].metrics.records_in == d.vertices[0].metrics.records_out > 0
            ),
            what=f"{stop} records read and the window operator given all the source emitted",
            timeout=WAIT,
        )
        ahead = last_ms - HOUR_MS - 1  # the reading subtask's watermark: past every wanted end
        wait_value(
            clocks,
            lambda w: max(c.watermark_ms for c in w.tasks if c.vertex == source) >= ahead,
            what="the reading source subtask's watermark at January's last hour - 1 h",
            timeout=WAIT,
        )
        wait_value(  # anything fired before these barriers is committed now
            details,
            lambda d: d.checkpoints >= reached.checkpoints + 2,
            what="two more checkpoints",
            timeout=WAIT,
        )
        held, held_clocks = committed(out), clocks()

        release = json.loads(messages.values[stop - 1])
        release["dep_delay"] = None  # read, moves partition 1's watermark, fills no window
        produce(
            bootstrap,
            topic,
            [json.dumps(release).encode()],
            [1],
            keys=[messages.keys[stop - 1]],
            timestamps_ms=[last_ms],
        )
        wait_for_rows(out, len(wanted))
        dispatcher.cancel_job(graph.job_id).result(30)
        return SilentPartitionRun(wanted, committed(out), held, held_clocks, source)


def test_a_silent_partition_holds_event_time_back_without_idleness(
    spark, kafka_broker, flights_dir, tmp_path
) -> None:
    """Every record reached the window operator, the subtask reading partition 0 has a
    watermark past every wanted window, and two more checkpoints completed: still nothing is
    committed, because the silent subtask's watermark (MIN, the job's min clock) holds the
    operator back. One record in the silent partition releases exactly the wanted windows
    (so the job was alive and its sink commits)."""
    run = run_with_one_silent_partition(
        spark, kafka_broker.bootstrap_servers, flights_dir, tmp_path, idleness=None
    )
    assert len(run.wanted) > 0
    assert run.held is not None and run.clocks is not None
    assert_exactly(run.held, run.wanted.iloc[0:0])  # no window fired while held back
    reading = sorted(c.watermark_ms for c in run.clocks.tasks if c.vertex == run.source)
    assert reading[0] == MIN_WATERMARK < reading[1], run.clocks  # the silent one is the min
    assert run.clocks.min_clock_ms == MIN_WATERMARK
    assert_exactly(run.actual, run.wanted)


def test_with_idleness_the_silent_subtask_goes_idle_and_windows_fire_exactly(
    spark, kafka_broker, flights_dir, tmp_path
) -> None:
    run = run_with_one_silent_partition(
        spark, kafka_broker.bootstrap_servers, flights_dir, tmp_path, idleness="500 ms"
    )
    assert_exactly(run.actual, run.wanted)
