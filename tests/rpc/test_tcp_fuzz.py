"""Raw-socket fuzzing of a TcpRpcService in its own process (issue 9).

About 2,000 hostile connections, seeded: random bytes, truncated and oversized frames, nested
extension values as the handshake answer, garbage after a valid handshake (random bytes, and
frames with a valid MAC carrying random msgpack, random calls and lookups), a burst of silent
connections. Afterwards the service must answer a legitimate ask on a connection made before
the fuzz, and its descriptors and threads must be back to their baseline. Loopback only; the
service is stopped by pid.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable

import msgpack
import pytest

from millrace.config import Configuration
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec
from tests.rpc.raw_peer import CALL, LOOKUP, RawPeer
from tests.rpc.service_process import ServiceProcess, StoreGateway, service_process

pytestmark = pytest.mark.slow

SECRET = b"fuzzing-the-transport-secret-0123456789"
SEED = 20261125
WAIT = 30.0
SETTINGS = {"rpc.handshake.timeout": "1 s", "rpc.framesize": "64 kb"}


def wait_until(condition: Callable[[], bool], what: str, seen: Callable[[], object]) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"waited {WAIT:g} s for {what}; saw {seen()}")


def connect(port: int, rng: random.Random) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    if rng.random() < 0.5:  # half end with a reset instead of a FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return sock


def nested_extensions(rng: random.Random) -> bytes:
    data = msgpack.packb(rng.choice([[1], [1, "x"], {"a": 1}, b"z"]))
    for _ in range(rng.randint(1, 300)):
        data = msgpack.packb(msgpack.ExtType(rng.choice([1, 2, 3, 99]), data))
    return data


def random_value(rng: random.Random, depth: int = 0) -> object:
    choice = rng.randint(0, 9 if depth < 4 else 5)
    if choice == 0:
        return None
    if choice == 1:
        return rng.randint(-(2**63), 2**63 - 1)
    if choice == 2:
        return rng.random()
    if choice == 3:
        return "".join(chr(rng.randint(0, 0x2FF)) for _ in range(rng.randint(0, 12)))
    if choice == 4:
        return rng.randbytes(rng.randint(0, 40))
    if choice == 5:
        return msgpack.ExtType(rng.randint(0, 127), rng.randbytes(rng.randint(0, 20)))
    if choice in (6, 7):
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {str(rng.random()): random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def authenticated_garbage(rng: random.Random, peer: RawPeer) -> None:
    """After a valid handshake: one of several kinds of bad traffic."""
    kind = rng.randint(0, 5)
    if kind == 0:  # bytes that are not frames (MAC or framing fails)
        peer.sock.sendall(rng.randbytes(rng.randint(1, 400)))
    elif kind == 1:  # valid MAC, payload not msgpack or not a message
        peer.sock.sendall(peer.sealed(rng.randbytes(rng.randint(0, 300))))
    elif kind == 2:  # valid MAC, nested extension values
        peer.sock.sendall(peer.sealed(nested_extensions(rng)))
    elif kind == 3:  # valid MAC, random plain msgpack
        peer.sock.sendall(peer.sealed(msgpack.packb(random_value(rng), use_bin_type=True)))
    else:  # valid MAC, lookups and calls with random fields
        number = 1
        if rng.random() < 0.7:
            with contextlib.suppress(AssertionError, OSError, ConnectionError):
                number = peer.lookup("store", rng.choice([["put"], ["size", "fetch"]]))
        for _ in range(rng.randint(1, 5)):
            message = rng.choice(
                [
                    [
                        CALL,
                        rng.randint(0, 9),
                        number,
                        rng.choice(
                            [
                                "put",
                                "size",
                                "close_async",
                                "_rpc_server",
                                "start",
                                "fetch",
                                "record",
                            ]
                        ),
                        [random_value(rng)],
                        {},
                        None,
                    ],
                    [
                        CALL,
                        rng.randint(0, 9),
                        random_value(rng),
                        random_value(rng),
                        random_value(rng),
                        random_value(rng),
                        random_value(rng),
                    ],
                    [LOOKUP, rng.randint(0, 9), random_value(rng), random_value(rng)],
                    [rng.randint(-5, 9), rng.randint(0, 9)],
                ]
            )
            try:
                payload = msgpack.packb(message, use_bin_type=True)
            except (TypeError, ValueError, OverflowError):
                continue
            peer.sock.sendall(peer.sealed(payload))


def fuzz_once(rng: random.Random, port: int) -> str:
    """One hostile connection; returns its kind (``authenticated`` once the handshake passed)."""
    kind = rng.randint(0, 5)
    if kind == 5:
        with RawPeer(port, timeout=WAIT) as peer:
            peer.handshake(SECRET)
            authenticated_garbage(rng, peer)
        return "authenticated"
    with connect(port, rng) as sock:
        if kind == 0:  # random bytes, before the challenge is even read
            sock.sendall(rng.randbytes(rng.randint(0, 300)))
        elif kind == 1:  # a truncated frame
            sock.sendall(struct.pack(">I", rng.randint(1, 64)) + rng.randbytes(rng.randint(0, 3)))
        elif kind == 2:  # an oversized announcement
            sock.sendall(struct.pack(">I", rng.randint(65, 2**32 - 1)))
        elif kind == 3:  # nested extension values as the answer, up to 255 bytes
            sock.recv(64)
            nested = nested_extensions(rng)[:255]
            sock.sendall(struct.pack(">I", len(nested)) + nested)
        else:  # a well-sized answer with the wrong proof
            sock.recv(64)
            sock.sendall(struct.pack(">I", 64) + rng.randbytes(64))
    return f"unauthenticated {kind}"


def test_fuzzed_connections_leave_the_service_serving_and_at_its_baseline(tmp_path) -> None:
    rng = random.Random(SEED)
    client = TcpRpcService(
        "honest-client",
        security=TransportSecurity(SECRET),
        codec=control_message_codec(),
        configuration=Configuration(SETTINGS),
    )
    service: ServiceProcess
    try:
        with service_process(tmp_path, SECRET, SETTINGS) as service:
            store = client.connect(f"tcp://127.0.0.1:{service.port}/store", StoreGateway)
            gateway = store.result(WAIT)
            assert gateway.put(b"before").result(WAIT) == 6
            descriptors, threads = service.descriptors(), service.threads()
            kinds: Counter[str] = Counter()
            for i in range(2000):
                try:
                    kinds[fuzz_once(rng, service.port)] += 1
                except (OSError, ConnectionError, AssertionError):
                    kinds["cut short by the service"] += 1  # it may close or reset first
                assert i % 200 or service.alive(), f"input {i} (seed {SEED}): {service.describe()}"
            assert kinds["authenticated"] > 250, kinds  # garbage after a valid handshake ran
            silent = [connect(service.port, rng) for _ in range(300)]
            for sock in silent:
                sock.close()
            assert gateway.put(b"after").result(WAIT) == 5, service.describe()
            wait_until(
                lambda: service.descriptors() <= descriptors and service.threads() <= threads,
                f"{descriptors} descriptors and {threads} threads (seed {SEED})",
                lambda: (service.descriptors(), service.threads()),
            )
            assert service.alive(), service.describe()
            # Bad input is refused by name; an exception escaping a handler is a bug.
            assert "message handling failed" not in service.log(), service.log()[-3000:]
    finally:
        client.close_async().exception(timeout=WAIT)
