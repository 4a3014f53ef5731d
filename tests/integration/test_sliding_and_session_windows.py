"""Sliding and session windows end to end, against pandas on the same files: the examples
over the whole year, and decomposable, buffered and pandas window functions at parallelism 1,
2 and 3 over files listed out of event-time order (months under scrambled names, several row
groups each, so that split watermarks matter)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from millrace import (
    Configuration,
    FileSource,
    ParquetSink,
    StreamExecutionEnvironment,
    session,
    sliding,
)
from tests.integration.helpers import load_example, read_flights
from tests.integration.window_expectations import (
    assert_rows_equal,
    expected_sessions,
    expected_sliding_delays,
    session_windows,
    sliding_windows,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

MONTHS = (3, 1, 2)  # listed in this order: names sort c, a, b
GAP = pd.Timedelta(hours=3)
# a pandas function runs once per session: a few thousand flights keep that short
SMALL_CARRIERS = ("VX", "F9", "AS", "HA", "YV", "OO")


def environment(spark: Any, tmp_path: Path, parallelism: int) -> StreamExecutionEnvironment:
    conf = Configuration(
        {
            "parallelism.default": parallelism,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "pipeline.side-output.dir": str(tmp_path / "side"),
            "execution.bundle.max-records": 20_000,
        }
    )
    return StreamExecutionEnvironment(conf, spark)


def committed(out: Path) -> pd.DataFrame:
    files = sorted(out.glob("part-*.parquet"))
    assert files, f"no committed output under {out}"
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)


@pytest.fixture(scope="module")
def scrambled(flights_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three months whose names list them out of event-time order, 7,000 rows a row group."""
    directory = tmp_path_factory.mktemp("scrambled")
    for month, name in zip(MONTHS, ["c", "a", "b"], strict=True):
        table = pq.read_table(flights_dir / f"flights-2013-{month:02d}.parquet")
        pq.write_table(table, directory / f"{name}-flights.parquet", row_group_size=7_000)
    return directory


@pytest.fixture(scope="module")
def flights(scrambled: Path) -> pd.DataFrame:
    return read_flights(scrambled)


def source(env: StreamExecutionEnvironment, directory: Path) -> Any:
    return env.from_source(
        FileSource.parquet(str(directory)), event_time="time_hour", max_out_of_orderness="1 h"
    )


def test_the_sliding_delays_example_equals_pandas(spark, flights_dir, tmp_path) -> None:
    env = environment(spark, tmp_path, 2)
    load_example("sliding_delays").build(env, str(flights_dir), str(tmp_path / "out"))
    result = env.execute("sliding-delays")

    expected = expected_sliding_delays(read_flights(flights_dir))
    assert_rows_equal(committed(tmp_path / "out"), expected, "origin")
    source_metrics = next(iter(result.accumulators.values()))
    assert source_metrics.late_records == 0


def test_the_sessions_example_equals_pandas(spark, flights_dir, tmp_path) -> None:
    env = environment(spark, tmp_path, 2)
    sessions = load_example("sessions")
    sessions.build(env, str(flights_dir), str(tmp_path / "out"))
    env.execute("sessions")

    expected = expected_sessions(read_flights(flights_dir), pd.Timedelta(sessions.GAP))
    assert_rows_equal(committed(tmp_path / "out"), expected, "tailnum")


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_sliding_windows_of_a_buffered_aggregate_equal_pandas(
    spark, scrambled, flights, tmp_path, parallelism
) -> None:
    from pyspark.sql import functions as F

    env = environment(spark, tmp_path, parallelism)
    (
        source(env, scrambled)
        .transform(lambda df: df.where(F.col("arr_delay").isNotNull()))
        .key_by("carrier")
        .window(sliding("2 days", "1 day"))
        .agg(
            F.count("*").alias("flights"),
            F.max_by("flight", F.struct("arr_delay", "flight")).alias("most_delayed"),
        )
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    result = env.execute("sliding-buffered")

    arrived = flights[flights["arr_delay"].notna()]
    windows = sliding_windows(arrived, "time_hour", pd.Timedelta(days=2), pd.Timedelta(days=1))
    ordered = windows.sort_values(["arr_delay", "flight"])
    expected = ordered.groupby(["carrier", "window_start", "window_end"], as_index=False).agg(
        flights=("flight", "size"), most_delayed=("flight", "last")
    )
    assert_rows_equal(committed(tmp_path / "out"), expected, "carrier")
    assert next(iter(result.accumulators.values())).late_records == 0


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_session_windows_with_partial_aggregates_equal_pandas(
    spark, scrambled, flights, tmp_path, parallelism
) -> None:
    from pyspark.sql import functions as F

    env = environment(spark, tmp_path, parallelism)
    (
        source(env, scrambled)
        .transform(lambda df: df.where(F.col("tailnum").isNotNull()))
        .key_by("tailnum")
        .window(session("3 h"))
        .agg(
            F.count("*").alias("flights"),
            F.sum("distance").alias("distance"),
            F.avg("dep_delay").alias("avg_dep_delay"),
        )
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    env.execute("sessions-partial")

    planes = session_windows(flights[flights["tailnum"].notna()], "tailnum", "time_hour", GAP)
    expected = planes.groupby(["tailnum", "window_start", "window_end"], as_index=False).agg(
        flights=("flight", "size"),
        distance=("distance", "sum"),
        avg_dep_delay=("dep_delay", "mean"),
    )
    assert_rows_equal(committed(tmp_path / "out"), expected, "tailnum")


def longest_delay(frame: pd.DataFrame) -> pd.DataFrame:
    """A session's flights, its longest departure delay and the destination of its last
    flight (a pandas window function)."""
    last = frame.sort_values(["time_hour", "flight"]).iloc[-1]
    return pd.DataFrame(
        {
            "tailnum": [last["tailnum"]],
            "window_start": [frame["window_start"].iloc[0]],
            "window_end": [frame["window_end"].iloc[0]],
            "flights": [len(frame)],
            "max_dep_delay": [frame["dep_delay"].max()],
            "last_dest": [last["dest"]],
        }
    )


@pytest.mark.parametrize(
    ("parallelism", "mode"),
    [(1, "STREAMING"), (2, "STREAMING"), (3, "STREAMING"), (1, "BATCH"), (2, "BATCH")],
)
def test_a_pandas_function_over_session_windows_equals_pandas(
    spark, scrambled, flights, tmp_path, parallelism, mode
) -> None:
    from pyspark.sql import functions as F

    env = environment(spark, tmp_path, parallelism).set_runtime_mode(mode)
    (
        source(env, scrambled)
        .transform(
            lambda df: df.where(
                F.col("tailnum").isNotNull() & F.col("carrier").isin(*SMALL_CARRIERS)
            ).select("tailnum", "time_hour", "flight", "dep_delay", "dest")
        )
        .key_by("tailnum")
        .window(session("3 h"))
        .apply_in_pandas(
            longest_delay,
            "tailnum string, window_start timestamp, window_end timestamp, flights long, "
            "max_dep_delay double, last_dest string",
        )
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    env.execute("sessions-pandas")

    mine = flights[flights["tailnum"].notna() & flights["carrier"].isin(SMALL_CARRIERS)]
    planes = session_windows(mine, "tailnum", "time_hour", GAP)
    groups = planes.groupby(["tailnum", "window_start", "window_end"])
    expected = pd.concat([longest_delay(g) for _, g in groups], ignore_index=True)
    assert_rows_equal(committed(tmp_path / "out"), expected, "tailnum")
