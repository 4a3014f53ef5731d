"""The ``high-availability.*`` keys fail at start with the key, the value and what is allowed."""

from __future__ import annotations

import pytest

from millrace.config import Configuration, HighAvailabilityMode, HighAvailabilityOptions
from millrace.errors import ConfigError

ZK = {
    "high-availability.type": "zookeeper",
    "high-availability.zookeeper.quorum": "127.0.0.1:2181",
    "high-availability.storageDir": "/tmp/ha",
}


def test_the_default_is_no_high_availability() -> None:
    conf = Configuration()
    conf.validate()
    assert conf.get(HighAvailabilityOptions.TYPE) is HighAvailabilityMode.NONE
    assert conf.get(HighAvailabilityOptions.ZOOKEEPER_ROOT) == "/millrace"
    assert conf.get(HighAvailabilityOptions.CLUSTER_ID) == "/default"


def test_a_complete_zookeeper_configuration_validates() -> None:
    Configuration({**ZK, "high-availability.cluster-id": "prod-1"}).validate()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("high-availability.type", "zk"),
        ("high-availability.zookeeper.quorum", ""),
        ("high-availability.zookeeper.quorum", "127.0.0.1"),
        ("high-availability.zookeeper.quorum", "a:1,,b:2"),
        ("high-availability.storageDir", " "),
        ("high-availability.zookeeper.path.root", "/mill race"),
        ("high-availability.cluster-id", "a//b"),
        ("high-availability.zookeeper.client.session-timeout", "10 parsecs"),
        ("high-availability.zookeeper.client.session-timeout", "0.5 s"),
        ("high-availability.zookeeper.client.max-retry-attempts", "-1"),
        ("high-availability.zookeeper.client.tolerate-suspended-connections", "maybe"),
    ],
)
def test_a_wrong_value_fails_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Configuration({**ZK, key: value}).validate()
    assert raised.value.key == key


def test_a_job_cannot_change_the_clusters_high_availability() -> None:
    assert Configuration(ZK).job_level() == {}
