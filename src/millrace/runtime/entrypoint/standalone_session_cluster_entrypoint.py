"""StandaloneSessionClusterEntrypoint: the JobManager process of a standalone cluster (seed 003).

One process hosts the ResourceManager, the Dispatcher (which starts a JobMaster per job) and
the REST API, on one TcpRpcService at ``jobmanager.rpc.address:jobmanager.rpc.port``.
TaskManager processes register at ``tcp://<address>/resourcemanager``; clients submit to
``tcp://<address>/dispatcher``. Without high availability, jobs live as long as this process;
TaskManagers that lose it fail their tasks and keep registering until a JobManager answers at
the same address again.

With ``high-availability.type: zookeeper`` (seed 003) the process is a contender: it serves RPC
at once but runs the ResourceManager, the Dispatcher and the REST API only while it leads. On
leadership granted it starts them under the new leader session (their fencing token), the
Dispatcher recovers the stored jobs, and their addresses are published in ZooKeeper; on
leadership revoked it stops them at once, suspending the jobs (nothing cancelled or cleaned)
for the next leader, and contends again as a standby.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from millrace.config import (
    Configuration,
    JobManagerOptions,
    RestOptions,
    RpcOptions,
    SecurityOptions,
)
from millrace.errors import ConfigError
from millrace.rpc import RpcEndpoint
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.runtime.checkpoint.savepoint_targets import SavepointTargets
from millrace.runtime.control_messages import control_message_codec
from millrace.runtime.dispatcher.dispatcher import Dispatcher
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.dispatcher.rest_endpoint import (
    DispatcherRestEndpoint,
    create_rest_app,
    rest_token,
)
from millrace.runtime.dispatcher.standby_rest import create_standby_rest_app
from millrace.runtime.entrypoint.cluster_files import ClusterFiles, ProcessInfo
from millrace.runtime.entrypoint.process_termination import ProcessTermination
from millrace.runtime.highavailability.high_availability_services import (
    HighAvailabilityServices,
    NoHighAvailabilityServices,
    ZooKeeperHaServices,
    create_high_availability_services,
)
from millrace.runtime.highavailability.leader_retrieval import (
    LeaderInformation,
    ZooKeeperLeaderRetrieval,
)
from millrace.runtime.highavailability.zookeeper_paths import (
    DISPATCHER,
    RESOURCE_MANAGER,
    REST_SERVER,
)
from millrace.runtime.io_executor import create_io_executor, shutdown_io_executor
from millrace.runtime.metrics.flink_collectors import JobManagerCollector
from millrace.runtime.metrics.prometheus_reporter import (
    PrometheusReporter,
    start_prometheus_reporter,
)
from millrace.runtime.resourcemanager.resource_manager import ResourceManager
from millrace.runtime.resourcemanager.resource_manager_gateway import ResourceManagerGateway
from millrace.runtime.rpc_utils import create_remote_rpc_service

__all__ = ["StandaloneSessionClusterEntrypoint"]

logger = logging.getLogger(__name__)

_IO_SHUTDOWN_TIMEOUT = 10.0  # seconds close waits for running I/O work


class StandaloneSessionClusterEntrypoint:
    """Starts and stops the JobManager's components.

    Args:
        configuration: The cluster's configuration (validated by ``start``).
        termination: Receives fatal errors of the endpoints (escalation); a new one if None.

    Attributes:
        rpc_address: ``host:port`` of the RPC service, once started.
        rest_url: ``http://host:port`` of the REST API, once started.

    Raises:
        ConfigError: From ``start``, for an invalid value or a missing TLS file.
        OSError: From ``start``, if a port is taken.

    Threading:
        ``start`` and ``close`` from one thread.
    """

    def __init__(
        self, configuration: Configuration, termination: ProcessTermination | None = None
    ) -> None:
        self.configuration = configuration
        self.termination = termination or ProcessTermination()
        self._rpc: TcpRpcService | None = None
        self._io: ThreadPoolExecutor | None = None
        self._rest: DispatcherRestEndpoint | None = None
        self._ha: HighAvailabilityServices | None = None
        self._leader_endpoints: list[RpcEndpoint] = []
        self._rest_port = configuration.get(RestOptions.PORT)  # kept across leader and standby
        self._leader_rest: str | None = None
        self._leader_rest_retrieval: ZooKeeperLeaderRetrieval | None = None
        self._files = ClusterFiles(configuration)
        self._info: ProcessInfo | None = None
        self._reporter: PrometheusReporter | None = None
        # The leader's (Dispatcher, ResourceManager) gateways for the metrics collector, an
        # immutable pair replaced as a whole (None while not leading).
        self._leader_gateways: tuple[DispatcherGateway, ResourceManagerGateway] | None = None
        self.rpc_address = ""
        self.rest_url = ""

    def start(self) -> StandaloneSessionClusterEntrypoint:
        """Start the RPC service and contend for leadership; returns self.

        Without HA this process leads at once: the ResourceManager, Dispatcher and REST API run
        when this returns. With ZooKeeper they start whenever leadership is granted.

        Raises:
            ConfigError: For an invalid value or a missing TLS file.
            HighAvailabilityError: If ZooKeeper does not answer.
            OSError: If a port is taken.
        """
        conf = self.configuration
        conf.validate()
        _rest_tls_files(conf)  # a missing file fails now, not at the first leadership
        try:
            self._rpc = create_remote_rpc_service(
                "jobmanager",
                conf,
                host=conf.get(JobManagerOptions.RPC_ADDRESS),
                port=conf.get(JobManagerOptions.RPC_PORT),
                create_secret=True,
                bind_host=conf.get(JobManagerOptions.BIND_HOST),
            )
            self._rpc.set_fatal_error_handler(self.termination.on_fatal_error)
            self.rpc_address = self._rpc.authority
            self._io = create_io_executor()
            self._ha = create_high_availability_services(conf)
            if isinstance(self._ha, ZooKeeperHaServices):  # a standby redirects to the leader
                self._leader_rest_retrieval = ZooKeeperLeaderRetrieval(
                    self._ha.client, self._ha.paths, REST_SERVER, self._leader_rest_changed
                )
                self._serve_rest(create_standby_rest_app(lambda: self._leader_rest))
            collector = JobManagerCollector(
                lambda: self._leader_gateways, conf.get(RpcOptions.ASK_TIMEOUT)
            )
            self._reporter = start_prometheus_reporter(conf, [collector], "jobmanager")
            self._ha.start_leader_election(self, self.rpc_address)
        except BaseException:
            self.close()
            raise
        metrics_url = self._reporter.url if self._reporter is not None else ""
        self._info = ProcessInfo(
            "jobmanager", os.getpid(), self.rpc_address, self.rest_url, metrics_url
        )
        self._files.register(self._info)
        logger.info("JobManager at %s, REST API at %s", self.rpc_address, self.rest_url or "-")
        return self

    # LeaderContender (the election's thread; without HA, ``start``'s) --------------------------

    def grant_leadership(self, leader_session_id: str) -> None:
        """Start the ResourceManager, the Dispatcher (which recovers the stored jobs) and the
        REST API under ``leader_session_id``, then publish their addresses."""
        conf, rpc, io, ha = self.configuration, self._rpc, self._io, self._ha
        assert rpc is not None and io is not None and ha is not None
        high_availability = not isinstance(ha, NoHighAvailabilityServices)
        leader = ha.leader_services(leader_session_id) if high_availability else None
        resource_manager = ResourceManager(
            rpc, configuration=conf, leader_session_id=leader_session_id
        )
        resource_manager.start()
        dispatcher = Dispatcher(rpc, conf, resource_manager.address, io, leader)
        dispatcher.start()
        self._leader_endpoints = [dispatcher, resource_manager]
        self._leader_gateways = (
            dispatcher.get_self_gateway(DispatcherGateway),
            resource_manager.get_self_gateway(ResourceManagerGateway),
        )
        app = create_rest_app(
            *self._leader_gateways,
            control_message_codec(),
            rest_token(rpc.secret),
            max_body_bytes=conf.get(RpcOptions.FRAMESIZE),
            timeout=conf.get(RpcOptions.ASK_TIMEOUT),
            savepoint_targets=SavepointTargets.from_configuration(conf),
            store_duration=conf.get(RestOptions.ASYNC_STORE_DURATION),
        )
        self._serve_rest(app)
        if leader is not None:
            leader.publish(RESOURCE_MANAGER, resource_manager.address)
            leader.publish(DISPATCHER, dispatcher.address)
            leader.publish(REST_SERVER, self.rest_url)
        logger.info("leading (session %s); REST API at %s", leader_session_id, self.rest_url)

    def revoke_leadership(self) -> None:
        """Stop the REST API, the Dispatcher (suspending its jobs) and the ResourceManager;
        the REST API's port then redirects to the next leader."""
        self._leader_gateways = None
        if self._rest is not None:
            self._rest.close()
            self._rest = None
        self.rest_url = ""
        endpoints, self._leader_endpoints = self._leader_endpoints, []
        timeout = 3 * self.configuration.get(RpcOptions.ASK_TIMEOUT)
        for endpoint in endpoints:
            try:
                endpoint.close_async().result(timeout=timeout)
            except Exception as error:  # a stuck endpoint must not keep the standby from coming
                logger.warning("stopping %s: %r", endpoint.endpoint_id, error)
        if self._leader_rest_retrieval is not None and self._rpc is not None:
            self._serve_rest(create_standby_rest_app(lambda: self._leader_rest))

    def _serve_rest(self, app: Any) -> None:
        """Serve ``app`` as this process's REST API, on the port the previous one had."""
        conf = self.configuration
        if self._rest is not None:
            self._rest.close()
        certificate, key = _rest_tls_files(conf)
        self._rest = DispatcherRestEndpoint(
            app,
            conf.get(RestOptions.BIND_ADDRESS),
            self._rest_port,
            ssl_certificate=certificate,
            ssl_key=key,
        ).start()
        self.rest_url, self._rest_port = self._rest.url, self._rest.port

    def _leader_rest_changed(self, leader: LeaderInformation | None) -> None:
        """kazoo's thread: the leader's REST URL (read by the standby app per request)."""
        self._leader_rest = leader.address if leader is not None else None

    def close(self, timeout: float = 30.0) -> None:
        """Give up leadership (HA: jobs suspended for the next leader), stop the REST API,
        every endpoint (without HA, running jobs are cancelled) and the I/O threads.

        Idempotent.
        """
        if self._info is not None:
            self._files.unregister(self._info)
            self._info = None
        if self._leader_rest_retrieval is not None:
            self._leader_rest_retrieval.stop()
        if self._ha is not None:
            ha, self._ha = self._ha, None
            try:
                ha.close()
            except Exception as failure:
                logger.warning("closing the high-availability services: %r", failure)
        if self._rest is not None:
            self._rest.close()
            self._rest = None
        if self._reporter is not None:
            reporter, self._reporter = self._reporter, None
            reporter.close()
        if self._rpc is not None:
            rpc, self._rpc = self._rpc, None
            try:
                error = rpc.close_async().exception(timeout=timeout)
                if error is not None:
                    logger.warning("closing the RPC service: %s", error)
            except TimeoutError:
                logger.warning("endpoints did not stop within %.0f s", timeout)
        if self._io is not None:
            shutdown_io_executor(self._io, _IO_SHUTDOWN_TIMEOUT)
            self._io = None

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


def _rest_tls_files(conf: Configuration) -> tuple[str | None, str | None]:
    """``(certificate, key)`` of the REST API with ``security.ssl.rest.enabled``, else Nones.

    Raises:
        ConfigError: If HTTPS is enabled and a file is missing; names the key.
    """
    if not conf.get(SecurityOptions.SSL_REST_ENABLED):
        return None, None
    files = []
    for option in (SecurityOptions.SSL_REST_CERTIFICATE, SecurityOptions.SSL_REST_KEY):
        value = conf.get(option)
        if not value or not Path(value).is_file():
            raise ConfigError(option.key, value, "an existing PEM file (security.ssl.rest.enabled)")
        files.append(value)
    return files[0], files[1]
