"""ReplaySource: the flights replayed as a stream at a set rate, in event-time order with
bounded disorder; the flight-delays job over it equals pandas."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest

from millrace import Configuration, ReplaySource, StreamExecutionEnvironment
from millrace.api.connector.source import WHOLE_INPUT, SourceReaderContext
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.side_outputs import source_column
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.integration.helpers import (
    assert_same_result,
    build_replayed_flight_delays,
    expected_flight_delays,
    read_flights,
    read_output,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

FLIGHTS = 336_776


def test_stripes_deal_the_events_in_order_with_bounded_disorder(flights_dir) -> None:
    disorder_ms = 2 * 3600 * 1000
    source = ReplaySource(
        str(flights_dir), "time_hour", rate=1000, stripes=4, max_disorder_ms=disorder_ms
    )
    stripes = [source.stripe(i) for i in range(4)]
    assert sum(s.num_rows for s in stripes) == FLIGHTS
    times = stripes[1].column("time_hour").cast(pa.timestamp("ms")).cast(pa.int64()).to_numpy()
    behind = np.maximum.accumulate(times) - times
    assert 0 < behind.max() <= disorder_ms  # out of order, but by at most the bound
    assert source.stripe(1).equals(stripes[1])  # seeded: the same stream every run


def test_columns_project_the_stream_in_the_same_order(flights_dir) -> None:
    full = ReplaySource(str(flights_dir), "time_hour", rate=1000, max_disorder_ms=3_600_000)
    projected = ReplaySource(
        str(flights_dir),
        "time_hour",
        rate=1000,
        max_disorder_ms=3_600_000,
        columns=["dep_delay", "carrier"],  # order_by not listed: read, used, not carried
    )
    stripe = projected.stripe(2)
    assert stripe.column_names == ["dep_delay", "carrier"]
    assert stripe.equals(full.stripe(2).select(["dep_delay", "carrier"]))


def test_a_column_the_files_lack_names_it_and_the_columns_there(flights_dir) -> None:
    source = ReplaySource(str(flights_dir), "time_hour", rate=1000, columns=("carrier", "gate"))
    with pytest.raises(ValueError, match=r"\['gate'\] are not in .*'dep_delay'"):
        source.stripe(0)
    with pytest.raises(ValueError, match=r"\['gate'\]"):  # the JobMaster's discovery
        source.create_enumerator("time_hour").discover()


def test_discovered_splits_describe_their_stripes(flights_dir) -> None:
    source = ReplaySource(
        str(flights_dir), "time_hour", rate=1000, max_disorder_ms=3_600_000, columns=("carrier",)
    )
    for split in source.create_enumerator("time_hour").discover():
        stripe = ReplaySource(
            str(flights_dir), "time_hour", rate=1000, max_disorder_ms=3_600_000
        ).stripe(split.split_number)
        first = stripe.column("time_hour").cast(pa.timestamp("ms")).cast(pa.int64())
        assert split.rows == split.end_position == stripe.num_rows
        assert split.min_event_time_ms == min(first.to_pylist())


@pytest.mark.parametrize("columns", [(), ("carrier", "carrier")])
def test_empty_or_repeated_columns_fail_at_construction(flights_dir, columns) -> None:
    with pytest.raises(ValueError, match="distinct column names"):
        ReplaySource(str(flights_dir), "time_hour", rate=1000, columns=columns)


def test_the_reader_releases_no_more_than_the_rate_allows(spark, flights_dir, tmp_path) -> None:
    source = ReplaySource(str(flights_dir), "time_hour", rate=20_000, stripes=4)
    enumerator = source.create_enumerator("time_hour")
    splits = enumerator.discover()
    files = str(tmp_path / "files")
    reader = source.create_reader(
        SourceReaderContext(0, 2, 1_000_000, 0.05, Configuration(), spark, files_dir=files)
    )
    started = time.monotonic()
    reader.add_split(splits[0], 0)
    released = 0
    # a second of release at least; longer (deadline 30 s) until a first bundle is planned
    while time.monotonic() - started < (1.0 if released else 30.0):
        bundle = reader.poll(0.05)
        if bundle is not None:
            released = bundle.progress[0].position
    elapsed = time.monotonic() - started
    assert 0 < released <= 20_000 / 4 * elapsed + 1
    snapshot = reader.snapshot()
    assert snapshot[0].position == released and not snapshot[0].finished


def test_flight_delays_over_a_replay_equals_pandas(spark, flights_dir, tmp_path) -> None:
    rate = 300_000
    conf = Configuration(
        {
            "parallelism.default": 2,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.bundle.max-records": 50_000,
        }
    )
    env = StreamExecutionEnvironment(conf, spark).enable_checkpointing(500)
    build_replayed_flight_delays(env, flights_dir, tmp_path / "out", rate)
    graph = env.get_job_graph("replayed-delays")
    assert graph.configuration["execution.checkpointing.interval"] == "500 ms"
    started = time.monotonic()
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        result = cluster.job_client.submit_job_wait(graph).result(600)
    assert isinstance(result, JobResultSuccess), result
    assert time.monotonic() - started >= FLIGHTS / rate  # paced, not read at once
    assert result.accumulators[result.details.vertices[0].name].late_records == 0
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )


def test_a_batch_reader_releases_every_record_at_once(spark, flights_dir, tmp_path) -> None:
    """BATCH (``WHOLE_INPUT``): the replay's rate paces nothing; one poll holds every record
    of every stripe, each stripe finished."""
    source = ReplaySource(str(flights_dir), "time_hour", rate=10, stripes=2)  # 5 records/s
    splits = source.create_enumerator("time_hour").discover()
    files = str(tmp_path / "files")
    reader = source.create_reader(
        SourceReaderContext(0, 1, WHOLE_INPUT, 0.05, Configuration(), spark, files_dir=files)
    )
    for split in splits:
        reader.add_split(split, 0)
    bundle = reader.poll(0.05)
    assert bundle is not None and reader.is_finished()
    assert [s.finished for s in bundle.progress] == [True, True]
    assert bundle.frame.count() == 336_776


def test_a_bundle_scans_the_stripe_file_written_once_and_holds_the_released_slice(
    spark, flights_dir, tmp_path
) -> None:
    """The records reach Spark as a scan of the stripe's Parquet file in the task's directory
    (no conversion per bundle), filtered to the released positions: the same rows and Spark
    types as the Arrow slice; closing the reader removes the file."""
    source = ReplaySource(
        str(flights_dir), "time_hour", rate=1_000_000, stripes=4, columns=("carrier", "time_hour")
    )
    splits = source.create_enumerator("time_hour").discover()
    files = tmp_path / "task-files"
    reader = source.create_reader(
        SourceReaderContext(0, 1, 30_000, 0.05, Configuration(), spark, files_dir=str(files))
    )
    reader.add_split(splits[1], 1000)  # restored: from position 1000 on
    written = sorted(p.name for p in files.iterdir())
    assert written == ["stripe-1.parquet"]
    deadline = time.monotonic() + 30
    bundle = None
    while bundle is None and time.monotonic() < deadline:
        bundle = reader.poll(0.05)
    assert bundle is not None
    end = bundle.progress[0].position
    assert 1000 < end <= 1000 + 30_000
    assert [f.rsplit("/", 1)[-1] for f in bundle.frame.inputFiles()] == ["stripe-1.parquet"]
    # side outputs name the split, not the reader's own file
    assert bundle.scans_own_files
    named = {r[0] for r in bundle.frame.select(source_column(bundle)).collect()}
    assert named == {splits[1].describe()}
    expected = source.stripe(1).slice(1000, end - 1000)
    got = bundle.frame.toArrow()
    assert got.column_names == ["carrier", "time_hour", "__split"]
    assert set(got.column("__split").to_pylist()) == {splits[1].split_id}
    assert (
        got.select(["carrier", "time_hour"])
        .sort_by([("time_hour", "ascending"), ("carrier", "ascending")])
        .equals(
            expected.sort_by([("time_hour", "ascending"), ("carrier", "ascending")]).cast(
                got.select(["carrier", "time_hour"]).schema
            )
        )
    )
    assert bundle.frame.schema == spark.createDataFrame(expected.slice(0, 0)).drop(
        "__split"
    ).schema.add("__split", "string")
    reader.close()
    assert not files.exists()


def test_naive_timestamps_are_handed_over_as_arrow_with_the_same_spark_types(
    spark, tmp_path
) -> None:
    """Spark would read a naive timestamp from Parquet as TIMESTAMP_NTZ: such a stream is not
    written for a scan, and its bundles keep createDataFrame's TIMESTAMP."""
    import pyarrow.parquet as pq

    times = pa.array(
        [1_700_000_000_000_000 + i * 1_000_000 for i in range(100)], pa.timestamp("us")
    )
    pq.write_table(pa.table({"t": times, "v": pa.array(range(100))}), tmp_path / "naive.parquet")
    source = ReplaySource(str(tmp_path / "naive.parquet"), "t", rate=1_000_000, stripes=1)
    files = tmp_path / "task-files"
    reader = source.create_reader(
        SourceReaderContext(0, 1, WHOLE_INPUT, 0.05, Configuration(), spark, files_dir=str(files))
    )
    reader.add_split(source.create_enumerator("t").discover()[0], 0)
    assert not files.exists()
    bundle = reader.poll(0.05)
    assert bundle is not None
    assert bundle.frame.schema["t"].dataType.simpleString() == "timestamp"
    assert bundle.frame.count() == 100
