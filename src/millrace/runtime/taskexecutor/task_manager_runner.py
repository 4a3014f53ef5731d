"""TaskManagerRunner: a TaskManager process (Flink's name; seed 000, 003).

One process: a TcpRpcService at ``taskmanager.host`` (port ``taskmanager.rpc.port``, any free
one by default), one TaskExecutor endpoint offering ``taskmanager.numberOfTaskSlots`` slots, and
the process's own SparkSession (local mode by default, ``spark.master`` otherwise). Spark starts
and runs one warm-up job first; then the TaskExecutor registers at
``tcp://<jobmanager>/resourcemanager``, so its slots are offered only when they can run.
The TaskExecutor keeps registering for as long as the JobManager is unreachable; an unexpected
error in it stops the process with exit code 1 (escalation to the process's supervisor).

With ``high-availability.type: zookeeper`` the JobManager is not given: the ResourceManager's
leader is retrieved from ZooKeeper (a watch on its ``connection_info``), and each new leader is
handed to the TaskExecutor, which fails the former leader's tasks and registers anew.
"""

from __future__ import annotations

import functools
import logging
import os
from concurrent.futures import Future
from typing import Any

from millrace.config import (
    Configuration,
    HighAvailabilityMode,
    HighAvailabilityOptions,
    RpcOptions,
    TaskManagerOptions,
)
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.runtime.entrypoint.cluster_files import ClusterFiles, ProcessInfo
from millrace.runtime.entrypoint.process_termination import ProcessTermination
from millrace.runtime.highavailability.leader_retrieval import ZooKeeperLeaderRetrieval
from millrace.runtime.highavailability.zookeeper_client import (
    start_zookeeper_client,
    stop_zookeeper_client,
)
from millrace.runtime.highavailability.zookeeper_paths import RESOURCE_MANAGER, ZooKeeperPaths
from millrace.runtime.metrics.flink_collectors import TaskManagerCollector
from millrace.runtime.metrics.metric_query_service import MetricQueryService
from millrace.runtime.metrics.prometheus_reporter import (
    PrometheusReporter,
    start_prometheus_reporter,
)
from millrace.runtime.rpc_utils import create_remote_rpc_service
from millrace.runtime.taskexecutor.task_executor import TaskExecutor
from millrace.runtime.taskexecutor.task_runtime import TaskRuntime
from millrace.types import ResourceId, new_id

__all__ = ["TaskManagerRunner"]

logger = logging.getLogger(__name__)


class TaskManagerRunner:
    """Starts and stops one TaskManager process's parts.

    Args:
        configuration: The TaskManager's configuration (validated by ``start``).
        jobmanager: ``host:port`` of the JobManager's RPC service (ignored with ZooKeeper HA:
            the leader is retrieved).
        task_runtime: The process's data plane (``SparkTaskRuntime`` with warm-up: the
            TaskManager registers once it ran a first job).
        termination: Receives fatal errors (a new one if None).

    Attributes:
        task_executor: The endpoint, once started.

    Raises:
        ConfigError: From ``start``, if the secret is missing or a value invalid.
        OSError: From ``start``, if the port is taken.

    Threading:
        ``start`` and ``close`` from one thread.
    """

    def __init__(
        self,
        configuration: Configuration,
        jobmanager: str,
        task_runtime: TaskRuntime,
        termination: ProcessTermination | None = None,
    ) -> None:
        self.configuration = configuration
        self.jobmanager = jobmanager
        self.termination = termination or ProcessTermination()
        self._runtime = task_runtime
        self._rpc: TcpRpcService | None = None
        self._files = ClusterFiles(configuration)
        self._info: ProcessInfo | None = None
        self.task_executor: TaskExecutor | None = None
        self._zookeeper: Any = None  # kazoo client under high availability
        self._retrieval: ZooKeeperLeaderRetrieval | None = None
        self._reporter: PrometheusReporter | None = None

    def start(self) -> TaskManagerRunner:
        """Start Spark (in the background), the RPC service and the TaskExecutor."""
        conf = self.configuration
        conf.validate()
        self._rpc = create_remote_rpc_service(
            "taskmanager",
            conf,
            host=conf.get(TaskManagerOptions.HOST),
            port=conf.get(TaskManagerOptions.RPC_PORT),
            bind_host=conf.get(TaskManagerOptions.BIND_HOST),
        )
        self._rpc.set_fatal_error_handler(self.termination.on_fatal_error)
        high_availability = conf.get(HighAvailabilityOptions.TYPE) is HighAvailabilityMode.ZOOKEEPER
        if high_availability:
            self._zookeeper = start_zookeeper_client(conf)
        self._runtime.start()
        port = self._rpc.authority.rsplit(":", 1)[1]
        self.task_executor = TaskExecutor(
            self._rpc,
            conf,
            None if high_availability else f"tcp://{self.jobmanager}/resourcemanager",
            self._runtime,
            ResourceId(f"taskmanager-{port}-{new_id()[:6]}"),
        )
        self._start_metrics(self.task_executor)
        self._runtime.started.add_done_callback(self._spark_started)
        metrics_url = self._reporter.url if self._reporter is not None else ""
        self._info = ProcessInfo("taskmanager", os.getpid(), self._rpc.authority, "", metrics_url)
        self._files.register(self._info)
        logger.info(
            "TaskManager %s at %s, JobManager %s",
            self.task_executor.resource_id,
            self._rpc.authority,
            self.jobmanager,
        )
        return self

    def _start_metrics(self, executor: TaskExecutor) -> None:
        """The MetricQueryService (REST metric paths) and the Prometheus reporter, both
        reading the snapshots the TaskExecutor's tasks publish."""
        assert self._rpc is not None
        snapshots = executor.metric_group.snapshots
        MetricQueryService(self._rpc, executor.resource_id, snapshots).start()
        collector = TaskManagerCollector({executor.resource_id: snapshots})
        self._reporter = start_prometheus_reporter(self.configuration, [collector], "taskmanager")

    def _spark_started(self, started: Future[Any]) -> None:
        """Register only with a warm SparkSession: a slot offered by this TaskManager can run
        a task at once (after a failover too). Without Spark the process stops (exit 1)."""
        error = started.exception()
        if error is not None:
            logger.error("Spark did not start", exc_info=error)
            self.termination.request_stop(f"Spark did not start: {error!r}", exit_code=1)
            return
        if self.task_executor is not None and self._rpc is not None:
            try:
                self.task_executor.start()
            except RuntimeError:  # the process is stopping: the service closed meanwhile
                logger.info("not starting the TaskExecutor: the TaskManager stops")
                return
            if self._zookeeper is not None:
                executor = self.task_executor
                self._retrieval = ZooKeeperLeaderRetrieval(
                    self._zookeeper,
                    ZooKeeperPaths.from_configuration(self.configuration),
                    RESOURCE_MANAGER,
                    lambda leader: executor.run_async(
                        functools.partial(executor.notify_leader_address, leader)
                    ),
                )

    def close(self) -> None:
        """Cancel the tasks, stop the endpoint and Spark with its JVM. Idempotent."""
        if self._info is not None:
            self._files.unregister(self._info)
            self._info = None
        if self._reporter is not None:
            reporter, self._reporter = self._reporter, None
            reporter.close()
        if self._retrieval is not None:
            self._retrieval.stop()
        if self._zookeeper is not None:
            client, self._zookeeper = self._zookeeper, None
            stop_zookeeper_client(client)
        if self._rpc is not None:
            rpc, self._rpc = self._rpc, None
            timeout = 3 * self.configuration.get(RpcOptions.ASK_TIMEOUT)
            try:
                error = rpc.close_async().exception(timeout=timeout)
                if error is not None:
                    logger.warning("closing the RPC service: %s", error)
            except TimeoutError:
                logger.warning("the TaskExecutor did not stop within %.0f s", timeout)
        self._runtime.stop()

    def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT or a fatal error, close; returns the exit code.

        Threading:
            The process's main thread (installs signal handlers).
        """
        self.termination.install_signal_handlers()
        self.start()
        try:
            return self.termination.wait()
        finally:
            self.close()
