"""Without TLS the handshake is bound to its connection (issue 9, case 4).

An attacker who does not know the secret gets a legitimate client to connect to it, relays the
handshake between that client and the real service, then talks to the service on its own: the
service must not execute anything it sends. All on 127.0.0.1; the relay is a thread with
bounded waits.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Protocol

import pytest

from millrace.config import Configuration
from millrace.rpc import RpcEndpoint, RpcGateway
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec

WAIT = 10.0
SECRET = b"channel-binding-test-secret-0123"
CALL, REPLY, LOOKUP, FOUND = 0, 1, 2, 3


class VaultGateway(RpcGateway, Protocol):
    def deposit(self, note: str) -> Future[int]: ...


class Vault(RpcEndpoint, VaultGateway):
    def __init__(self, service: TcpRpcService) -> None:
        super().__init__(service, "vault")
        self.notes: list[str] = []

    def deposit(self, note: str) -> int:
        self.notes.append(note)
        return len(self.notes)


def service(name: str) -> TcpRpcService:
    return TcpRpcService(
        name,
        security=TransportSecurity(SECRET),
        codec=control_message_codec(),
        configuration=Configuration({"rpc.lookup-timeout": "2 s"}),
    )


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def read_until_closed(sock: socket.socket, quiet: float = 3.0) -> tuple[bytes, bool]:
    """What ``sock`` receives until the peer closes it (True) or stays silent for ``quiet``
    seconds with the connection open (False)."""
    sock.settimeout(quiet)
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        return data, False
    return data, True


def relay_frame(source: socket.socket, target: socket.socket) -> None:
    """Forward one length-prefixed frame without looking inside."""
    header = recv_exactly(source, 4)
    target.sendall(header + recv_exactly(source, struct.unpack(">I", header)[0]))


class Relay:
    """Listens on 127.0.0.1; relays the first client's handshake (3 frames) to the service,
    then drops the client and keeps the service connection for itself."""

    def __init__(self, service_port: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(WAIT)
        self.port = self.listener.getsockname()[1]
        self.service_port = service_port
        self.hijacked: Future[socket.socket] = Future()
        self.thread = threading.Thread(target=self._run, name="relay", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            victim, _ = self.listener.accept()
            victim.settimeout(WAIT)
            real = socket.create_connection(("127.0.0.1", self.service_port), timeout=WAIT)
            relay_frame(real, victim)  # the service's challenge, to the victim
            relay_frame(victim, real)  # the victim's answer, signed with the secret
            relay_frame(real, victim)  # the service's proof
            victim.close()
            self.hijacked.set_result(real)
        except Exception as error:
            self.hijacked.set_exception(error)

    def close(self) -> None:
        self.listener.close()
        self.thread.join(WAIT)
        if self.hijacked.done() and self.hijacked.exception(0) is None:
            self.hijacked.result(WAIT).close()


@pytest.fixture
def parties() -> Iterator[tuple[TcpRpcService, TcpRpcService, Vault]]:
    server, client = service("server"), service("victim")
    vault = Vault(server)
    vault.start()
    yield server, client, vault
    for s in (client, server):
        s.close_async().exception(timeout=WAIT)


def test_a_relayed_handshake_gives_the_attacker_nothing(parties) -> None:
    server, victim, vault = parties
    relay = Relay(int(server.authority.rsplit(":", 1)[1]))
    try:
        lured = victim.connect(f"tcp://127.0.0.1:{relay.port}/vault", VaultGateway)
        hijacked = relay.hijacked.result(WAIT)  # authenticated, by the victim's answer
        codec = control_message_codec()  # the attacker knows the format, not the secret
        for message in (
            [LOOKUP, 1, "vault", ["deposit"]],
            [CALL, 2, 1, "deposit", ["attacker's note"], {}, None],
        ):
            payload = codec.encode(message)
            hijacked.sendall(struct.pack(">I", len(payload)) + payload)
        answer, closed = read_until_closed(hijacked)
        with pytest.raises(Exception):  # noqa: B017 - whatever the victim's connect saw
            lured.result(WAIT)
    finally:
        relay.close()
    assert vault.call_async(lambda: list(vault.notes)).result(WAIT) == []
    assert answer == b"", f"the service answered the relay: {answer[:80]!r}"
    assert closed, "the service kept the hijacked connection open"


def test_honest_peers_still_talk_over_the_bound_channel(parties) -> None:
    _, client, vault = parties
    gateway = client.connect(vault.address, VaultGateway).result(WAIT)
    assert [gateway.deposit(f"note {i}").result(WAIT) for i in range(3)] == [1, 2, 3]
