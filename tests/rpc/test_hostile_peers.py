"""A TcpRpcService in its own process against peers that do not play by the rules (issue 9,
cases 1 and 2): a nested handshake answer before authentication, floods of silent connections,
a silent handshake, an authenticated peer that freezes. Every socket is on 127.0.0.0/8; the
service and client processes are stopped by pid.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import time
from collections.abc import Callable, Iterator

import msgpack
import pytest

from millrace.config import Configuration
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec
from tests.rpc.connections import heard_through, open_connections
from tests.rpc.raw_peer import CALL, RawPeer
from tests.rpc.service_process import (
    ServiceProcess,
    StoreGateway,
    client_process,
    service_process,
)

pytestmark = pytest.mark.slow  # starts service and client processes

SECRET = b"hostile-peers-test-secret-0123456789"
WAIT = 20.0  # seconds any single wait of these tests may take before it fails


def wait_until(condition: Callable[[], bool], what: str, seen: Callable[[], object]) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"waited {WAIT:g} s for {what}; saw {seen()}")


def silent_socket(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT, source_address=(source, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
    return sock


def answered_or_closed(sock: socket.socket) -> str:
    """``"hello"`` if the service sent its challenge, ``"closed"`` if it closed the socket."""
    try:
        data = sock.recv(4)
    except ConnectionResetError:
        return "closed"
    return "hello" if data else "closed"


@pytest.fixture
def client() -> Iterator[TcpRpcService]:
    service = TcpRpcService(
        "honest-client",
        security=TransportSecurity(SECRET),
        codec=control_message_codec(),
        configuration=Configuration({"rpc.lookup-timeout": "10 s", "rpc.idle-timeout": "1500 ms"}),
    )
    yield service
    service.close_async().exception(timeout=WAIT)


def store(client: TcpRpcService, service: ServiceProcess) -> StoreGateway:
    return client.connect(f"tcp://127.0.0.1:{service.port}/store", StoreGateway).result(WAIT)


def test_nested_handshake_answer_does_not_crash_a_process_with_small_stacks(
    tmp_path, client
) -> None:
    nested = msgpack.packb([1])
    while len(nested) < 240:  # as many nested extension values as fit a handshake frame
        nested = msgpack.packb(msgpack.ExtType(1, nested))
    with service_process(tmp_path, SECRET, stack_kib=512) as service:
        with socket.create_connection(("127.0.0.1", service.port), timeout=WAIT) as sock:
            sock.recv(1024)  # the challenge
            sock.sendall(struct.pack(">I", len(nested)) + nested)  # no secret needed
            try:
                while sock.recv(1024):
                    pass  # until the service closes this connection (or dies)
            except ConnectionResetError:
                pass
        assert store(client, service).size().result(WAIT) == 0, service.describe()
        assert service.alive(), service.describe()


def test_silent_connections_are_capped_in_descriptors_and_memory(tmp_path, client) -> None:
    settings = {"rpc.lookup-timeout": "60 s", "rpc.handshake.timeout": "30 s"}
    with service_process(tmp_path, SECRET, settings) as service:
        gateway = store(client, service)  # an honest peer, connected before the flood
        assert gateway.size().result(WAIT) == 0
        descriptors, rss = service.descriptors(), service.rss_bytes()
        flood = [
            silent_socket(service.port, f"127.0.0.{2 + i // 16}") for i in range(400)
        ]  # 16 from each of 25 addresses: only the global cap (128) can bite
        try:
            outcomes = [answered_or_closed(s) for s in flood]
            held = service.descriptors() - descriptors
            grown = service.rss_bytes() - rss
            assert outcomes.count("hello") <= 128, outcomes.count("hello")
            assert held <= 128 + 8, f"{held} more descriptors for 400 silent connections"
            assert grown < 24 * 1024 * 1024, f"{grown} more bytes for 400 silent connections"
            assert gateway.put(b"during the flood").result(WAIT) == 16
        finally:
            for sock in flood:
                sock.close()
        wait_until(
            lambda: service.descriptors() <= descriptors,
            f"the descriptors back to {descriptors}",
            service.descriptors,
        )
        assert "rpc.handshake.max-pending=128" in service.log()


def test_silent_connections_from_one_address_are_capped(tmp_path) -> None:
    settings = {"rpc.lookup-timeout": "60 s", "rpc.handshake.timeout": "30 s"}
    with service_process(tmp_path, SECRET, settings) as service:
        flood = [silent_socket(service.port) for _ in range(24)]
        try:
            outcomes = [answered_or_closed(s) for s in flood]
        finally:
            for sock in flood:
                sock.close()
        assert outcomes.count("hello") == 16, outcomes
        wait_until(
            lambda: "rpc.handshake.max-pending-per-address=16" in service.log(),
            "the refusal in the service's log",
            lambda: service.log()[-500:],
        )


def test_a_silent_handshake_is_dropped_after_the_handshake_timeout(tmp_path) -> None:
    settings = {"rpc.lookup-timeout": "60 s", "rpc.handshake.timeout": "500 ms"}
    with service_process(tmp_path, SECRET, settings) as service:
        with socket.create_connection(("127.0.0.1", service.port), timeout=WAIT) as sock:
            sock.recv(1024)  # the challenge; then silence
            try:
                rest = sock.recv(1024)  # raises TimeoutError if still open after WAIT
            except ConnectionResetError:
                rest = b""
        assert rest == b""
        assert "rpc.handshake.timeout" in service.log()


def test_a_frozen_authenticated_peer_is_dropped_after_the_idle_timeout(tmp_path, client) -> None:
    settings = {"rpc.idle-timeout": "1500 ms"}
    with service_process(tmp_path, SECRET, settings) as service:
        idle = store(client, service)  # alive but idle: keepalives hold its connection
        idle.size().result(WAIT)
        before = service.descriptors()
        address = f"tcp://127.0.0.1:{service.port}/store"
        with client_process(tmp_path, SECRET, address) as frozen:
            wait_until(
                lambda: service.descriptors() == before + 1,
                "the second peer's connection",
                service.descriptors,
            )
            os.kill(frozen.pid, signal.SIGSTOP)  # no FIN, no keepalive: a cut-off peer
            wait_until(
                lambda: service.descriptors() == before,
                f"the frozen peer's connection closed ({before} descriptors)",
                service.descriptors,
            )
        assert "rpc.idle-timeout=1.5 s" in service.log()
        # 3 idle timeouts without a call on the honest client's connection: keepalives hold it
        link = heard_through(client, 4.5)
        assert idle.size().result(WAIT) == 0
        assert [c for c, _ in open_connections(client)] == [link]  # the same connection


def test_a_peer_that_does_not_read_loses_its_connection_at_the_write_queue_cap(
    tmp_path, client
) -> None:
    settings = {"rpc.framesize": "256 kb", "rpc.write-queue.max-size": "1 mb"}
    with service_process(tmp_path, SECRET, settings) as service:
        gateway = store(client, service)
        rss = service.rss_bytes()
        with RawPeer(service.port, receive_buffer_bytes=4096) as peer:
            peer.handshake(SECRET)
            number = peer.lookup("store", ["fetch"])
            for call_id in range(1, 301):  # 300 replies of 200 KB; this peer reads none
                peer.send([CALL, call_id, number, "fetch", [200_000], {}, None])
            wait_until(
                lambda: "rpc.write-queue.max-size=1048576" in service.log(),
                "the service to give up on the peer",
                lambda: service.log()[-500:],
            )
            peer.closed_by_peer()  # what the kernel held, then the end (or a read timeout)
        assert service.rss_bytes() - rss < 32 * 1024 * 1024  # not 60 MB of replies
        assert gateway.size().result(WAIT) == 0  # everyone else is served
