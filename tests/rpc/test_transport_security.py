"""The cluster secret (file, mode 0600, given by config) and mutual TLS over loopback."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import pytest
import trustme

from millrace.config import Configuration
from millrace.errors import ConfigError, RecipientUnreachableError
from millrace.rpc import RpcEndpoint, RpcGateway
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec

WAIT = 10.0
CONF = {"rpc.lookup-timeout": "1 s", "rpc.ask-timeout": "5 s"}


def test_cluster_start_creates_a_private_secret_file_that_others_read(tmp_path) -> None:
    configuration = Configuration({"io.tmp.dirs": str(tmp_path)})
    created = TransportSecurity.from_configuration(configuration, create_secret=True)
    path = tmp_path / "cluster" / "secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(created.secret) >= 32
    assert TransportSecurity.from_configuration(configuration).secret == created.secret


def test_missing_secret_file_names_the_key_and_the_fix(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"security\.cluster-secret\.file.*cluster start"):
        TransportSecurity.from_configuration(Configuration({"io.tmp.dirs": str(tmp_path)}))


def test_secret_file_readable_by_others_is_refused(tmp_path) -> None:
    path = tmp_path / "secret"
    path.write_text("0123456789abcdef0123456789abcdef")
    os.chmod(path, 0o644)
    configuration = Configuration({"security.cluster-secret.file": str(path)})
    with pytest.raises(ConfigError, match="mode 0600, not 0644"):
        TransportSecurity.from_configuration(configuration)


def test_short_secret_from_configuration_is_refused() -> None:
    with pytest.raises(ConfigError, match=">= 16 bytes"):
        TransportSecurity.from_configuration(Configuration({"security.cluster-secret": "short"}))


def test_ssl_without_its_files_fails_at_start_naming_the_key() -> None:
    configuration = Configuration(
        {"security.cluster-secret": "x" * 32, "security.ssl.enabled": "true"}
    )
    with pytest.raises(ConfigError, match=r"security\.ssl\.certificate"):
        TransportSecurity.from_configuration(configuration)


class EchoGateway(RpcGateway, Protocol):
    def echo(self, value: str) -> Future[str]: ...


class EchoEndpoint(RpcEndpoint, EchoGateway):
    def __init__(self, service) -> None:
        super().__init__(service, "echo")

    def echo(self, value: str) -> str:
        return value


def tls_files(tmp_path: Path, ca: trustme.CA, name: str) -> dict[str, str]:
    cert = ca.issue_cert("127.0.0.1")
    files = {
        "certificate": tmp_path / f"{name}.pem",
        "key": tmp_path / f"{name}.key",
        "truststore": tmp_path / f"{name}-ca.pem",
    }
    cert.cert_chain_pems[0].write_to_path(str(files["certificate"]))
    cert.private_key_pem.write_to_path(str(files["key"]))
    ca.cert_pem.write_to_path(str(files["truststore"]))
    return {k: str(v) for k, v in files.items()}


def tls_service(name: str, files: dict[str, str]) -> TcpRpcService:
    configuration = Configuration(
        {
            **CONF,
            "security.cluster-secret": "shared-cluster-secret-0123456789",
            "security.ssl.enabled": "true",
            "security.ssl.certificate": files["certificate"],
            "security.ssl.key": files["key"],
            "security.ssl.truststore": files["truststore"],
        }
    )
    return TcpRpcService(
        name,
        security=TransportSecurity.from_configuration(configuration),
        codec=control_message_codec(),
        configuration=configuration,
    )


@pytest.fixture
def services() -> Iterator[list[TcpRpcService]]:
    started: list[TcpRpcService] = []
    yield started
    for service in started:
        service.close_async().result(WAIT)


def test_mutual_tls_carries_calls_between_members_of_one_ca(tmp_path, services) -> None:
    ca = trustme.CA()
    server = tls_service("server", tls_files(tmp_path, ca, "server"))
    client = tls_service("client", tls_files(tmp_path, ca, "client"))
    services += [client, server]
    endpoint = EchoEndpoint(server)
    endpoint.start()
    gateway = client.connect(endpoint.address, EchoGateway).result(WAIT)
    assert gateway.echo("over tls").result(WAIT) == "over tls"


def test_peer_with_a_certificate_of_another_ca_is_rejected(tmp_path, services) -> None:
    server = tls_service("server", tls_files(tmp_path, trustme.CA(), "server"))
    stranger = tls_service("stranger", tls_files(tmp_path, trustme.CA(), "stranger"))
    services += [stranger, server]
    endpoint = EchoEndpoint(server)
    endpoint.start()
    with pytest.raises(RecipientUnreachableError):
        stranger.connect(endpoint.address, EchoGateway).result(WAIT)


def test_plain_tcp_peer_gets_nothing_from_a_tls_service(tmp_path, services) -> None:
    server = tls_service("server", tls_files(tmp_path, trustme.CA(), "server"))
    services.append(server)
    host, port = server.authority.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        sock.sendall(b"\x00\x00\x00\x04ping")
        sock.settimeout(WAIT)
        data = sock.recv(4096)
    assert b"millrace" not in data  # no handshake challenge in the clear


def test_tls_carries_messages_larger_than_the_socket_buffers_from_many_threads(
    tmp_path, services
) -> None:
    ca = trustme.CA()
    server = tls_service("server", tls_files(tmp_path, ca, "server"))
    client = tls_service("client", tls_files(tmp_path, ca, "client"))
    services += [client, server]
    endpoint = EchoEndpoint(server)
    endpoint.start()
    gateway = client.connect(endpoint.address, EchoGateway).result(WAIT)
    values = [f"{i}:" + "x" * (i * 700_000) for i in range(6)]  # up to 3.5 MB each
    with ThreadPoolExecutor(max_workers=6) as pool:
        replies = list(pool.map(lambda v: gateway.echo(v).result(WAIT), values))
    assert replies == values
