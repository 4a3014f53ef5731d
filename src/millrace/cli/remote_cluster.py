"""RemoteCluster: the CLI's connection to a standalone cluster's JobManager.

A client TcpRpcService (loopback, any port) proves the cluster secret to the JobManager and
hosts a JobClient endpoint that submits to ``tcp://<jobmanager>/dispatcher``. The JobManager is
``--jobmanager HOST:PORT``; else, with ``high-availability.type: zookeeper``, the Dispatcher's
current leader retrieved from ZooKeeper (and followed while the client runs, so an attached run
outlives a JobManager failover); else the one recorded in this machine's cluster directory, else
``jobmanager.rpc.address:jobmanager.rpc.port``.
"""

from __future__ import annotations

import functools
from typing import Any

from millrace.config import (
    Configuration,
    HighAvailabilityMode,
    HighAvailabilityOptions,
    JobManagerOptions,
    RpcOptions,
)
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.runtime.client.job_client import JobClient, JobClientGateway
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.entrypoint.cluster_files import ClusterFiles
from millrace.runtime.highavailability.leader_retrieval import (
    ZooKeeperLeaderRetrieval,
    retrieve_leader,
)
from millrace.runtime.highavailability.zookeeper_client import (
    start_zookeeper_client,
    stop_zookeeper_client,
)
from millrace.runtime.highavailability.zookeeper_paths import DISPATCHER, ZooKeeperPaths
from millrace.runtime.rpc_utils import create_remote_rpc_service, parse_host_port
from millrace.types import DEFAULT_LEADER_SESSION_ID

__all__ = ["RemoteCluster", "resolve_jobmanager"]


def resolve_jobmanager(configuration: Configuration, jobmanager: str | None) -> str:
    """``host:port`` of the JobManager to talk to (see the module docstring).

    Raises:
        ValueError: If ``jobmanager`` is not ``HOST:PORT``.
        HighAvailabilityError: With ZooKeeper HA, if no leader is found within the lookup
            timeout (or ZooKeeper does not answer).
    """
    if jobmanager:
        host, port = parse_host_port(jobmanager)
        return f"{host}:{port}"
    if _high_availability(configuration):
        client = start_zookeeper_client(configuration)
        try:
            leader = retrieve_leader(
                client,
                ZooKeeperPaths.from_configuration(configuration),
                DISPATCHER,
                configuration.get(RpcOptions.ASK_TIMEOUT),
            )
        finally:
            stop_zookeeper_client(client)
        return leader.address.removeprefix("tcp://").split("/", 1)[0]
    recorded = ClusterFiles(configuration).jobmanager()
    if recorded is not None:
        return recorded.rpc_address
    host = configuration.get(JobManagerOptions.RPC_ADDRESS)
    return f"{host}:{configuration.get(JobManagerOptions.RPC_PORT)}"


class RemoteCluster:
    """Client side of a standalone cluster.

    Args:
        configuration: ``security.*`` (the secret) and ``rpc.*`` keys.
        jobmanager: ``host:port`` of the JobManager's RPC service.

    Raises:
        ConfigError: From ``start``, if the secret cannot be read.

    Threading:
        ``start`` and ``close`` from one thread; gateways from any.
    """

    def __init__(self, configuration: Configuration, jobmanager: str) -> None:
        self.configuration = configuration
        self.jobmanager = jobmanager
        self._rpc: TcpRpcService | None = None
        self._job_client: JobClient | None = None
        self._zookeeper: Any = None
        self._retrieval: ZooKeeperLeaderRetrieval | None = None

    def start(self) -> RemoteCluster:
        """Start the client service and its JobClient; returns self."""
        self._rpc = create_remote_rpc_service(
            "client", self.configuration, host="127.0.0.1", port=0
        )
        if _high_availability(self.configuration):  # follow the Dispatcher's leader
            self._job_client = client = JobClient(self._rpc, None)
            client.start()
            self._zookeeper = start_zookeeper_client(self.configuration)
            self._retrieval = ZooKeeperLeaderRetrieval(
                self._zookeeper,
                ZooKeeperPaths.from_configuration(self.configuration),
                DISPATCHER,
                lambda leader: client.run_async(
                    functools.partial(client.notify_leader_address, leader)
                ),
            )
            return self
        self._job_client = JobClient(self._rpc, f"tcp://{self.jobmanager}/dispatcher")
        self._job_client.start()
        return self

    @property
    def job_client(self) -> JobClientGateway:
        """The JobClient (SubmitJobWait, SubmitJobDetached)."""
        assert self._job_client is not None, "start() first"
        return self._job_client.get_self_gateway(JobClientGateway)

    def dispatcher(self) -> DispatcherGateway:
        """A gateway to the Dispatcher.

        Raises:
            RecipientUnreachableError: If the JobManager does not answer within the lookup
                timeout.
        """
        assert self._rpc is not None, "start() first"
        lookup = 2 * self.configuration.get(RpcOptions.LOOKUP_TIMEOUT)
        address, token = f"tcp://{self.jobmanager}/dispatcher", DEFAULT_LEADER_SESSION_ID
        if self._zookeeper is not None:  # the current leader and its DispatcherId
            paths = ZooKeeperPaths.from_configuration(self.configuration)
            leader = retrieve_leader(self._zookeeper, paths, DISPATCHER, lookup)
            address, token = leader.address, leader.leader_session_id
        return self._rpc.connect(address, DispatcherGateway, fencing_token=token).result(lookup)

    def close(self) -> None:
        """Stop the JobClient and the client service. Idempotent."""
        if self._retrieval is not None:
            self._retrieval.stop()
        if self._zookeeper is not None:
            client, self._zookeeper = self._zookeeper, None
            stop_zookeeper_client(client)
        if self._rpc is not None:
            rpc, self._rpc = self._rpc, None
            rpc.close_async().exception(timeout=self.configuration.get(RpcOptions.ASK_TIMEOUT))

    def __enter__(self) -> RemoteCluster:
        return self if self._rpc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _high_availability(configuration: Configuration) -> bool:
    return configuration.get(HighAvailabilityOptions.TYPE) is HighAvailabilityMode.ZOOKEEPER
