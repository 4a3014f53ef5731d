"""End to end: the flight-delays job on the embedded cluster equals pandas on the same files."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.errors import JobExecutionError
from tests.integration.helpers import (
    assert_same_result,
    build_flight_delays_held,
    expected_flight_delays,
    load_example,
    read_flights,
    read_output,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

flight_delays = load_example("flight_delays")


def environment(spark, tmp_path: Path, parallelism: int) -> StreamExecutionEnvironment:
    conf = Configuration(
        {
            "parallelism.default": parallelism,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "pipeline.side-output.dir": str(tmp_path / "side"),
        }
    )
    return StreamExecutionEnvironment(conf, spark)


@pytest.fixture(scope="module")
def expected(flights_dir):
    return expected_flight_delays(read_flights(flights_dir))


def millrace_threads() -> set[str]:
    return {
        t.name
        for t in threading.enumerate()
        if t.name.endswith("-main") or t.name.startswith(("millrace", "flights"))
    }


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_output_equals_pandas(spark, flights_dir, tmp_path, expected, parallelism) -> None:
    before = millrace_threads()
    env = environment(spark, tmp_path, parallelism)
    flight_delays.build(env, str(flights_dir), str(tmp_path / "out"))
    result = env.execute("flight-delays")

    assert_same_result(read_output(tmp_path / "out"), expected)
    if parallelism == 1:  # the window is chained into the source: one task, no exchange
        (chain,) = result.accumulators.values()
        assert chain.records_in == 336_776 and chain.records_out == len(expected)
        assert chain.dead_letters == chain.late_records == 0
        assert [v.parallelism for v in result.details.vertices] == [1]
    else:
        source, window = result.accumulators.values()
        assert source.records_in == 336_776
        assert source.dead_letters == source.late_records == 0
        assert window.records_out == len(expected)
        assert window.records_in == source.records_out
        assert [v.parallelism for v in result.details.vertices] == [parallelism, parallelism]
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert not (tmp_path / "out" / ".pending").exists()
    assert millrace_threads() == before, "endpoint or task threads outlived the cluster"


def test_listing_order_unlike_time_order_changes_nothing(
    spark, flights_dir, tmp_path, expected
) -> None:
    """Months renamed so listing order is scrambled, and split into several row groups each:
    identical output and no late record (watermarks are per split, bounded by statistics)."""
    shuffled = tmp_path / "shuffled"
    shuffled.mkdir()
    names = ["m", "c", "x", "a", "q", "f", "z", "b", "k", "e", "t", "h"]
    for month, name in zip(range(1, 13), names, strict=True):
        table = pq.read_table(flights_dir / f"flights-2013-{month:02d}.parquet")
        pq.write_table(table, shuffled / f"{name}-flights.parquet", row_group_size=7_000)
    env = environment(spark, tmp_path, 2)
    flight_delays.build(env, str(shuffled), str(tmp_path / "out"))
    result = env.execute("flight-delays-shuffled")

    assert_same_result(read_output(tmp_path / "out"), expected)
    source, _ = result.accumulators.values()
    assert source.late_records == 0
    assert source.records_in == 336_776
    assert result.details.splits_total > 12  # row groups are splits


def test_failing_transform_fails_the_job_with_its_root_cause(spark, flights_dir, tmp_path):
    from pyspark.sql import functions as F

    from millrace import FileSource, ParquetSink, tumbling

    env = environment(spark, tmp_path, 2)
    (
        env.from_source(FileSource.parquet(str(flights_dir)), event_time="time_hour")
        .transform(lambda df: df.select("carrier", "time_hour", F.col("no_such_column")))
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("n"))
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    with pytest.raises(JobExecutionError, match="no_such_column"):
        env.execute("broken")
    assert not list((tmp_path / "out").glob("part-*")), "a failed job must not commit output"


def test_overwrite_replaces_the_previous_output(spark, flights_dir, tmp_path, expected):
    out = tmp_path / "out"
    for _ in range(2):
        env = environment(spark, tmp_path, 2)
        flight_delays.build(env, str(flights_dir), str(out))
        env.execute("flight-delays")
    assert_same_result(read_output(out), expected)
    shutil.rmtree(out)


@pytest.mark.parametrize("mode", ["STREAMING", "BATCH"])
def test_an_exchange_store_named_by_url_holds_the_files_and_is_emptied_at_the_end(
    spark, flights_dir, tmp_path, expected, mode
) -> None:
    """``io.exchange.dir`` as a ``file://`` URL (issue 15: fsspec storage every host reaches).
    December is held at the source until the test has looked (``build_flight_delays_held``),
    so the job cannot end before: while it is held, files the job wrote are in the store
    (STREAMING: the windows November's rows wait for cannot fire; BATCH: the other source
    subtask's blocking partition waits for the keyed stage), none under
    ``<io.tmp.dirs>/jobs``; the output equals pandas and the job's directory is removed when
    it ends."""
    store = tmp_path / "store"
    conf = Configuration(
        {
            "parallelism.default": 2,
            "execution.runtime-mode": mode,
            "execution.bundle.max-records": 30_000,  # about a month per bundle
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "io.exchange.dir": f"file://{store}",
            "pipeline.side-output.dir": str(tmp_path / "side"),
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    gate = tmp_path / "gate"
    build_flight_delays_held(env, flights_dir, tmp_path / "out", gate)
    seen: dict[str, list[str]] = {}

    def look_then_release() -> None:
        deadline = time.monotonic() + 120  # then released anyway: the assertions fail
        while time.monotonic() < deadline:
            seen.update(
                (name, sorted(str(p.relative_to(root)) for p in root.glob("*/*/*/*/*.parquet")))
                for name, root in (("store", store), ("local", tmp_path / "tmp" / "jobs"))
            )
            if seen["store"] and Path(f"{gate}.held").exists():
                break
            time.sleep(0.05)
        gate.touch()

    looker = threading.Thread(target=look_then_release, name="store-looker", daemon=True)
    looker.start()
    try:
        env.execute("flight-delays")
    finally:
        gate.touch()
        looker.join(timeout=10)

    assert_same_result(read_output(tmp_path / "out"), expected)
    kinds = {p.split("/")[1] for p in seen["store"]}
    assert kinds & {"exchange", "state"}, seen
    assert seen["local"] == [], "files outside the store"
    assert list(store.iterdir()) == [], "the job's directory outlived the job"
