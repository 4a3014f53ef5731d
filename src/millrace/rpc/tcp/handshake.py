"""The handshake of a TCP connection: mutual proof of the cluster secret, channel keys (issue 9).

Fixed layouts, read as bytes and never through the message codec (nothing a peer sends before
it is authenticated reaches a general decoder). Each message is one length-prefixed frame whose
payload must have exactly the size below; anything else ends the connection:

=========  ==========================  ========================================================
message    from -> to                  payload
=========  ==========================  ========================================================
HELLO      acceptor -> connector       ``b"MILLRACE"``, version byte (2), nonce_a (32 random
                                       bytes): 41 bytes
ANSWER     connector -> acceptor       proof_c = HMAC-SHA256(secret, ``b"millrace-2 connector"``
                                       + HELLO), nonce_c (32 random bytes): 64 bytes
CONFIRM    acceptor -> connector       proof_a = HMAC-SHA256(secret, ``b"millrace-2 acceptor"``
                                       + HELLO + ANSWER): 32 bytes
=========  ==========================  ========================================================

Proofs are compared in constant time; both nonces are fresh per connection, so an answer
recorded on one connection is worthless on another.

Channel binding (without TLS): both sides derive two keys with HKDF-SHA256 (``cryptography``)
from the secret, salted with nonce_a + nonce_c, and everything sent afterwards is sealed in
records carrying a MAC under the key of its direction (:mod:`~millrace.rpc.tcp.channel_mac`).
A peer that relays a legitimate client's answer (after luring that client to connect to it)
is authenticated but holds no key, so its first frame fails the MAC and the connection is
closed. With mutual TLS the channel is already bound by the certificates and no MAC is added.
See ``docs/security.md``.

Threading:
    The service's event-loop thread.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from dataclasses import dataclass
from typing import Protocol

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from millrace.errors import AuthenticationError

__all__ = [
    "HANDSHAKE_LIMIT_BYTES",
    "ChannelKeys",
    "HandshakeLink",
    "derive_channel_keys",
    "handshake_accept",
    "handshake_connect",
]

MAGIC = b"MILLRACE"
VERSION = 2
NONCE_BYTES = 32
PROOF_BYTES = 32
HELLO_BYTES = len(MAGIC) + 1 + NONCE_BYTES  # 41
ANSWER_BYTES = PROOF_BYTES + NONCE_BYTES  # 64
CONFIRM_BYTES = PROOF_BYTES  # 32
HANDSHAKE_LIMIT_BYTES = max(HELLO_BYTES, ANSWER_BYTES, CONFIRM_BYTES)
"""The largest frame payload accepted before the peer is authenticated."""

_CONNECTOR = b"millrace-2 connector"
_ACCEPTOR = b"millrace-2 acceptor"
_KEYS_INFO = b"millrace-2 channel keys"
_HEADER = struct.Struct(">I")


class HandshakeLink(Protocol):
    """What the handshake needs of a link (``SocketLink``): whole frames in, frames out."""

    async def read_frame(self) -> bytes: ...

    async def send_handshake(self, frame: bytes) -> None: ...


@dataclass(frozen=True, slots=True)
class ChannelKeys:
    """The MAC keys of one connection, as seen from one side.

    Attributes:
        send: Key of the frames this side sends (32 bytes).
        receive: Key of the frames it receives (32 bytes).
    """

    send: bytes
    receive: bytes


def derive_channel_keys(secret: bytes, hello: bytes, answer: bytes) -> tuple[bytes, bytes]:
    """``(acceptor -> connector key, connector -> acceptor key)`` of a connection.

    Args:
        secret: The cluster secret (HKDF input key material).
        hello: The HELLO payload (carries nonce_a).
        answer: The ANSWER payload (carries nonce_c).

    Returns:
        Two 32-byte keys: HKDF-SHA256(secret, salt = nonce_a + nonce_c, info =
        ``b"millrace-2 channel keys"``), 64 bytes split in two.
    """
    salt = hello[-NONCE_BYTES:] + answer[-NONCE_BYTES:]
    okm = HKDF(algorithm=hashes.SHA256(), length=64, salt=salt, info=_KEYS_INFO).derive(secret)
    return okm[:32], okm[32:]


def _frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload)) + payload


async def _read_exact(link: HandshakeLink, size: int, what: str) -> bytes:
    payload = await link.read_frame()
    if len(payload) != size:
        raise AuthenticationError(f"malformed {what}: {len(payload)} bytes, expected {size}")
    return payload


async def handshake_accept(
    link: HandshakeLink, secret: bytes, *, bind_channel: bool
) -> ChannelKeys | None:
    """Acceptor side: challenge the peer, check its proof, prove the secret back.

    Args:
        link: The accepted connection (after TLS, if any).
        secret: The cluster secret.
        bind_channel: Derive the channel keys (no TLS).

    Returns:
        The channel keys (acceptor side), or None without ``bind_channel``.

    Raises:
        AuthenticationError: If the answer is malformed or its proof is wrong.
        ConnectionClosedError, FrameSizeError: If the peer closes or announces a frame larger
            than :data:`HANDSHAKE_LIMIT_BYTES`.
    """
    hello = MAGIC + bytes([VERSION]) + os.urandom(NONCE_BYTES)
    await link.send_handshake(_frame(hello))
    answer = await _read_exact(link, ANSWER_BYTES, "handshake answer")
    expected = hmac.new(secret, _CONNECTOR + hello, hashlib.sha256).digest()
    if not hmac.compare_digest(answer[:PROOF_BYTES], expected):
        raise AuthenticationError("wrong cluster secret")
    await link.send_handshake(
        _frame(hmac.new(secret, _ACCEPTOR + hello + answer, hashlib.sha256).digest())
    )
    if not bind_channel:
        return None
    to_connector, to_acceptor = derive_channel_keys(secret, hello, answer)
    return ChannelKeys(send=to_connector, receive=to_acceptor)


async def handshake_connect(
    link: HandshakeLink, secret: bytes, *, bind_channel: bool
) -> ChannelKeys | None:
    """Connector side: answer the challenge, check the acceptor's proof.

    Args:
        link: The new connection (after TLS, if any).
        secret: The cluster secret.
        bind_channel: Derive the channel keys (no TLS).

    Returns:
        The channel keys (connector side), or None without ``bind_channel``.

    Raises:
        AuthenticationError: If the peer is not a Millrace RPC endpoint of this version or
            does not know the secret.
        ConnectionClosedError, FrameSizeError: As :func:`handshake_accept`.
    """
    hello = await link.read_frame()
    if len(hello) != HELLO_BYTES or not hello.startswith(MAGIC):
        raise AuthenticationError("the peer is not a Millrace RPC endpoint")
    if hello[len(MAGIC)] != VERSION:
        raise AuthenticationError(
            f"the peer speaks handshake version {hello[len(MAGIC)]}, this process {VERSION}"
        )
    answer = hmac.new(secret, _CONNECTOR + hello, hashlib.sha256).digest() + os.urandom(NONCE_BYTES)
    await link.send_handshake(_frame(answer))
    proof = await _read_exact(link, CONFIRM_BYTES, "handshake confirmation")
    expected = hmac.new(secret, _ACCEPTOR + hello + answer, hashlib.sha256).digest()
    if not hmac.compare_digest(proof, expected):
        raise AuthenticationError("the peer does not know the cluster secret")
    if not bind_channel:
        return None
    to_connector, to_acceptor = derive_channel_keys(secret, hello, answer)
    return ChannelKeys(send=to_acceptor, receive=to_connector)
