"""DirectorySource bundles vs plain Spark over the same Parquet files, in one invocation.

The 12 monthly flights files (336,776 rows) are read one file per bundle by a
DirectorySourceReader, and each bundle runs the flight-delays aggregation (departed flights per
carrier and day: count, avg ``dep_delay``) as one Spark job (``toArrow``), in the two ways a
Parquet file reaches Spark: as the file itself (a file read whole: Spark's vectorized scan) and
converted from Arrow (``createDataFrame``: the way a file read in parts, by row groups, goes;
forced here by turning the scan off). The peer is plain PySpark: ``spark.read.parquet(file)``
and the same aggregation, per file. Time = the 12 bundles, polling included; median of
``--runs`` alternating runs after a warm-up of each.

Usage::

    .venv/bin/python bench/directory_bundles.py [--runs 7] [--input data/flights]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def aggregate(frame: Any) -> Any:
    from pyspark.sql import functions as F

    departed = frame.where(F.col("dep_delay").isNotNull())
    return departed.groupBy("carrier", F.window("time_hour", "1 day")).agg(
        F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay")
    )


def run_reader(spark: Any, directory: str, scan: bool) -> tuple[float, int]:
    """Seconds to read every file as a bundle and run its Spark job; rows out."""
    from millrace.api.connector.source import SourceReaderContext
    from millrace.config import Configuration
    from millrace.connectors.directory_source import DirectorySource

    source = DirectorySource.parquet(directory)
    splits = source.create_enumerator(None).discover()
    reader = source.create_reader(SourceReaderContext(0, 1, 250_000, 0.01, Configuration(), spark))
    if not scan:
        reader._whole_file_scan = lambda state: None  # the path of a file read in parts
    for split in splits:
        reader.add_split(split, 0)
    started, out = time.perf_counter(), 0
    while not reader.is_finished():
        bundle = reader.poll(0.01)
        assert bundle is not None
        out += aggregate(bundle.frame.drop("__split")).toArrow().num_rows
    return time.perf_counter() - started, out


def run_peer(spark: Any, files: list[str]) -> tuple[float, int]:
    started, out = time.perf_counter(), 0
    for path in files:
        out += aggregate(spark.read.parquet(path)).toArrow().num_rows
    return time.perf_counter() - started, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--input", default=str(ROOT / "data" / "flights"))
    args = parser.parse_args()

    from millrace.config import Configuration
    from millrace.spark.spark_session import create_spark_session

    spark = create_spark_session(Configuration({"spark.sql.shuffle.partitions": 2}))
    files = sorted(str(p) for p in Path(args.input).glob("*.parquet"))
    contenders = {
        "plain Spark, spark.read.parquet per file": lambda: run_peer(spark, files),
        "DirectorySource, file scanned by Spark": lambda: run_reader(spark, args.input, True),
        "DirectorySource, converted from Arrow": lambda: run_reader(spark, args.input, False),
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    outputs: dict[str, set[int]] = {name: set() for name in contenders}
    for run in contenders.values():
        run()  # warm-up
    for _ in range(args.runs):
        for name, run in contenders.items():
            seconds, rows = run()
            times[name].append(seconds)
            outputs[name].add(rows)
    peer = statistics.median(times["plain Spark, spark.read.parquet per file"])
    print(f"{len(files)} files, one bundle each; median of {args.runs} alternating runs")
    print(f"{'contender':<44}{'median s':>10}{'/ peer':>9}  rows out")
    for name in contenders:
        median = statistics.median(times[name])
        print(f"{name:<44}{median:>10.3f}{median / peer:>8.2f}x  {sorted(outputs[name])}")


if __name__ == "__main__":
    main()
