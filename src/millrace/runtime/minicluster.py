"""MiniCluster: the whole cluster in one process, on the in-process RPC transport.

Starts a ResourceManager, a Dispatcher, ``minicluster.number-of-taskmanagers`` TaskExecutors
with ``taskmanager.numberOfTaskSlots`` slots each, a JobClient, and one SparkSession shared by
the TaskManagers (started on a background thread while the control plane comes up). ``close``
stops every endpoint, the I/O threads and, if the cluster started it, Spark and its JVM.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from millrace.config import ClusterOptions, Configuration
from millrace.rpc import LocalRpcService
from millrace.runtime.client.job_client import JobClient, JobClientGateway
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.resourcemanager.resource_manager import ResourceManager
from millrace.runtime.taskexecutor.task_executor import TaskExecutor
from millrace.types import ResourceId

__all__ = ["MiniCluster"]

logger = logging.getLogger(__name__)


class MiniCluster:
    """An embedded cluster.

    Args:
        configuration: Cluster configuration (validated on ``start``).
        spark_session: An already running SparkSession to share, or None to start one.
        spark_factory: Starts a SparkSession from the configuration (default
            ``millrace.spark.spark_session.create_spark_session``).

    Threading:
        ``start`` and ``close`` from one thread; ``job_client`` from any.

    Raises:
        ConfigError: From ``start``, if a configuration value is invalid.
    """

    def __init__(
        self,
        configuration: Configuration | None = None,
        spark_session: Any = None,
        spark_factory: Callable[[Configuration], Any] | None = None,
    ) -> None:
        self.configuration = configuration or Configuration()
        self._given_spark = spark_session
        self._spark_factory = spark_factory
        self._spark: Future[Any] = Future()
        self._rpc: LocalRpcService | None = None
        self._io: ThreadPoolExecutor | None = None
        self.resource_manager: ResourceManager | None = None
        self.dispatcher: Dispatcher | None = None
        self.task_executors: list[TaskExecutor] = []
        self._job_client: JobClient | None = None
        self._closed = False
        self._spark_lock = threading.Lock()  # close() and the spark-start thread
        self._spark_stopped = False

    def start(self) -> MiniCluster:
        """Start Spark (in the background) and every endpoint; returns self."""
        self.configuration.validate()
        if self._given_spark is not None:
            self._spark.set_result(self._given_spark)
        else:
            threading.Thread(target=self._start_spark, name="spark-start", daemon=True).start()
        conf = self.configuration
        self._rpc = LocalRpcService("minicluster", configuration=conf)
        self._io = ThreadPoolExecutor(4, thread_name_prefix="millrace-io")
        self.resource_manager = ResourceManager(self._rpc, configuration=conf)
        self.resource_manager.start()
        self.dispatcher = Dispatcher(self._rpc, conf, self.resource_manager.address, self._io)
        self.dispatcher.start()
        for i in range(conf.get(ClusterOptions.NUM_TASK_MANAGERS)):
            te = TaskExecutor(
                self._rpc,
                conf,
                self.resource_manager.address,
                self.spark,
                ResourceId(f"taskmanager-{i}"),
            )
            te.start()
            self.task_executors.append(te)
        self._job_client = JobClient(self._rpc, self.dispatcher.address)
        self._job_client.start()
        return self

    def _start_spark(self) -> None:
        try:
            factory = self._spark_factory
            if factory is None:
                from millrace.spark.spark_session import create_spark_session as factory
            session = factory(self.configuration)
        except BaseException as error:
            self._spark.set_exception(error)
            return
        self._spark.set_result(session)
        if self._closed:  # closed while Spark was starting: stop it here
            self._stop_spark()

    def spark(self) -> Any:
        """The shared SparkSession; blocks until it started. Raises what starting raised."""
        return self._spark.result()

    @property
    def spark_started(self) -> Future[Any]:
        return self._spark

    @property
    def job_client(self) -> JobClientGateway:
        """Gateway of the cluster's JobClient. Raises RuntimeError before ``start``."""
        if self._job_client is None:
            raise RuntimeError("the MiniCluster is not started")
        return self._job_client.get_self_gateway(JobClientGateway)

    def close(self, timeout: float = 30.0) -> None:
        """Stop endpoints, I/O threads and (if started here) Spark and its JVM; idempotent."""
        self._closed = True
        try:
            if self._rpc is not None:
                rpc, self._rpc = self._rpc, None
                error = rpc.close_async().exception(timeout=timeout)
                if error is not None:
                    logger.warning("closing the RPC service: %s", error)
        except TimeoutError:
            logger.warning("endpoints did not stop within %.0f s; stopping the rest", timeout)
        finally:
            if self._io is not None:
                self._io.shutdown(wait=False, cancel_futures=True)
                self._io = None
            self._stop_spark()

    def _stop_spark(self) -> None:
        """Stop the session this cluster started, once it is up (it may still be starting)."""
        with self._spark_lock:
            started_here = self._given_spark is None
            ready = self._spark.done() and self._spark.exception() is None
            if started_here and ready and not self._spark_stopped:
                from millrace.spark.spark_session import stop_spark_session

                self._spark_stopped = True
                stop_spark_session(self._spark.result())

    def __enter__(self) -> MiniCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
