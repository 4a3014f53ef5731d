"""Helpers of the streaming tests: files arriving in a directory, the committed output, the
windows that must have fired by a given month."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from millrace import DirectorySource, ParquetSink, StreamExecutionEnvironment, tumbling
from millrace.api.data_stream import DataStream

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
    """The committed rows are the wanted rows as a multiset of whole rows: every column of
    ``wanted``, each row as often as wanted (a window committed twice, or missing, fails,
    whatever the other rows are); floating columns (``avg_dep_delay``) within ``tolerance``.
    Columns of ``actual`` that ``wanted`` lacks are not compared (the live job changes'
    ``versions``, which their tests check on their own).

    The rows are matched on every non-floating column (``carrier``, ``window_start``,
    ``window_end``, ``flights``): their multisets must be equal. Then both sides, sorted on
    every column, are compared row by row on the floating columns.

    Raises:
        AssertionError: Naming the columns that differ, or a few surplus and missing rows.
    """
    columns = list(wanted.columns)
    if len(actual):  # an empty output (``committed`` of no file) has no columns to compare
        absent = [c for c in columns if c not in actual.columns]
        assert not absent, f"columns {absent} missing from {list(actual.columns)}"
    else:
        actual = pd.DataFrame({c: pd.Series(dtype=wanted[c].dtype) for c in columns})
    floating = [c for c in columns if wanted[c].dtype.kind == "f"]
    exact = [c for c in columns if c not in floating]
    got, want = Counter(_rows(actual, exact)), Counter(_rows(wanted, exact))
    if got != want:
        surplus, missing = got - want, want - got
        raise AssertionError(
            f"{len(actual)} rows, {len(wanted)} wanted; by {tuple(exact)}:\n"
            f"  surplus ({surplus.total()} rows, row: times too many): {_few(surplus)}\n"
            f"  missing ({missing.total()} rows, row: times missing): {_few(missing)}"
        )
    if not floating:
        return
    order = [*exact, *floating]
    a = actual[order].sort_values(order, ignore_index=True)
    w = wanted[order].sort_values(order, ignore_index=True)
    for column in floating:
        x, y = a[column].to_numpy(dtype=float), w[column].to_numpy(dtype=float)
        off = ~((np.isnan(x) & np.isnan(y)) | (np.abs(x - y) <= tolerance))
        assert not off.any(), (
            f"{int(off.sum())} rows with {column} off by more than {tolerance}, e.g.\n"
            f"{a[off].head(5).to_string()}\nwanted\n{w[off].head(5).to_string()}"
        )


def _rows(frame: pd.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    """``frame``'s rows as tuples of ``columns``, nulls as None (a NaN equals no NaN)."""
    return [
        tuple(None if pd.isna(v) else v for v in row)
        for row in frame[columns].itertuples(index=False, name=None)
    ]


def _few(rows: Counter[tuple[Any, ...]], limit: int = 5) -> str:
    listed = [f"{row}: {n}" for row, n in sorted(rows.items(), key=str)[:limit]]
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return ("; ".join(listed) or "none") + more


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
