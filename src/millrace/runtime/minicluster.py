"""MiniCluster: the whole cluster in one process, on the in-process RPC transport.

Starts a ResourceManager, a Dispatcher, ``minicluster.number-of-taskmanagers`` TaskExecutors
with ``taskmanager.numberOfTaskSlots`` slots each, a JobClient, and one SparkSession shared by
the TaskManagers (started on a background thread while the control plane comes up). ``close``
stops every endpoint, the I/O threads and, if the cluster started it, Spark and its JVM.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from millrace.config import ClusterOptions, Configuration
from millrace.rpc import LocalRpcService
from millrace.runtime.client.job_client import JobClient, JobClientGateway
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.io_executor import create_io_executor, shutdown_io_executor
from millrace.runtime.resourcemanager.resource_manager import ResourceManager
from millrace.runtime.taskexecutor.task_executor import TaskExecutor
from millrace.types import ResourceId

__all__ = ["MiniCluster"]

logger = logging.getLogger(__name__)

_IO_SHUTDOWN_TIMEOUT = 10.0  # seconds close waits for running I/O work


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
        from millrace.spark.spark_session import BackgroundSparkSession

        self.configuration = configuration or Configuration()
        self._spark = BackgroundSparkSession(
            self.configuration, given=spark_session, factory=spark_factory
        )
        self._rpc: LocalRpcService | None = None
        self._io: ThreadPoolExecutor | None = None
        self.resource_manager: ResourceManager | None = None
        self.dispatcher: Dispatcher | None = None
        self.task_executors: list[TaskExecutor] = []
        self._job_client: JobClient | None = None

    def start(self) -> MiniCluster:
        """Start Spark (in the background) and every endpoint; returns self."""
        self.configuration.validate()
        self._spark.start()
        conf = self.configuration
        self._rpc = LocalRpcService("minicluster", configuration=conf)
        self._io = create_io_executor()
        self.resource_manager = ResourceManager(self._rpc, configuration=conf)
        self.resource_manager.start()
        self.dispatcher = Dispatcher(self._rpc, conf, self.resource_manager.address, self._io)
        self.dispatcher.start()
        for i in range(conf.get(ClusterOptions.NUM_TASK_MANAGERS)):
            te = TaskExecutor(
                self._rpc,
                conf,
                self.resource_manager.address,
                self._spark.started,
                ResourceId(f"taskmanager-{i}"),
            )
            te.start()
            self.task_executors.append(te)
        self._job_client = JobClient(self._rpc, self.dispatcher.address)
        self._job_client.start()
        return self

    def spark(self) -> Any:
        """The shared SparkSession; blocks until it started. Raises what starting raised."""
        return self._spark.get()

    @property
    def spark_started(self) -> Future[Any]:
        return self._spark.started

    @property
    def job_client(self) -> JobClientGateway:
        """Gateway of the cluster's JobClient. Raises RuntimeError before ``start``."""
        if self._job_client is None:
            raise RuntimeError("the MiniCluster is not started")
        return self._job_client.get_self_gateway(JobClientGateway)

    def close(self, timeout: float = 30.0) -> None:
        """Stop endpoints, I/O threads and (if started here) Spark and its JVM; idempotent."""
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
                shutdown_io_executor(self._io, _IO_SHUTDOWN_TIMEOUT)
                self._io = None
            self._spark.stop()

    def __enter__(self) -> MiniCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
