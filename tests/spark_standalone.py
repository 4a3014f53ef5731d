"""A Spark standalone cluster on loopback for the tests (``SparkStandaloneCluster``: a Master
and Workers from the jars pyspark ships).

``running_spark_standalone`` starts a cluster with two Workers of two cores each for a test or a
module of tests (which may kill and restart Workers) and stops it by PID and process group when
the block ends. A cluster that cannot start fails the test that needs it, with the reason
(``tests.real_parts``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from millrace.errors import LocalServerError
from millrace.spark.standalone_cluster import SparkStandaloneCluster
from tests.real_parts import part_unavailable

__all__ = ["running_spark_standalone"]


@contextlib.contextmanager
def running_spark_standalone(
    directory: Path, connect_port: int | None = None
) -> Iterator[SparkStandaloneCluster]:
    """A Spark master and two workers (2 cores, 1 GiB each) on loopback with their files in
    ``directory`` (and a Spark Connect server on ``connect_port``), stopped by PID and process
    group when the block ends; one that cannot start fails the test (``tests.real_parts``)."""
    cluster = SparkStandaloneCluster(
        directory, workers=2, cores=2, memory="1g", connect_port=connect_port
    )
    try:
        cluster.start()
    except LocalServerError as error:
        part_unavailable("a Spark standalone cluster", error)
    try:
        yield cluster
    finally:
        cluster.stop()
