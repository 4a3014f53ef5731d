"""MiniCluster: the whole cluster in one process, on the in-process RPC transport.

Starts a ResourceManager, a Dispatcher, ``minicluster.number-of-taskmanagers`` TaskExecutors
with ``taskmanager.numberOfTaskSlots`` slots each, a JobClient, and the data plane the
TaskManagers share (a ``TaskRuntime``, injected: Spark's is
``millrace.spark.spark_task_runtime.SparkTaskRuntime``, started in the background while the
control plane comes up). ``close`` stops every endpoint, the I/O threads and the data plane.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from millrace.config import ClusterOptions, Configuration
from millrace.rpc import LocalRpcService
from millrace.runtime.client.job_client import JobClient, JobClientGateway
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.io_executor import create_io_executor, shutdown_io_executor
from millrace.runtime.resourcemanager.resource_manager import ResourceManager
from millrace.runtime.taskexecutor.task_executor import TaskExecutor
from millrace.runtime.taskexecutor.task_runtime import TaskRuntime
from millrace.types import ResourceId

__all__ = ["MiniCluster"]

logger = logging.getLogger(__name__)

_IO_SHUTDOWN_TIMEOUT = 10.0  # seconds close waits for running I/O work


class MiniCluster:
    """An embedded cluster.

    Args:
        configuration: Cluster configuration (validated on ``start``).
        task_runtime: The data plane of the TaskManagers (started and stopped here).

    Threading:
        ``start`` and ``close`` from one thread; ``job_client`` from any.

    Raises:
        ConfigError: From ``start``, if a configuration value is invalid.
    """

    def __init__(
        self,
        configuration: Configuration,
        task_runtime: TaskRuntime,
    ) -> None:
        self.configuration = configuration
        self._runtime = task_runtime
        self._rpc: LocalRpcService | None = None
        self._io: ThreadPoolExecutor | None = None
        self.resource_manager: ResourceManager | None = None
        self.dispatcher: Dispatcher | None = None
        self.task_executors: list[TaskExecutor] = []
        self._job_client: JobClient | None = None

    def start(self) -> MiniCluster:
        """Start Spark (in the background) and every endpoint; returns self."""
        self.configuration.validate()
        self._runtime.start()
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
                self._runtime,
                ResourceId(f"taskmanager-{i}"),
            )
            te.start()
            self.task_executors.append(te)
        self._job_client = JobClient(self._rpc, self.dispatcher.address)
        self._job_client.start()
        return self

    @property
    def task_runtime(self) -> TaskRuntime:
        """The TaskManagers' data plane."""
        return self._runtime

    @property
    def job_client(self) -> JobClientGateway:
        """Gateway of the cluster's JobClient. Raises RuntimeError before ``start``."""
        if self._job_client is None:
            raise RuntimeError("the MiniCluster is not started")
        return self._job_client.get_self_gateway(JobClientGateway)

    def close(self, timeout: float = 30.0) -> None:
        """Stop endpoints, I/O threads and the data plane; idempotent."""
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
            self._runtime.stop()

    def __enter__(self) -> MiniCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
