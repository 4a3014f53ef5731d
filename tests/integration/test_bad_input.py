"""Bad input loses nothing: malformed CSV rows go to the dead-letter output with their reason,
the job succeeds, and every good row is counted."""

from __future__ import annotations

from pathlib import Path

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


def test_malformed_csv_rows_become_dead_letters(spark, flights_dir, tmp_path) -> None:
    good = write_csv(flights_dir, tmp_path / "csv")
    conf = Configuration(
        {"io.tmp.dirs": str(tmp_path / "tmp"), "pipeline.side-output.dir": str(tmp_path / "side")}
    )
    env = StreamExecutionEnvironment(conf, spark)
    departed = load_example("flight_delays").departed
    from pyspark.sql import functions as F

    (
        env.from_source(
            FileSource.csv(str(tmp_path / "csv"), SCHEMA),
            event_time="time_hour",
            name="csv flights",
        )
        .transform(departed)
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    result = env.execute("csv-flights")

    source, _ = result.accumulators.values()
    assert source.records_in == len(good) + len(BAD_LINES)
    assert source.dead_letters == len(BAD_LINES)
    assert_same_result(read_output(tmp_path / "out"), expected_flight_delays(good))

    dead = pd.read_parquet(tmp_path / "side" / "csv-flights" / "dead-letters")
    recorded = {RECORDED_AS.get(line, line): reason for line, reason in BAD_LINES.items()}
    assert sorted(dead["record"]) == sorted(recorded)
    for _, row in dead.iterrows():
        assert row["reason"] == recorded[row["record"]], row["record"]
        assert row["source"].endswith(".csv")
