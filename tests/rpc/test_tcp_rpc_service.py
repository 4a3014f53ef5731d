"""TCP transport specifics: frame limits, malformed frames, authentication, silent peers.

Every endpoint test also runs over TCP (conftest TRANSPORTS); these cover what only a network
transport has. All sockets are on 127.0.0.1 and closed by the fixtures.
"""

from __future__ import annotations

import hmac
import socket
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

import pytest

from millrace.config import Configuration
from millrace.errors import FrameSizeError, RecipientUnreachableError
from millrace.rpc import RpcEndpoint, RpcGateway
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec
from tests.rpc.connections import heard_through, open_connections
from tests.rpc.raw_peer import CALL, REPLY, RawPeer, frame

WAIT = 10.0
SECRET = b"test-cluster-secret-0123456789"
CONF = Configuration({"rpc.lookup-timeout": "500 ms", "rpc.ask-timeout": "5 s"})


class StoreGateway(RpcGateway, Protocol):
    def put(self, value: bytes) -> Future[int]: ...

    def size(self) -> Future[int]: ...


class StoreEndpoint(RpcEndpoint, StoreGateway):
    def __init__(self, service) -> None:
        super().__init__(service, "store")
        self.values: list[bytes] = []

    def put(self, value: bytes) -> int:
        self.values.append(value)
        return len(value)

    def size(self) -> int:
        return len(self.values)


def service(name: str, secret: bytes = SECRET, framesize: int = 4096) -> TcpRpcService:
    return TcpRpcService(
        name,
        security=TransportSecurity(secret),
        codec=control_message_codec(),
        configuration=CONF,
        framesize_bytes=framesize,
    )


@pytest.fixture
def pair() -> Iterator[tuple[TcpRpcService, TcpRpcService, StoreEndpoint]]:
    server, client = service("server"), service("client")
    endpoint = StoreEndpoint(server)
    endpoint.start()
    yield server, client, endpoint
    for s in (client, server):
        s.close_async().result(timeout=WAIT)


def test_calls_cross_services_over_tcp(pair) -> None:
    server, client, endpoint = pair
    assert endpoint.address.startswith(f"tcp://{server.authority}/")
    gateway = client.connect(endpoint.address, StoreGateway).result(WAIT)
    assert gateway.put(b"abc").result(WAIT) == 3
    assert gateway.size().result(WAIT) == 1


def test_a_service_binds_one_interface_and_advertises_another() -> None:
    """``bind_host`` (Flink's ``*.bind-host``): listen on every interface, advertise the
    address peers must use; peers reach the endpoint at the advertised address."""
    server = TcpRpcService(
        "server",
        security=TransportSecurity(SECRET),
        codec=control_message_codec(),
        configuration=CONF,
        host="127.0.0.2",  # another loopback address: bound only through 0.0.0.0
        bind_host="0.0.0.0",
    )
    client = service("client")
    try:
        endpoint = StoreEndpoint(server)
        endpoint.start()
        assert server.authority.startswith("127.0.0.2:")
        assert endpoint.address.startswith("tcp://127.0.0.2:")
        gateway = client.connect(endpoint.address, StoreGateway).result(WAIT)
        assert gateway.put(b"abc").result(WAIT) == 3
        with socket.create_connection(("127.0.0.1", int(server.authority.rsplit(":")[1]))):
            pass  # bound to every interface, not only the advertised one
    finally:
        for s in (client, server):
            s.close_async().result(timeout=WAIT)


def test_oversized_message_fails_only_that_call_and_sends_nothing(pair) -> None:
    _, client, endpoint = pair
    gateway = client.connect(endpoint.address, StoreGateway).result(WAIT)
    with pytest.raises(FrameSizeError) as info:
        gateway.put(b"x" * 10_000).result(WAIT)
    assert info.value.limit_bytes == 4096 and info.value.size_bytes > 10_000
    assert gateway.put(b"small").result(WAIT) == 5  # the connection is fine
    assert endpoint.call_async(lambda: list(endpoint.values)).result(WAIT) == [b"small"]


def raw_peer(server: TcpRpcService) -> RawPeer:
    return RawPeer(int(server.authority.rsplit(":", 1)[1]))


def test_wrong_secret_is_disconnected_and_learns_nothing(pair) -> None:
    server, _, _ = pair
    with raw_peer(server) as peer:
        hello = peer.read_raw_frame()
        answer = hmac.new(b"not-the-secret-at-all-000", b"millrace-2 connector" + hello, "sha256")
        peer.sock.sendall(frame(answer.digest() + b"n" * 32))
        assert peer.closed_by_peer() == b""  # closed, no proof of the secret, no error text


def test_handshake_is_a_fixed_layout_and_binds_the_channel(pair) -> None:
    server, _, endpoint = pair
    with raw_peer(server) as peer:
        peer.handshake(SECRET)  # checks HELLO's and CONFIRM's bytes against the format
        number = peer.lookup("store", ["put", "size"])
        peer.send([CALL, 7, number, "put", [b"by hand"], {}, None])
        assert peer.receive() == [REPLY, 7, True, 7]  # the reply's MAC checked too
    assert endpoint.call_async(lambda: list(endpoint.values)).result(WAIT) == [b"by hand"]


def test_client_with_wrong_secret_cannot_connect(pair) -> None:
    _, _, endpoint = pair
    intruder = service("intruder", secret=b"another-secret-0123456789")
    try:
        with pytest.raises(RecipientUnreachableError):
            intruder.connect(endpoint.address, StoreGateway).result(WAIT)
    finally:
        intruder.close_async().result(WAIT)


def test_silent_peer_is_disconnected_after_the_handshake_timeout(pair) -> None:
    server, _, _ = pair
    with raw_peer(server) as peer:
        peer.read_raw_frame()  # the challenge; then say nothing
        assert peer.closed_by_peer() == b""  # within WAIT, or the read times out


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">I", 3) + b"\xc1\xc1\xc1",  # not msgpack
        struct.pack(">I", 1_000_000),  # announces more than rpc.framesize
        struct.pack(">I", 2) + b"\x92\x07",  # msgpack, but not a wire message
    ],
)
def test_malformed_frame_closes_only_that_connection(pair, garbage: bytes) -> None:
    server, client, endpoint = pair
    gateway = client.connect(endpoint.address, StoreGateway).result(WAIT)
    with raw_peer(server) as peer:
        peer.handshake(SECRET)
        # With a valid MAC where the frame is complete: the payload itself is what is bad.
        peer.sock.sendall(peer.sealed(garbage[4:]) if len(garbage) > 4 else garbage)
        assert peer.closed_by_peer() == b""
    assert gateway.put(b"still fine").result(WAIT) == 10


def test_unknown_endpoint_fails_after_the_lookup_timeout(pair) -> None:
    server, client, _ = pair
    with pytest.raises(RecipientUnreachableError):
        client.connect(f"tcp://{server.authority}/nobody", StoreGateway).result(WAIT)


def test_unreachable_port_fails_the_connect(pair) -> None:
    _, client, _ = pair
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(RecipientUnreachableError):
        client.connect(f"tcp://127.0.0.1:{port}/store", StoreGateway).result(WAIT)


def test_short_secret_is_rejected() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        service("weak", secret=b"short")


def test_messages_larger_than_the_socket_buffers_arrive_whole() -> None:
    server, client = service("server", framesize=16 << 20), service("client", framesize=16 << 20)
    try:
        endpoint = StoreEndpoint(server)
        endpoint.start()
        gateway = client.connect(endpoint.address, StoreGateway).result(WAIT)
        big = bytes(range(256)) * 20_000  # 5 MB: the kernel takes it in many pieces
        assert gateway.put(big).result(WAIT) == len(big)
        assert endpoint.call_async(lambda: endpoint.values[-1] == big).result(WAIT)
    finally:
        for s in (client, server):
            s.close_async().result(timeout=WAIT)


class LogGateway(RpcGateway, Protocol):
    def append(self, value: str) -> None: ...

    def count(self) -> Future[int]: ...


class LogEndpoint(RpcEndpoint, LogGateway):
    def __init__(self, service) -> None:
        super().__init__(service, "log")
        self.log: list[str] = []

    def append(self, value: str) -> None:
        self.log.append(value)

    def count(self) -> int:
        return len(self.log)


def test_tells_from_many_threads_all_arrive_each_thread_in_order(pair) -> None:
    server, client, _ = pair
    endpoint = LogEndpoint(server)
    endpoint.start()
    gateway = client.connect(endpoint.address, LogGateway).result(WAIT)
    threads, per_thread = 6, 2_000

    def tell_all(thread: int) -> None:
        for i in range(per_thread):
            gateway.append(f"{thread}:{i}")

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(tell_all, range(threads)))
    assert gateway.count().result(WAIT) == threads * per_thread  # behind every tell
    log = endpoint.call_async(lambda: list(endpoint.log)).result(WAIT)
    for thread in range(threads):
        assert [e for e in log if e.startswith(f"{thread}:")] == [
            f"{thread}:{i}" for i in range(per_thread)
        ]


@pytest.mark.parametrize("connected", [False, True])
def test_close_ends_the_io_threads(connected: bool) -> None:
    server, client = service("closing-server"), service("closing-client")
    if connected:
        endpoint = StoreEndpoint(server)
        endpoint.start()
        client.connect(endpoint.address, StoreGateway).result(WAIT).size().result(WAIT)
    for s in (client, server):
        s.close_async().result(timeout=WAIT)
    names = tuple(
        f"closing-{side}-{kind}" for side in ("server", "client") for kind in ("io", "keepalive")
    )
    io_threads = [t for t in threading.enumerate() if t.name in names]
    for thread in io_threads:
        thread.join(timeout=WAIT)
    assert not [t.name for t in io_threads if t.is_alive()]


def test_a_short_idle_timeout_on_one_side_keeps_an_idle_connection_alive() -> None:
    quiet_server = service("quiet-server")  # rpc.idle-timeout 60 s: pings only after 20 s
    eager_client = TcpRpcService(
        "eager-client",
        security=TransportSecurity(SECRET),
        codec=control_message_codec(),
        # 2 s: a ping (after 0.67 s of silence) has 1.3 s for its answer, room for a busy machine
        configuration=Configuration({"rpc.lookup-timeout": "500 ms", "rpc.idle-timeout": "2 s"}),
    )
    try:
        endpoint = StoreEndpoint(quiet_server)
        endpoint.start()
        gateway = eager_client.connect(endpoint.address, StoreGateway).result(WAIT)
        assert gateway.size().result(WAIT) == 0
        # 2.5 idle timeouts of the client without a call: its pings are answered on it
        link = heard_through(eager_client, 5.0)
        assert gateway.size().result(WAIT) == 0
        assert [c for c, _ in open_connections(eager_client)] == [link]  # the same connection
    finally:
        for s in (eager_client, quiet_server):
            s.close_async().result(timeout=WAIT)
