"""Bad messages lose nothing: values that are not JSON for the schema go to the dead-letter
output with their reason and text, the job succeeds, every good flight is counted, and nothing
of a malformed value (a far-future event time) moves the watermarks."""

from __future__ import annotations

import uuid

import pandas as pd
import pytest
from pyspark.sql import functions as F

from millrace import Configuration, KafkaSource, ParquetSink, StreamExecutionEnvironment, tumbling
from tests.integration.helpers import (
    assert_same_result,
    expected_flight_delays,
    load_example,
    read_flights,
    read_output,
)
from tests.integration.kafka_flights import (
    FLIGHTS_SCHEMA,
    create_topic,
    flight_messages,
    index_before,
    produce,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

FUTURE = b'{"carrier": "UA", "dep_delay": "late", "time_hour": "2099-01-01T00:00:00Z"}'
BAD_MESSAGES: dict[bytes | None, str] = {
    b"not json {": "value is not valid JSON",
    FUTURE: "JSON value does not fit the schema (not an object, or a field's type differs)",
    None: "message has no value (null)",
    b"": "message value is empty",
    b'{"carrier": "EV", "dep_delay": 3.0}': "event time column 'time_hour' is null",
}


def test_malformed_messages_become_dead_letters(spark, kafka_broker, flights_dir, tmp_path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"bad-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    messages = flight_messages(flights_dir)
    january = index_before(messages, pd.Timestamp("2013-02-01", tz="UTC").value // 10**6)
    values: list[bytes | None] = list(messages.values[:january])
    for i, bad in enumerate(BAD_MESSAGES):
        values.insert(200 + 5_000 * i, bad)  # spread over both partitions, early and late
    produce(bootstrap, topic, values, [i % 2 for i in range(len(values))])
    conf = Configuration(
        {
            "parallelism.default": 2,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "pipeline.side-output.dir": str(tmp_path / "side"),
            "execution.bundle.max-records": 5_000,
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    (
        env.from_source(
            KafkaSource.json(bootstrap, topic, FLIGHTS_SCHEMA, bounded=True),
            event_time="time_hour",
            name="kafka flights",
        )
        .transform(load_example("flight_delays").departed)
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    result = env.execute("kafka-bad-input")

    source, _ = result.accumulators.values()
    assert source.records_in == january + len(BAD_MESSAGES)
    assert source.dead_letters == len(BAD_MESSAGES)
    assert source.late_records == 0
    flights = read_flights(flights_dir)
    good = flights[flights["time_hour"] < pd.Timestamp("2013-02-01", tz="UTC")]
    assert_same_result(read_output(tmp_path / "out"), expected_flight_delays(good))

    dead = pd.read_parquet(tmp_path / "side" / "kafka-bad-input" / "dead-letters")
    # a null value has no text: the record is its (null) fields as JSON
    recorded = {"{}" if b is None else b.decode(): r for b, r in BAD_MESSAGES.items()}
    assert sorted(dead["record"]) == sorted(recorded)
    for _, row in dead.iterrows():
        assert row["reason"] == recorded[row["record"]], row["record"]
        assert topic in row["source"]
