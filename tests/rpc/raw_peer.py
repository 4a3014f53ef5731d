"""A peer that speaks the TCP transport's wire format by hand, on a plain socket.

Written from the format documented in ``millrace.rpc.tcp.handshake`` and ``channel_mac`` (not
by calling them), so tests that use it check the documented bytes: the handshake's fixed
layout, HKDF-SHA256 channel keys, and sealed records ``length | frames | BLAKE2s-128 tag``.
Loopback only; the socket has a timeout on every read.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import struct
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from millrace.runtime.control_messages import control_message_codec

WAIT = 10.0
HEADER = struct.Struct(">I")
CALL, REPLY, LOOKUP, FOUND, PING, PONG = 0, 1, 2, 3, 4, 5


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


class RawPeer:
    """The connector's side of one connection to ``port`` on 127.0.0.1.

    Args:
        port: The service's port.
        source: Local address to connect from (any of 127.0.0.0/8).
        timeout: Seconds any read waits.
        receive_buffer_bytes: SO_RCVBUF to ask for before connecting (None: the default).
    """

    def __init__(
        self,
        port: int,
        source: str = "127.0.0.1",
        timeout: float = WAIT,
        receive_buffer_bytes: int | None = None,
    ) -> None:
        self.sock = socket.socket()
        self.sock.settimeout(timeout)
        if receive_buffer_bytes is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
        self.sock.bind((source, 0))
        self.sock.connect(("127.0.0.1", port))
        self.codec = control_message_codec()
        self.send_key: bytes | None = None
        self.receive_key: bytes | None = None
        self.send_seq = 0
        self.receive_seq = 0
        self.hello = b""
        self.received: list[bytes] = []  # frames of a record not yet returned by receive()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # bytes ---------------------------------------------------------------------------------------

    def recv_exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError(f"closed by the service after {len(data)} of {n} bytes")
            data += chunk
        return data

    def read_raw_frame(self) -> bytes:
        (length,) = HEADER.unpack(self.recv_exactly(HEADER.size))
        return self.recv_exactly(length)

    def closed_by_peer(self) -> bytes:
        """Everything the service sends until it closes (raises socket.timeout if it does not
        close within the socket's timeout)."""
        data = b""
        try:
            while chunk := self.sock.recv(4096):
                data += chunk
        except ConnectionResetError:
            pass
        return data

    # handshake -----------------------------------------------------------------------------------

    def handshake(self, secret: bytes, *, bind_channel: bool = True) -> None:
        """Play the connector: HELLO in, ANSWER out, CONFIRM in and checked; derive the keys.

        Raises:
            AssertionError: If the service's HELLO or CONFIRM is not what the format says.
        """
        hello = self.read_raw_frame()
        assert len(hello) == 41 and hello[:9] == b"MILLRACE\x02", hello
        answer = hmac.new(secret, b"millrace-2 connector" + hello, hashlib.sha256).digest()
        answer += os.urandom(32)
        self.sock.sendall(frame(answer))
        confirm = self.read_raw_frame()
        expected = hmac.new(secret, b"millrace-2 acceptor" + hello + answer, hashlib.sha256)
        assert hmac.compare_digest(confirm, expected.digest()), "wrong acceptor proof"
        self.hello = hello
        if bind_channel:
            okm = HKDF(
                algorithm=hashes.SHA256(),
                length=64,
                salt=hello[-32:] + answer[-32:],
                info=b"millrace-2 channel keys",
            ).derive(secret)
            self.receive_key, self.send_key = okm[:32], okm[32:]

    # frames after the handshake ------------------------------------------------------------------

    def tag(self, key: bytes, seq: int, payload: bytes) -> bytes:
        mac = hashlib.blake2s(key=key, digest_size=16)
        mac.update(struct.pack(">Q", seq) + payload)
        return mac.digest()

    def sealed(self, payload: bytes) -> bytes:
        """``payload`` as the next frame of this side: alone in a sealed record when the channel
        is bound (``length | frame | tag``), a bare frame otherwise."""
        if self.send_key is None:
            return frame(payload)
        body = frame(payload)
        sealed = frame(body + self.tag(self.send_key, self.send_seq, body))
        self.send_seq += 1
        return sealed

    def send(self, message: Any) -> None:
        """Encode ``message`` with the control codec and send it as the next frame."""
        self.sock.sendall(self.sealed(self.codec.encode(message)))

    def receive(self) -> Any:
        """The next message from the service, its record's MAC checked."""
        if self.receive_key is None:
            return self.codec.decode(self.read_raw_frame())
        while not self.received:
            record = self.read_raw_frame()
            body, tag = record[:-16], record[-16:]
            assert tag == self.tag(self.receive_key, self.receive_seq, body), "bad MAC"
            self.receive_seq += 1
            while body:
                (length,) = HEADER.unpack(body[:4])
                self.received.append(body[4 : 4 + length])
                body = body[4 + length :]
        return self.codec.decode(self.received.pop(0))

    def lookup(self, endpoint_id: str, methods: list[str]) -> int:
        """The endpoint number of ``endpoint_id`` (asserts the lookup succeeded)."""
        self.send([LOOKUP, 1, endpoint_id, methods])
        while True:
            answer = self.receive()
            if answer[0] not in (PING, PONG):  # keepalives may come in between
                break
        assert answer[0] == FOUND and answer[3] is None, answer
        return int(answer[2])
