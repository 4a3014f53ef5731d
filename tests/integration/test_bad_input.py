"""Bad input loses nothing: malformed CSV rows go to the dead-letter output with their reason,
the job succeeds, and every good row is counted."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from millrace import Configuration, FileSource, ParquetSink, StreamExecutionEnvironment, tumbling
from tests.integration.helpers import (
    assert_same_result,
    expected_flight_delays,
    load_example,
    read_output,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SCHEMA = "carrier STRING, flight INT, dep_delay DOUBLE, time_hour TIMESTAMP"
BAD_LINES = {
    "UA,1545,2.0": "expected 4 fields, found 3",
    "UA,1545,2.0,2013-01-01T10:00:00Z,extra": "expected 4 fields, found 5",
    "AA,not-a-number,5.0,2013-01-02T10:00:00Z": (
        "field 'flight': cannot parse 'not-a-number' as int"
    ),
    "DL,461,soon,2013-01-03T10:00:00Z": "field 'dep_delay': cannot parse 'soon' as double",
    "B6,725,-4.0,yesterday": "field 'time_hour': cannot parse 'yesterday' as timestamp",
    "EV,5708,3.0,": "event time column 'time_hour' is null",
}
# A row that parsed but lacks its event time is kept as JSON (the CSV reader keeps the raw text
# only of rows it could not parse).
RECORDED_AS = {"EV,5708,3.0,": '{"carrier":"EV","flight":5708,"dep_delay":3.0}'}


def write_csv(flights_dir: Path, target: Path) -> pd.DataFrame:
    """January and February as two CSV files, with the bad lines spread over both."""
    target.mkdir()
    good = []
    bad = list(BAD_LINES)
    for month in (1, 2):
        frame = pq.read_table(flights_dir / f"flights-2013-{month:02d}.parquet").to_pandas()
        frame = frame[["carrier", "flight", "dep_delay", "time_hour"]]
        text = frame.assign(time_hour=frame["time_hour"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
        lines = text.to_csv(index=False, header=True, lineterminator="\n").splitlines()
        half = bad[:3] if month == 1 else bad[3:]
        lines = lines[:100] + half + lines[100:]
        (target / f"flights-{month}.csv").write_text("\n".join(lines) + "\n")
        good.append(frame)
    return pd.concat(good, ignore_index=True)


def run_csv_job(
    spark, tmp_path: Path, job_name: str, extra: dict[str, object], check: Any = None
) -> Any:
    """The flight-delays job over the CSV files under ``tmp_path / "csv"``; ``check``: an
    optional DataFrame -> DataFrame applied after ``departed``."""
    from pyspark.sql import functions as F

    conf = Configuration(
        {
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "pipeline.side-output.dir": str(tmp_path / "side"),
            **extra,
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    departed = load_example("flight_delays").departed
    (
        env.from_source(
            FileSource.csv(str(tmp_path / "csv"), SCHEMA),
            event_time="time_hour",
            name="csv flights",
        )
        .transform(departed if check is None else (lambda df: check(departed(df))))
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    return env.execute(job_name)


def assert_dead_letters_once(directory: Path) -> None:
    """Every bad line exactly once, with its reason and its file."""
    dead = pd.read_parquet(directory)
    recorded = {RECORDED_AS.get(line, line): reason for line, reason in BAD_LINES.items()}
    assert sorted(dead["record"]) == sorted(recorded)
    for _, row in dead.iterrows():
        assert row["reason"] == recorded[row["record"]], row["record"]
        assert row["source"].endswith(".csv")


def test_malformed_csv_rows_become_dead_letters(spark, flights_dir, tmp_path) -> None:
    good = write_csv(flights_dir, tmp_path / "csv")
    result = run_csv_job(spark, tmp_path, "csv-flights", {})

    source, _ = result.accumulators.values()
    assert source.records_in == len(good) + len(BAD_LINES)
    assert source.dead_letters == len(BAD_LINES)
    assert_same_result(read_output(tmp_path / "out"), expected_flight_delays(good))
    assert_dead_letters_once(tmp_path / "side" / "csv-flights" / "dead-letters")


def fail_once_in_february(marker: str) -> Any:
    """DataFrame -> DataFrame: the first row from 2 February (UTC) on fails its Spark job, once
    (a Python UDF; ``marker`` remembers it across Spark's worker processes and the job's
    attempts). The January file holds flights up to 1 February UTC (local days)."""
    from pyspark.sql import functions as F

    def check(day_of_year):  # no hints: PySpark would read them as a pandas UDF type
        if day_of_year >= 33 and not os.path.exists(marker):
            Path(marker).touch()
            raise RuntimeError("injected failure in February")
        return True

    passes = F.udf(check, "boolean")
    return lambda df: df.where(passes(F.dayofyear("time_hour")))


def test_dead_letters_of_a_failed_attempt_are_not_committed_twice(
    spark, flights_dir, tmp_path
) -> None:
    """January's dead letters are staged, February fails the job, the restart reads January
    again: its dead letters are committed once (side outputs commit with the sinks)."""
    good = write_csv(flights_dir, tmp_path / "csv")
    marker = tmp_path / "failed-once"
    result = run_csv_job(
        spark,
        tmp_path,
        "csv-flights-restarted",
        {
            "parallelism.default": 1,
            "execution.bundle.max-records": 10_000,  # January is three bundles
            "restart-strategy.fixed-delay.delay": "100 ms",
        },
        fail_once_in_february(str(marker)),
    )

    assert marker.exists() and result.details.restarts == 1
    assert_same_result(read_output(tmp_path / "out"), expected_flight_delays(good))
    side = tmp_path / "side" / "csv-flights-restarted" / "dead-letters"
    assert_dead_letters_once(side)
    assert not list(side.glob(".pending/*"))
