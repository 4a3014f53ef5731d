"""ChannelMac: a MAC on every frame of an authenticated connection without TLS (issue 9).

After the handshake (:mod:`~millrace.rpc.tcp.handshake`) each direction has its own 32-byte
key. A frame then travels as ``length (4 bytes, payload + 16) | payload | tag (16 bytes)``,
tag = keyed BLAKE2s-128(key, sequence number (8 bytes, big-endian) + payload). The sequence
number counts the frames of that direction from 0 and is never sent: a frame dropped,
replayed, reordered, reflected or altered, or injected by anyone without the key (a relay that
only forwarded the handshake), fails the check, and the connection is closed.

Keyed BLAKE2s is a MAC by design (RFC 7693; WireGuard's); it is chosen over HMAC-SHA256 for
its cost on the small frames of the control plane (about 0.6 us against 1.3 us per frame in
CPython here, with the keyed state precomputed and copied). Integrity only: without TLS the
payload is readable on the wire.

Threading:
    :meth:`seal` under the link's write lock (frames are sealed in the order they leave);
    :meth:`open` on the reading (event-loop) thread.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable

from millrace.errors import RpcError
from millrace.rpc.tcp.framing import HEADER_BYTES
from millrace.rpc.tcp.handshake import ChannelKeys

__all__ = ["TAG_BYTES", "ChannelMac", "FrameMacError"]

TAG_BYTES = 16
_SEQ = struct.Struct(">Q")
_HEADER = struct.Struct(">I")


class FrameMacError(RpcError):
    """An incoming frame's MAC does not match: the frame was altered, replayed or injected."""


class ChannelMac:
    """Seals outgoing and checks incoming frames of one connection.

    Args:
        keys: This side's send and receive keys.
    """

    __slots__ = ("_receive", "_receive_seq", "_send", "_send_seq")

    def __init__(self, keys: ChannelKeys) -> None:
        self._send = hashlib.blake2s(key=keys.send, digest_size=TAG_BYTES)
        self._receive = hashlib.blake2s(key=keys.receive, digest_size=TAG_BYTES)
        self._send_seq = 0
        self._receive_seq = 0

    def seal(self, frames: Iterable[bytes]) -> bytes:
        """The wire bytes of ``frames`` (each ``header | payload`` as ``encode_frame`` made it),
        each re-headed and followed by its tag.

        Threading:
            Holding the link's write lock: the sequence numbers follow the wire order.
        """
        pieces: list[bytes | memoryview] = []
        append = pieces.append
        seq = self._send_seq
        base, pack_seq, pack_header = self._send, _SEQ.pack, _HEADER.pack
        for frame in frames:
            payload = memoryview(frame)[HEADER_BYTES:]
            mac = base.copy()
            mac.update(pack_seq(seq))
            mac.update(payload)
            append(pack_header(len(payload) + TAG_BYTES))
            append(payload)
            append(mac.digest())
            seq += 1
        self._send_seq = seq
        return b"".join(pieces)

    def open(self, sealed: bytes) -> memoryview:
        """The payload of an incoming frame (``payload | tag``) whose tag checks out.

        Raises:
            FrameMacError: If the frame is shorter than a tag or its tag does not match.
        """
        if len(sealed) < TAG_BYTES:
            raise FrameMacError(f"frame of {len(sealed)} bytes cannot carry its MAC")
        view = memoryview(sealed)
        payload = view[:-TAG_BYTES]
        mac = self._receive.copy()
        mac.update(_SEQ.pack(self._receive_seq))
        mac.update(payload)
        if not hmac.compare_digest(mac.digest(), view[-TAG_BYTES:]):
            raise FrameMacError(f"frame {self._receive_seq} fails its MAC")
        self._receive_seq += 1
        return payload
