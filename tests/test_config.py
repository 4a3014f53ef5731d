"""Configuration: bad values fail at start naming the key, the value and what is allowed."""

from __future__ import annotations

import pytest

from millrace.config import ClusterOptions, Configuration, RpcOptions, parse_duration, parse_size
from millrace.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10 s", 10.0), ("250 ms", 0.25), ("1 min", 60.0), ("1 day", 86400.0), (3, 3.0)],
)
def test_durations(text, seconds) -> None:
    assert parse_duration(text) == seconds


def test_sizes() -> None:
    assert parse_size("10 mb") == 10 * 1024 * 1024
    assert parse_size(4096) == 4096


def test_defaults_follow_current_flink() -> None:
    conf = Configuration()
    assert conf.get(RpcOptions.ASK_TIMEOUT) == 10.0
    assert conf.get(ClusterOptions.NUM_TASK_SLOTS) == 2


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("rpc.ask-timeout", "soon", "duration"),
        ("taskmanager.numberOfTaskSlots", "0", ">= 1"),
        ("parallelism.default", "two", "int"),
        ("spark.remote", "http://127.0.0.1:15002", "sc://HOST:PORT"),
        ("io.exchange.dir", "nosuch://bucket/jobs", "installed fsspec protocol"),
        ("io.exchange.dir", "", "a directory or a URL"),
    ],
)
def test_invalid_value_names_key_value_and_allowed(key, value, allowed) -> None:
    with pytest.raises(ConfigError) as info:
        Configuration({key: value}).validate()
    assert info.value.key == key
    assert str(info.value.value) == value
    assert allowed in info.value.allowed


def test_lookup_timeout_may_not_exceed_the_ask_timeout() -> None:
    with pytest.raises(ConfigError, match=r"rpc\.lookup-timeout"):
        Configuration({"rpc.ask-timeout": "1 s", "rpc.lookup-timeout": "5 s"}).validate()


def test_dynamic_properties_need_key_and_value() -> None:
    assert Configuration.parse_dynamic_properties(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError):
        Configuration.parse_dynamic_properties(["novalue"])


def test_yaml_nested_keys_are_joined(tmp_path) -> None:
    path = tmp_path / "conf.yaml"
    path.write_text("rpc:\n  ask-timeout: 3 s\nparallelism.default: 3\n")
    conf = Configuration.from_yaml(path)
    assert conf.get(RpcOptions.ASK_TIMEOUT) == 3.0


def test_rpc_limits_are_checked_against_each_other_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"rpc\.handshake\.timeout.*<= rpc\.lookup-timeout"):
        Configuration({"rpc.handshake.timeout": "20 s"}).validate()
    with pytest.raises(ConfigError, match=r"rpc\.write-queue\.max-size.*>= rpc\.framesize"):
        Configuration({"rpc.framesize": "8 mb", "rpc.write-queue.max-size": "1 mb"}).validate()
    derived = Configuration({"rpc.lookup-timeout": "2 s", "rpc.framesize": "64 mb"})
    assert derived.get(RpcOptions.HANDSHAKE_TIMEOUT) == 2.0  # at most the lookup timeout
    assert derived.get(RpcOptions.WRITE_QUEUE_MAX_SIZE) == 128 * 1024 * 1024
    with pytest.raises(ConfigError, match=r"rpc\.handshake\.max-pending"):
        Configuration({"rpc.handshake.max-pending": "0"}).validate()
