"""Helpers of the streaming tests: files arriving in a directory, the committed output, the
windows that must have fired by a given month."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from millrace import DirectorySource, ParquetSink, StreamExecutionEnvironment, tumbling
from millrace.api.data_stream import DataStream
from tests.rows import assert_same_rows

WAIT = 180.0


def delays_per_day(flights: DataStream) -> DataStream:
    """The flight-delays aggregation: departed flights per carrier and 1-day window, count and
    average departure delay (``expected_flight_delays`` in pandas)."""
    from pyspark.sql import functions as F

    return (
        flights.transform(lambda df: df.where(F.col("dep_delay").isNotNull()))
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
    )


def build_inbox_delays(env: StreamExecutionEnvironment, inbox: Path, out: Path) -> None:
    """The flight-delays aggregation over a directory that monthly files arrive in."""
    flights = env.from_source(
        DirectorySource.parquet(str(inbox)), event_time="time_hour", max_out_of_orderness="1 h"
    )
    delays_per_day(flights).sink_to(ParquetSink(str(out)))


def arrive(flights_dir: Path, inbox: Path, month: int) -> None:
    """A month's file appears in the directory at once (written aside, then renamed in)."""
    source = flights_dir / f"flights-2013-{month:02d}.parquet"
    hidden = inbox / f".incoming-{month:02d}.parquet"
    shutil.copy(source, hidden)
    hidden.rename(inbox / source.name)


def committed(out: Path) -> pd.DataFrame:
    """The sink's visible output, sorted by carrier and window."""
    files = sorted(out.glob("part-*.parquet"))
    if not files:
        return pd.DataFrame(columns=["carrier", "window_start"])
    frame = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    return frame.sort_values(["carrier", "window_start"], ignore_index=True)


def wait_for_rows(out: Path, rows: int, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while len(committed(out)) < rows:
        assert time.monotonic() < deadline, f"{len(committed(out))} of {rows} rows committed"
        time.sleep(0.2)


def fired_through(flights: pd.DataFrame, expected: pd.DataFrame, month: int) -> pd.DataFrame:
    """Windows that must have fired once months 1..month arrived: those ending at least one
    hour (the out-of-orderness) before the last event."""
    last = flights[flights["month"] <= month]["time_hour"].max()
    return expected[expected["window_end"] <= last - pd.Timedelta(hours=1)]


def assert_exactly(actual: pd.DataFrame, wanted: pd.DataFrame, tolerance: float = 1e-9) -> None:
    """The committed rows are the wanted rows as a multiset of whole rows
    (``tests.rows.assert_same_rows``): a window committed twice, or missing, fails whatever
    the other rows are. Columns of ``actual`` that ``wanted`` lacks are not compared (the live
    job changes' ``versions``, which their tests check on their own).

    Raises:
        AssertionError: Naming the columns that differ, or a few surplus and missing rows.
    """
    assert_same_rows(actual, wanted, tolerance)


def stream_settings(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "parallelism.default": 2,
        "minicluster.number-of-taskmanagers": 3,
        "io.tmp.dirs": str(tmp_path / "tmp"),
        "execution.checkpointing.interval": "300 ms",
        "source.discovery-interval": "200 ms",
        "heartbeat.interval": "100 ms",
        "heartbeat.pause": "1 s",
        "restart-strategy.fixed-delay.delay": "100 ms",
        **extra,
    }
