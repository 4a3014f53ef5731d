"""End to end with Kafka: the flight-delays job reads the flights from a 4-partition topic of a
real broker (Tansu) in bounded mode and equals pandas on the same flights, row by row; with
checkpoints every 200 ms and a TaskManager lost mid-job, the restored job rewinds the
partitions to the checkpoint's offsets and the output is still exact (December's flights are
held at the source until the TaskManager is lost, so the job cannot end before).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from millrace import (
    Configuration,
    KafkaSource,
    ParquetSink,
    StreamExecutionEnvironment,
    tumbling,
)
from millrace.errors import CheckpointError, JobSubmissionError
from millrace.runtime.checkpoint.checkpoint_storage import CheckpointStorage
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.helpers import (
    assert_same_result,
    expected_flight_delays,
    held_at_december,
    load_example,
    offsets_read,
    read_flights,
    read_output,
)
from tests.integration.kafka_flights import FLIGHTS_SCHEMA, produce_flights
from tests.waiting import result_within, wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]

FLIGHTS = 336_776
PARTITIONS = 4
WAIT = 120.0

flight_delays = load_example("flight_delays")


@pytest.fixture(scope="module")
def flights_topic(kafka_broker, flights_dir) -> str:
    """A 4-partition topic holding every flight, in event-time order per partition."""
    topic = f"flights-{uuid.uuid4().hex[:8]}"
    produced = produce_flights(kafka_broker.bootstrap_servers, topic, flights_dir, PARTITIONS)
    assert len(produced) == FLIGHTS
    return topic


@pytest.fixture(scope="module")
def expected(flights_dir):
    return expected_flight_delays(read_flights(flights_dir))


def build(
    env: StreamExecutionEnvironment,
    bootstrap: str,
    topic: str,
    output_dir: str,
    gate: Path | None = None,
) -> None:
    """examples/flight_delays.py, reading the topic instead of the files; with ``gate``,
    December is held at the source until that file exists (``held_at_december``)."""
    flights = env.from_source(
        KafkaSource.json(bootstrap, topic, FLIGHTS_SCHEMA, bounded=True),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        name="flights",
    )
    if gate is not None:
        flights = flights.transform(held_at_december(gate), name="held at december")
    (
        flights.transform(flight_delays.departed, name="departed")
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
        .sink_to(ParquetSink(output_dir))
    )


def test_bounded_topic_gives_the_same_delays_as_pandas(
    spark, kafka_broker, flights_topic, tmp_path, expected
) -> None:
    conf = Configuration(
        {
            "parallelism.default": 2,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "pipeline.side-output.dir": str(tmp_path / "side"),
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    build(env, kafka_broker.bootstrap_servers, flights_topic, str(tmp_path / "out"))

    result = env.execute("kafka-flight-delays")

    assert_same_result(read_output(tmp_path / "out"), expected)
    source, window = result.accumulators.values()
    assert source.records_in == FLIGHTS
    assert source.dead_letters == source.late_records == 0
    assert window.records_out == len(expected)
    assert result.details.splits_total == PARTITIONS
    assert not (tmp_path / "out" / ".pending").exists()


def recovery_configuration(tmp_path) -> Configuration:
    return Configuration(
        {
            "parallelism.default": 2,
            "minicluster.number-of-taskmanagers": 3,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.bundle.max-records": 30_000,
            "execution.checkpointing.interval": "200 ms",
            "state.checkpoints.num-retained": 2,
            "heartbeat.interval": "100 ms",
            "heartbeat.pause": "1 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": "100 ms",
        }
    )


def test_task_manager_lost_mid_job_rewinds_the_offsets_and_output_is_exact(
    spark, kafka_broker, flights_topic, tmp_path, expected
) -> None:
    conf = recovery_configuration(tmp_path)
    env = StreamExecutionEnvironment(conf, spark)
    gate = tmp_path / "december"
    build(env, kafka_broker.bootstrap_servers, flights_topic, str(tmp_path / "out"), gate)
    graph = env.get_job_graph("kafka-flight-delays-checkpointed")
    storage = CheckpointStorage(str(tmp_path / "unused"), str(tmp_path / "unused"))
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        waiting = cluster.job_client.submit_job_wait(graph)

        def checkpointed_offsets() -> int:
            try:
                stats = dispatcher.request_checkpoint_statistics(graph.job_id).result(30)
            except JobSubmissionError:  # not submitted yet
                return 0
            if stats.completed < 2:
                return 0
            try:
                return offsets_read(storage, stats.retained[-1])
            except CheckpointError:  # subsumed and deleted meanwhile
                return 0

        read = wait_value(
            checkpointed_offsets,
            lambda offsets: offsets >= 30_000 or waiting.done(),
            what="a checkpoint with 30,000 offsets read",
            timeout=WAIT,
        )
        assert not waiting.done(), "the job ended before the TaskManager was lost"
        crash_task_executor(busy_task_executor(cluster))
        gate.touch()  # December may go on: the restored job runs to its end
        result = result_within(waiting, WAIT, what="the job's result after the crash")

    assert read < FLIGHTS, "the job had read everything before the TaskManager was lost"
    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    source = result.details.vertices[0]
    # the restored sources started at the checkpoint's offsets, not at the beginning
    assert source.metrics.records_in < FLIGHTS
    assert source.metrics.dead_letters == 0
    assert_same_result(read_output(tmp_path / "out"), expected)
    assert not list((tmp_path / "out").glob(".pending/*"))
