"""Seed 001's channel protocol end to end, on a real Kafka broker: a sink ten times slower than
its sources slows the sources (flow control; their lag grows, the exchange store and the memory
stay bounded, checkpoints still complete, the sources report back-pressured time), and each
injected channel fault (drop, repeat, stale session) fails the consumer with MessageLossError
and the job recovers from its checkpoint with exact output."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import pandas as pd
import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.hardware_description import rss_bytes
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.integration.channel_jobs import (
    KEY,
    SlowParquetSink,
    exchange_usage,
    output_rows,
    union_job,
    write_topics,
)
from tests.integration.helpers import read_flights
from tests.integration.kafka_flights import flight_messages, index_before
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

MAX_RECORDS = 250  # records per source bundle
WINDOW = 2  # max-unacked-bundles
MiB = 1 << 20
SINK_DELAY = 2.5  # seconds per staged part: a source reads a bundle in 0.1-0.3 s


def settings(tmp_path, **extra) -> Configuration:  # type: ignore[no-untyped-def]
    return Configuration(
        {
            "parallelism.default": 1,
            "minicluster.number-of-taskmanagers": 2,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.checkpointing.interval": "500 ms",
            "execution.bundle.max-records": MAX_RECORDS,
            "heartbeat.interval": "100 ms",
            "heartbeat.pause": "2 s",
            "restart-strategy.fixed-delay.delay": "100 ms",
            "taskmanager.network.flow-control.max-unacked-bundles": WINDOW,
            "taskmanager.network.flow-control.ack-request-interval": 1,
            **extra,
        }
    )


def expected_rows(flights_dir, stop: int) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """The first ``stop`` flights in event-time order (what the topics hold), as pandas."""
    flights = read_flights(flights_dir).sort_values("time_hour", kind="stable", ignore_index=True)
    return flights.iloc[:stop][[*KEY, "dep_delay"]].sort_values(KEY, ignore_index=True)


def assert_same_rows(actual: pd.DataFrame, wanted: pd.DataFrame) -> None:
    assert len(actual) == len(wanted), f"{len(actual)} rows, {len(wanted)} wanted"
    a = actual.astype({"dep_delay": "float64"}).reset_index(drop=True)
    w = wanted.astype(a.dtypes.to_dict()).reset_index(drop=True)
    pd.testing.assert_frame_equal(a[[*KEY, "dep_delay"]], w[[*KEY, "dep_delay"]])


@dataclass(frozen=True)
class Sample:
    """The job at one moment: seconds since submission, records read by the sources and by the
    sink, exchange files and bytes, this process's RSS, the sources' back-pressured ms and the
    completed checkpoints."""

    t: float
    read: int
    sunk: int
    files: int
    exchange_bytes: int
    rss: int
    back_pressured_ms: int
    checkpoints: int


def test_a_sink_ten_times_slower_than_its_sources_slows_them_and_bounds_the_exchange(
    spark, kafka_broker, flights_dir, tmp_path
) -> None:
    bootstrap, out, tmp = kafka_broker.bootstrap_servers, tmp_path / "out", tmp_path / "tmp"
    messages = flight_messages(flights_dir)
    stop = index_before(messages, pd.Timestamp("2013-01-08", tz="UTC").value // 10**6)
    topics = [f"bp-{uuid.uuid4().hex[:8]}-{i}" for i in range(2)]
    write_topics(bootstrap, topics, messages, stop)
    conf = settings(tmp_path)
    env = StreamExecutionEnvironment(conf, spark)
    graph = union_job(env, bootstrap, topics, SlowParquetSink(str(out), delay=SINK_DELAY))
    samples: list[Sample] = []
    rss_before = rss_bytes()

    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        started = time.monotonic()

        def sample() -> bool:
            details = dispatcher.request_job_details(graph.job_id).result(30)
            sources = [v for v in details.vertices if v.name.startswith("Source")]
            sink = next(v for v in details.vertices if not v.name.startswith("Source"))
            stats = dispatcher.request_checkpoint_statistics(graph.job_id).result(30)
            files, size = exchange_usage(tmp)
            samples.append(
                Sample(
                    time.monotonic() - started,
                    sum(v.metrics.records_in for v in sources),
                    sink.metrics.records_in,
                    files,
                    size,
                    rss_bytes(),
                    sum(v.metrics.backpressured_ms for v in sources),
                    stats.completed,
                )
            )
            return len(output_rows(out)) >= stop

        wait_until(sample, timeout=300, interval=0.5, what=f"{stop} rows committed")
        dispatcher.cancel_job(graph.job_id).result(30)

    print(f"\n{stop} flights; sink {SINK_DELAY} s per part of <= {MAX_RECORDS} records")
    print(
        f"{'t s':>6} {'read':>7} {'sunk':>7} {'lag':>7} {'files':>5} {'exch KiB':>8} "
        f"{'RSS MiB':>8} {'bp ms':>7} {'chk':>4}"
    )
    for x in samples:
        print(
            f"{x.t:6.1f} {x.read:7d} {x.sunk:7d} {stop - x.read:7d} {x.files:5d} "
            f"{x.exchange_bytes / 1024:8.0f} {x.rss / MiB:8.0f} {x.back_pressured_ms:7d} "
            f"{x.checkpoints:4d}"
        )
    # Each source is at most its window ahead of the sink, plus the bundle it is reading and
    # the sink's metrics being up to a second (a part) old, on each of the two channels.
    ahead = max(x.read - x.sunk for x in samples)
    bound_records = 2 * (WINDOW + 2) * MAX_RECORDS
    bound_files = 2 * (WINDOW + 3)
    bound_bytes = bound_files * 2 * MiB
    peak_rss = max(x.rss for x in samples) - rss_before
    print(
        f"sources ahead of the sink by <= {ahead} records (bound {bound_records}); exchange "
        f"<= {max(x.files for x in samples)} files (bound {bound_files}), "
        f"<= {max(x.exchange_bytes for x in samples)} bytes (bound {bound_bytes}); RSS grew "
        f"{peak_rss / MiB:.0f} MiB (bound 1024)"
    )
    assert ahead <= bound_records
    # the sources paused (their Kafka lag grew): they spent most of the run waiting for room
    waited_s = samples[-1].back_pressured_ms / 1000
    print(f"sources back-pressured {waited_s:.1f} s (both summed) in {samples[-1].t:.0f} s")
    assert waited_s >= samples[-1].t / 4
    assert max(x.files for x in samples) <= bound_files
    assert max(x.exchange_bytes for x in samples) <= bound_bytes
    assert peak_rss <= 1024 * MiB
    # barriers flowed while the windows were full: a checkpoint completed before the end
    assert any(x.checkpoints >= 1 and x.read < stop for x in samples)
    assert_same_rows(output_rows(out), expected_rows(flights_dir, stop))


@pytest.mark.parametrize(
    ("fault", "kind"), [("drop", "gap"), ("repeat", "repeat"), ("stale", "stale session")]
)
def test_an_injected_channel_fault_fails_the_consumer_and_the_job_recovers_exactly(
    spark, kafka_broker, flights_dir, tmp_path, fault, kind
) -> None:
    bootstrap, out = kafka_broker.bootstrap_servers, tmp_path / "out"
    messages = flight_messages(flights_dir)
    stop = index_before(messages, pd.Timestamp("2013-01-06", tz="UTC").value // 10**6)
    topics = [f"fault-{uuid.uuid4().hex[:8]}-{i}" for i in range(2)]
    write_topics(bootstrap, topics, messages, stop)
    conf = settings(
        tmp_path,
        **{
            "execution.bundle.max-records": 400,
            "taskmanager.network.flow-control.ack-request-interval": 2,
            # TEST ONLY: the 6th bundle of producer subtask 0 to consumer subtask 0
            "taskmanager.network.test.fault-injection": f"{fault}:0:0:5",
        },
    )
    env = StreamExecutionEnvironment(conf, spark)
    graph = union_job(env, bootstrap, topics, SlowParquetSink(str(out), delay=0.3))

    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        wait_until(
            lambda: len(output_rows(out)) >= stop, timeout=300, what=f"{stop} rows committed"
        )
        details = dispatcher.request_job_details(graph.job_id).result(30)
        info = dispatcher.request_execution_graph_info(graph.job_id).result(30)
        stats = dispatcher.request_checkpoint_statistics(graph.job_id).result(30)
        dispatcher.cancel_job(graph.job_id).result(30)

    losses = [e for e in info.exceptions if e.exception_name.endswith("MessageLossError")]
    for entry in losses:
        print(f"\n{entry.task_name}: {entry.stacktrace.splitlines()[0][:300]}")
    print(f"restarts {details.restarts}, restored from {stats.restored_from!r}")
    assert details.status is JobStatus.RUNNING and details.restarts >= 1
    assert losses and f": {kind}: expected" in losses[0].stacktrace
    assert "producer 0 -> consumer 0" in losses[0].stacktrace
    assert_same_rows(output_rows(out), expected_rows(flights_dir, stop))
