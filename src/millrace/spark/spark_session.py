"""The SparkSession of the data plane: one per TaskManager process, shared by its tasks.

Bundles are small, so the session is tuned for many short jobs: no UI, no adaptive execution,
one shuffle partition by default, FAIR scheduling between the subtasks' concurrent jobs, UTC
session time zone (event time and windows are UTC), the driver on loopback. Any ``spark.*`` key
of the configuration overrides these; a ``spark.driver.host`` given without
``spark.driver.bindAddress`` is bound too, so executors on other hosts reach the driver
(``spark.master=spark://...``, issue 15).

With ``spark.remote=sc://HOST:PORT`` the session is a Spark Connect session instead: no JVM in
this process, plans sent over gRPC to a Connect server (``millrace spark-cluster start
--connect-port``). Only the runtime SQL settings above apply to it (UTC, no adaptive execution,
the shuffle partitions, ``spark.sql.*`` keys); the server's own configuration holds the rest.
PySpark then marks the whole process as a Connect one (``SPARK_CONNECT_MODE_ENABLED``, inherited
by its children): ``pyspark.sql.functions`` build Connect columns, and no classic session can
start in it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from millrace.config import Configuration, SparkOptions

__all__ = [
    "BackgroundSparkSession",
    "create_spark_session",
    "is_spark_connect",
    "stop_spark_session",
]

logger = logging.getLogger(__name__)

_JVM_EXIT_TIMEOUT = 20  # seconds Spark's JVM gets to exit after its gateway closed
_CONNECT_RELEASE_TIMEOUT = 5  # seconds stopping waits for a Connect server to release a session

_LOG4J = Path(__file__).with_name("log4j2.properties").as_uri()

_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.scheduler.mode": "FAIR",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.extraJavaOptions": f"-Duser.timezone=UTC -Dlog4j2.configurationFile={_LOG4J}",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    # A CSV row is malformed by the whole declared schema, not just the columns a query reads:
    # without this, a bad field in an unused column would pass as a good row.
    "spark.sql.csv.parser.columnPruning.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    # PySpark's DataFrame debugging context records the Python call site of every column
    # function in the JVM: four py4j round trips per call, a quarter of a subtask's plan
    # building (406 -> 294 a flights bundle). Millrace's errors name the task and the transform.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


def create_spark_session(configuration: Configuration, app_name: str = "millrace") -> Any:
    """Start (or join) the process's SparkSession.

    Returns:
        ``pyspark.sql.SparkSession``.

    Raises:
        ConfigError: If a spark option has an invalid value.
        Exception: Whatever PySpark raises when the JVM cannot start (e.g. no Java).
    """
    from pyspark.sql import SparkSession

    remote = configuration.get(SparkOptions.REMOTE)
    if remote:
        return _connect_session(configuration, remote)
    settings = spark_settings(configuration)
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_settings(configuration: Configuration) -> dict[str, str]:
    """The settings of a classic (JVM) SparkSession for ``configuration``: Millrace's defaults,
    then every ``spark.*`` key given (``spark.remote`` left out). Sets ``SPARK_LOCAL_IP`` and
    ``PYSPARK_PYTHON`` in this process's environment if unset (PySpark reads them there).

    Also the launch settings of a JVM started ahead of its sessions (``scripts/mutation.py``
    starts one JVM that every mutant's test session joins through ``PYSPARK_GATEWAY_PORT``).

    Raises:
        ConfigError: If a spark option has an invalid value.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, and no warning
    # Python UDFs run in worker processes started with PYSPARK_PYTHON (PySpark reads only the
    # environment, not spark.pyspark.python): without it they get the PATH's python3, which
    # lacks this environment's packages (pyarrow, the job's own imports).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    settings = dict(_DEFAULTS)
    settings["spark.pyspark.python"] = sys.executable  # Python UDFs need this venv's packages
    settings["spark.master"] = configuration.get(SparkOptions.MASTER)
    settings["spark.driver.memory"] = configuration.get(SparkOptions.DRIVER_MEMORY)
    settings["spark.sql.shuffle.partitions"] = str(
        configuration.get(SparkOptions.SHUFFLE_PARTITIONS)
    )
    given = {k: str(v) for k, v in configuration.items_with_prefix("spark.").items()}
    given.pop(SparkOptions.REMOTE.key, None)  # empty here: PySpark would read it as Connect
    settings.update(given)
    if "spark.driver.host" in given and "spark.driver.bindAddress" not in given:
        # executors on other hosts call the driver back at spark.driver.host: bind it there
        # too (Spark's own default), not at the loopback default above
        settings["spark.driver.bindAddress"] = given["spark.driver.host"]
    return settings


def _connect_session(configuration: Configuration, remote: str) -> Any:
    """A Spark Connect session at ``remote`` with the runtime SQL settings of a local one."""
    from pyspark.sql import SparkSession

    settings = {k: v for k, v in _DEFAULTS.items() if k.startswith("spark.sql.")}
    settings["spark.sql.shuffle.partitions"] = str(
        configuration.get(SparkOptions.SHUFFLE_PARTITIONS)
    )
    given = configuration.items_with_prefix("spark.sql.")
    settings.update({k: str(v) for k, v in given.items()})
    builder = SparkSession.builder.remote(remote)
    for key, value in settings.items():
        builder = builder.config(key, value)
    # a new session each time (the process's default from then on): one replacing a session
    # its server no longer knows must not be handed that session again
    return builder.create()


def is_spark_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext, no JVM here)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def stop_spark_session(spark: Any) -> None:
    """Stop the session, close the JVM gateway and wait for the JVM PySpark launched to exit
    (killed after ``_JVM_EXIT_TIMEOUT`` s), so no JVM outlives the cluster. A JVM this process
    joined instead of launching (``PYSPARK_GATEWAY_PORT``: spark-submit's, or the one
    ``make mutation`` shares) is left running: only this side's connections are closed. A
    Connect session is released on its server and its channel closed, waited for at most
    ``_CONNECT_RELEASE_TIMEOUT`` s (PySpark retries a call to a server that is down for minutes;
    the server drops a session it still holds when its own timeout says)."""
    from pyspark import SparkContext

    if is_spark_connect(spark):
        release = threading.Thread(target=spark.stop, name="spark-connect-release", daemon=True)
        release.start()
        release.join(_CONNECT_RELEASE_TIMEOUT)
        if release.is_alive():
            logger.warning(
                "the Spark Connect server did not release the session within %d s",
                _CONNECT_RELEASE_TIMEOUT,
            )
        return
    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    process = getattr(gateway, "proc", None)  # the spark-submit JVM, if PySpark launched it
    try:
        if process is None:  # a JVM this process joined (PYSPARK_GATEWAY_PORT): it lives on
            gateway.close()
        else:
            gateway.shutdown()
    except Exception:  # the JVM may be gone already
        logger.debug("JVM gateway shutdown failed", exc_info=True)
    SparkContext._gateway = None
    SparkContext._jvm = None
    if process is None:
        return
    if process.stdin is not None:
        process.stdin.close()  # the gateway server exits on EOF of its stdin
    try:
        process.wait(timeout=_JVM_EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        logger.warning("Spark's JVM did not exit within %d s; killing it", _JVM_EXIT_TIMEOUT)
        process.kill()
        process.wait()


class BackgroundSparkSession:
    """The process's SparkSession, started on a background thread while the control plane
    comes up, and stopped with its JVM.

    Args:
        configuration: Spark keys (``spark.*``).
        app_name: Spark application name.
        given: An already running session to use instead (not stopped by ``stop``).
        factory: Starts a session from the configuration (default ``create_spark_session``).
        warm_up: Run one small job of the kind bundles run (Arrow in, aggregate, Arrow out)
            before the session counts as started, so that a TaskManager's first bundle — often
            the first after a failover — does not pay the JVM's class loading and code
            generation.

    Threading:
        Any thread.
    """

    def __init__(
        self,
        configuration: Configuration,
        app_name: str = "millrace",
        given: Any = None,
        factory: Any = None,
        warm_up: bool = False,
    ) -> None:
        self._configuration = configuration
        self._app_name = app_name
        self._given = given
        self._factory = factory
        self._warm_up = warm_up
        self.started: Future[Any] = Future()
        self._lock = threading.Lock()  # stop() against the starting thread
        self._stopping = False
        self._stopped = False
        self._start_called = False

    def start(self) -> None:
        """Begin starting Spark (returns at once); calls after the first do nothing."""
        with self._lock:
            if self._start_called:
                return
            self._start_called = True
        if self._given is not None:
            self.started.set_result(self._given)
            return
        threading.Thread(target=self._start, name="spark-start", daemon=True).start()

    def _start(self) -> None:
        try:
            factory = self._factory or (lambda conf: create_spark_session(conf, self._app_name))
            session = factory(self._configuration)
        except BaseException as error:
            self.started.set_exception(error)
            return
        if self._warm_up:
            try:
                _warm_up(session)
            except Exception:
                logger.warning("warming Spark up failed", exc_info=True)
        self.started.set_result(session)
        if self._stopping:  # stopped while Spark was starting: stop it here
            self.stop()

    def get(self) -> Any:
        """The SparkSession; blocks until it started. Raises what starting raised."""
        return self.started.result()

    def stop(self) -> None:
        """Stop the session this object started, with its JVM, once it is up. Idempotent."""
        with self._lock:
            self._stopping = True
            ready = self.started.done() and self.started.exception() is None
            if self._given is None and ready and not self._stopped:
                self._stopped = True
                stop_spark_session(self.started.result())


def _warm_up(spark: Any) -> None:
    """One job like a bundle's: an Arrow table in, a grouped aggregate, Arrow out."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    started = time.monotonic()
    table = pa.table({"k": ["a", "b", "a"], "v": [1.0, 2.0, 3.0]})
    frame = spark.createDataFrame(table).groupBy("k").agg(F.count("*"), F.avg("v"))
    frame.toArrow()
    logger.info("Spark warmed up in %.1f s", time.monotonic() - started)
