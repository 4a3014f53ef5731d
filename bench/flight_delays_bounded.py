"""Bounded flight delays: Millrace on the embedded cluster vs the same job as plain PySpark batch.

One invocation, one SparkSession, same files and machine. Each contender runs once to warm the
JVM, then ``--runs`` times alternately; the script prints the median wall time of each and the
ratio of each Millrace mode to the peer. Millrace runs the same job file
(``examples/flight_delays.py``) in STREAMING and in BATCH mode (``execution.runtime-mode``); its
time is ``env.execute`` (cluster start, scheduling, every Spark job, commit, cluster stop); the
peer's is read -> filter -> groupBy(carrier, 1-day window) -> write Parquet. Shuffle
partitions: the best setting of each (``bench/batch_contest.py``). A third contender, the
*staged floor*, runs the job stage by stage as Millrace BATCH does but in plain PySpark with no
runtime (``bench/staged_floor.py``).

Usage: ``.venv/bin/python bench/flight_delays_bounded.py [--runs 5] [--parallelism 2] [--scale 1]``
(``--scale N`` reads each monthly file N times, to see the ratio once fixed costs amortize).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--input", default=str(ROOT / "data" / "flights"))
    parser.add_argument(
        "--scale",
        type=int,
        default=1,
        help="read every input file this many times (symlinked copies): fixed costs amortize",
    )
    args = parser.parse_args()

    import pyarrow.parquet as pq
    from batch_contest import compete, report  # bench/ is the script's directory
    from pyspark.sql import functions as F
    from staged_floor import staged_aggregate

    from millrace import Configuration, StreamExecutionEnvironment
    from millrace.spark.spark_session import create_spark_session, stop_spark_session

    spec = importlib.util.spec_from_file_location("fd", ROOT / "examples" / "flight_delays.py")
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    work = Path(tempfile.mkdtemp(prefix="millrace-bench-"))
    events = 336_776 * args.scale
    if args.scale > 1:
        copies = work / "input"
        copies.mkdir()
        for original in sorted(Path(args.input).glob("*.parquet")):
            for copy in range(args.scale):
                (copies / f"{original.stem}-{copy:03d}.parquet").symlink_to(original)
        args.input = str(copies)
    conf = Configuration(
        {
            "parallelism.default": args.parallelism,
            "io.tmp.dirs": str(work / "tmp"),
        }
    )
    started = time.perf_counter()
    spark = create_spark_session(conf, app_name="bench-flight-delays")
    spark_start = time.perf_counter() - started

    def millrace_run(mode: str) -> float:
        env = StreamExecutionEnvironment(conf, spark).set_runtime_mode(mode)
        example.build(env, args.input, str(work / f"millrace-out-{mode}"))
        t0 = time.perf_counter()
        env.execute("flight-delays")
        return time.perf_counter() - t0

    def spark_batch_run() -> float:
        t0 = time.perf_counter()
        flights = spark.read.parquet(args.input)
        (
            flights.where(F.col("dep_delay").isNotNull())
            .groupBy("carrier", F.window("time_hour", "1 day").alias("w"))
            .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
            .select(
                "carrier",
                F.col("w.start").alias("window_start"),
                F.col("w.end").alias("window_end"),
                "flights",
                "avg_dep_delay",
            )
            .write.mode("overwrite")
            .parquet(str(work / "spark-out"))
        )
        return time.perf_counter() - t0

    floors = iter(range(1_000_000))

    def staged_floor_run() -> float:
        files = sorted(str(p) for p in Path(args.input).glob("*.parquet"))
        out = work / f"floor-{next(floors)}"

        def days(flights: Any) -> Any:
            day = F.window("time_hour", "1 day").start.alias("window_start")
            return example.departed(flights).select("carrier", day, "dep_delay")

        seconds = staged_aggregate(
            spark,
            files,
            lambda paths: spark.read.parquet(*paths),
            days,
            ["carrier", "window_start"],
            lambda: [
                F.count(F.lit(1)).alias("c"),
                F.sum("dep_delay").alias("s"),
                F.count("dep_delay").alias("k"),
            ],
            lambda: [
                F.sum("c").alias("flights"),
                (F.sum("s") / F.sum("k")).alias("avg_dep_delay"),
            ],
            args.parallelism,
            out,
        )
        rows = sum(pq.read_metadata(p).num_rows for p in out.glob("out-*.parquet"))
        assert rows == windows, f"the staged floor wrote {rows} rows, not {windows}"
        return seconds

    millrace = {
        "millrace": lambda: millrace_run("STREAMING"),
        "millrace BATCH": lambda: millrace_run("BATCH"),
        "staged floor (plain PySpark)": staged_floor_run,
    }
    spark_batch_run()
    windows = spark.read.parquet(str(work / "spark-out")).count()
    times = compete(spark, millrace, spark_batch_run, args.runs)
    stop_spark_session(spark)
    shutil.rmtree(work, ignore_errors=True)
    print(
        f"flight delays, bounded, {events:,} events, parallelism {args.parallelism}, "
        f"{args.runs} runs after warm-up (Spark start {spark_start:.1f} s, not counted)"
    )
    report(times, events, "events")


if __name__ == "__main__":
    main()
