"""KafkaSource: the user's description of a Kafka input travels to the cluster as it was built."""

from __future__ import annotations

import pickle

import cloudpickle
import pytest

from millrace import KafkaSource
from millrace.api.connector.source import Boundedness


def test_source_pickles_with_all_its_settings() -> None:
    source = KafkaSource.json(
        "127.0.0.1:9092",
        "flights",
        "carrier string, dep_delay double",
        bounded=True,
        starting_offsets={0: 5},
        properties={"fetch.wait.max.ms": "50"},
    )
    for codec in (pickle, cloudpickle):
        assert codec.loads(codec.dumps(source)) == source


def test_boundedness_follows_the_bounded_flag() -> None:
    assert KafkaSource.json("b:1", "t", "a int").boundedness is Boundedness.CONTINUOUS_UNBOUNDED
    bounded = KafkaSource.json("b:1", "t", "a int", bounded=True)
    assert bounded.boundedness is Boundedness.BOUNDED
    assert "Kafka topic t at b:1" in bounded.describe()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"topic": ""}, "topic"),
        ({"starting_offsets": "newest"}, "'earliest', 'latest' or a mapping"),
        ({"starting_offsets": {0: -1}}, ">= 0"),
        ({"format": "avro"}, "json"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_invalid_settings_fail_when_the_source_is_built(kwargs, message) -> None:
    arguments = {"bootstrap_servers": "b:1", "topic": "t", "schema": "a int", **kwargs}
    with pytest.raises(ValueError, match=message):
        KafkaSource(**arguments)
