"""A Spark standalone cluster on loopback for the tests (``SparkStandaloneCluster``: a Master
and Workers from the jars pyspark ships).

The fixture ``spark_standalone`` gives each test a cluster of its own with two Workers of two
cores each (a test may kill and restart Workers), stopped by PID and process group in teardown.
A cluster that cannot start fails the test that needs it, with the reason (``tests.real_parts``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.errors import LocalServerError
from millrace.spark.standalone_cluster import SparkStandaloneCluster
from tests.real_parts import part_unavailable

__all__ = ["spark_standalone"]


@pytest.fixture
def spark_standalone(tmp_path: Path) -> Iterator[SparkStandaloneCluster]:
    """A Spark master and two workers (2 cores, 1 GiB each) of the test's own on loopback."""
    cluster = SparkStandaloneCluster(tmp_path / "spark-cluster", workers=2, cores=2, memory="1g")
    try:
        cluster.start()
    except LocalServerError as error:
        part_unavailable("a Spark standalone cluster", error)
    try:
        yield cluster
    finally:
        cluster.stop()
