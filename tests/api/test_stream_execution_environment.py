"""StreamExecutionEnvironment settings that need no Spark: checkpointing, source idleness."""

from __future__ import annotations

import pytest

from millrace import Configuration, KafkaSource, StreamExecutionEnvironment
from millrace.config import CheckpointingMode, CheckpointingOptions
from millrace.errors import ConfigError


def environment(values: dict[str, object] | None = None) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment(Configuration(values or {}), spark=None)


def test_enable_checkpointing_sets_interval_and_mode_for_the_job() -> None:
    base = Configuration({"execution.checkpointing.timeout": "5 s"})
    env = StreamExecutionEnvironment(base, spark=None)
    assert env.enable_checkpointing(250, "AT_LEAST_ONCE") is env
    assert env.configuration.get(CheckpointingOptions.INTERVAL) == pytest.approx(0.25)
    assert env.configuration.get(CheckpointingOptions.MODE) is CheckpointingMode.AT_LEAST_ONCE
    assert env.configuration.get(CheckpointingOptions.TIMEOUT) == pytest.approx(5.0)
    assert base.get(CheckpointingOptions.INTERVAL) == 0.0  # the shared configuration is untouched


@pytest.mark.parametrize(
    ("interval_ms", "mode", "message"),
    [
        (0, "EXACTLY_ONCE", "must be > 0 ms, got 0"),
        (-5, "EXACTLY_ONCE", "must be > 0 ms, got -5"),
        (100, "exactly_once", "must be one of ('EXACTLY_ONCE', 'AT_LEAST_ONCE')"),
    ],
)
def test_enable_checkpointing_rejects_bad_values(interval_ms, mode, message) -> None:
    env = environment()
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        env.enable_checkpointing(interval_ms, mode)
    assert env.configuration.get(CheckpointingOptions.INTERVAL) == 0.0


@pytest.mark.parametrize("idleness", ["0 s", "-1 s", "soon"])
def test_idleness_must_be_a_positive_duration(idleness) -> None:
    source = KafkaSource.json("127.0.0.1:9", "t", "carrier string, time_hour timestamp")
    with pytest.raises(ConfigError, match="idleness"):
        environment().from_source(source, event_time="time_hour", idleness=idleness)
