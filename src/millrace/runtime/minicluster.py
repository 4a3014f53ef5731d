"""MiniCluster: the whole cluster in one process, on the in-process RPC transport.

Starts a ResourceManager, a Dispatcher, ``minicluster.number-of-taskmanagers`` TaskExecutors
with ``taskmanager.numberOfTaskSlots`` slots each, a JobClient, and the data plane the
TaskManagers share (a ``TaskRuntime``, injected: Spark's is
``millrace.spark.spark_task_runtime.SparkTaskRuntime``, started in the background while the
control plane comes up). ``close`` stops every endpoint, the I/O threads and the data plane.
With ``metrics.reporters`` given explicitly (``-D metrics.reporters=prom``; an embedded
cluster is a development tool, and a test suite starts many) it also serves the Prometheus
metrics of its JobManager and TaskManagers (``metrics_url``).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from millrace.config import ClusterOptions, Configuration, MetricOptions, RpcOptions
from millrace.rpc import LocalRpcService
from millrace.runtime.client.job_client import JobClient, JobClientGateway
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.io_executor import create_io_executor, shutdown_io_executor
from millrace.runtime.metrics.flink_collectors import JobManagerCollector, TaskManagerCollector
from millrace.runtime.metrics.prometheus_reporter import (
    PrometheusReporter,
    start_prometheus_reporter,
)
from millrace.runtime.resourcemanager.resource_manager import ResourceManager
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
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
        self._reporter: PrometheusReporter | None = None
        self.metrics_url = ""  # the Prometheus reporter's, when started

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
        if conf.contains(MetricOptions.REPORTERS):
            self._start_reporter(self.dispatcher, self.resource_manager)
        return self

    def _start_reporter(self, dispatcher: Dispatcher, resource_manager: ResourceManager) -> None:
        gateways = (
            dispatcher.get_self_gateway(DispatcherGateway),
            resource_manager.get_self_gateway(ResourceManagerGateway),
        )
        task_managers = {
            str(te.resource_id): te.metric_group.snapshots for te in self.task_executors
        }
        timeout = self.configuration.get(RpcOptions.ASK_TIMEOUT)
        collectors = [
            JobManagerCollector(lambda: gateways, timeout),
            TaskManagerCollector(task_managers),
        ]
        self._reporter = start_prometheus_reporter(
            self.configuration, collectors, "embedded cluster"
        )
        self.metrics_url = self._reporter.url if self._reporter is not None else ""

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
        if self._reporter is not None:
            reporter, self._reporter = self._reporter, None
            reporter.close()
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
