"""The Prometheus reporter's configuration: a port or a range (each process on a host takes
the next free port), a bad value fails at start naming the key, a range with no free port
leaves the process running without the reporter (a warning names the key), and
metrics.reporters turns it off."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import httpx
import pytest

from millrace.config import Configuration, parse_port_range
from millrace.errors import ConfigError
from millrace.runtime.metrics.flink_collectors import TaskManagerCollector
from millrace.runtime.metrics.prometheus_reporter import start_prometheus_reporter


def _collector() -> TaskManagerCollector:
    return TaskManagerCollector({"tm-1": lambda: []}, host="h")


@pytest.fixture
def two_free_ports() -> Iterator[tuple[socket.socket, int, int]]:
    """A bound socket on port p (taken) with p+1 free at the time of the probe."""
    for _ in range(50):
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        if port >= 65535:
            taken.close()
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                taken.close()
                continue
        yield taken, port, port + 1
        taken.close()
        return
    pytest.fail("no two adjacent free ports")


def test_port_ranges_parse_as_flink_writes_them() -> None:
    assert parse_port_range("9249", key="k") == range(9249, 9250)
    assert parse_port_range("9250-9260", key="k") == range(9250, 9261)
    assert parse_port_range(" 9250 - 9251 ", key="k") == range(9250, 9252)
    assert parse_port_range(0, key="k") == range(0, 1)


@pytest.mark.parametrize("value", ["abc", "9260-9250", "70000", "0-10", "-1", "9249,9250", ""])
def test_a_bad_port_fails_at_start_naming_the_key(value: str) -> None:
    conf = Configuration({"metrics.reporter.prom.port": value})
    with pytest.raises(ConfigError, match=r"metrics\.reporter\.prom\.port"):
        conf.validate()
    with pytest.raises(ConfigError, match=r"metrics\.reporter\.prom\.port"):
        start_prometheus_reporter(conf, [_collector()], "taskmanager")


def test_an_unknown_reporter_fails_at_start_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"metrics\.reporters.*jmx"):
        Configuration({"metrics.reporters": "prom,jmx"}).validate()


def test_a_range_takes_the_next_free_port(two_free_ports) -> None:
    _, taken, free = two_free_ports
    conf = Configuration({"metrics.reporter.prom.port": f"{taken}-{free}"})
    reporter = start_prometheus_reporter(conf, [_collector()], "taskmanager")
    assert reporter is not None
    try:
        assert reporter.port == free
        assert reporter.url == f"http://127.0.0.1:{free}/metrics"
        text = httpx.get(reporter.url, timeout=10).text
        assert 'flink_taskmanager_Status_JVM_Memory_Heap_Used{host="h",tm_id="tm-1"}' in text
    finally:
        reporter.close()


def test_no_free_port_leaves_the_process_without_the_reporter(two_free_ports, caplog) -> None:
    _, taken, _ = two_free_ports
    conf = Configuration({"metrics.reporter.prom.port": str(taken)})
    with caplog.at_level(logging.WARNING):
        assert start_prometheus_reporter(conf, [_collector()], "taskmanager") is None
    assert "metrics.reporter.prom.port" in caplog.text


@pytest.mark.parametrize("value", ["", "none"])
def test_metrics_reporters_turns_the_reporter_off(value: str) -> None:
    conf = Configuration({"metrics.reporters": value, "metrics.reporter.prom.port": "0"})
    conf.validate()
    assert start_prometheus_reporter(conf, [_collector()], "taskmanager") is None
