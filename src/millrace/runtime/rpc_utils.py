"""Helpers that build the RPC services of the cluster's processes (Flink's RpcUtils)."""

from __future__ import annotations

from millrace.config import Configuration
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec

__all__ = ["create_remote_rpc_service", "parse_host_port"]


def create_remote_rpc_service(
    name: str,
    configuration: Configuration,
    *,
    host: str,
    port: int,
    create_secret: bool = False,
    bind_host: str | None = None,
) -> TcpRpcService:
    """A TcpRpcService with the cluster's secret, TLS settings and control-message codec.

    Args:
        name: Service name (threads, logs).
        configuration: ``rpc.*`` and ``security.*`` keys.
        host: Address to advertise (and to bind, unless ``bind_host`` is given).
        port: Port (0: any free port).
        create_secret: Create the secret file if missing (the JobManager at cluster start).
        bind_host: Interface to bind (``jobmanager.bind-host``, ``taskmanager.bind-host``);
            None or empty: ``host``.

    Raises:
        ConfigError: If the secret or TLS files are missing or invalid.
        OSError: If the port cannot be bound.
    """
    security = TransportSecurity.from_configuration(configuration, create_secret=create_secret)
    return TcpRpcService(
        name,
        security=security,
        codec=control_message_codec(),
        configuration=configuration,
        host=host,
        port=port,
        bind_host=bind_host or None,
    )


def parse_host_port(value: str, *, what: str = "--jobmanager") -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``.

    Raises:
        ValueError: If ``value`` is not ``host:port`` with a port in 1..65535; names ``what``.
    """
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} {value!r}: expected HOST:PORT, e.g. 127.0.0.1:6123")
    return host, int(port)
