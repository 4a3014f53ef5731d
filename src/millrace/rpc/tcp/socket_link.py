"""SocketLink: one non-blocking TCP socket (optionally TLS) carrying frames, on an event loop.

Reading runs on the event-loop thread: a reader callback takes what the socket holds and cuts it
into frames. Writing is done by whichever thread has a frame, without a hop to the loop: the
frame is appended to a queue, and the first thread to take the write lock (``acquire(False)``,
so no writer ever waits) sends everything queued in one ``send``; a writer that finds the lock
taken leaves its frame to the holder. "Flush at once when the link is idle, batch when busy"
(Gearpump's Netty transport): a frame written more than 20 us after the previous send leaves at
once; one written sooner (a burst) is queued, and the loop's next turn sends the whole queue in
one ``send``, so a burst costs a few syscalls instead of one per frame. When the kernel buffer
is full the loop takes over: it sends the rest once the socket is writable, and frames queue
behind it meanwhile.

With TLS, an ``ssl.SSLObject`` over memory BIOs encrypts and decrypts; the write lock also
guards it, so records leave in the order they were sealed. Without TLS, an authenticated link
may carry a :class:`~millrace.rpc.tcp.channel_mac.ChannelMac`: what one send takes is sealed
as records under the write lock (in wire order), and records are checked as they are read.

Resources (issue 9): until :meth:`start` (the peer is authenticated) a link holds no read
buffer and reads at most a few KiB at a time; the 256 KiB read buffer is allocated by
``start``. Bytes written but not yet taken by the peer are bounded (``max_unsent_bytes``,
``rpc.write-queue.max-size``): a peer that stops reading loses the connection, with a log line,
instead of growing this process's memory.

Threading:
    ``write`` and ``closed``: any thread. Everything else: the loop thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable

from millrace.errors import ConnectionClosedError, FrameMacError, FrameSizeError
from millrace.rpc.tcp.channel_mac import ChannelMac
from millrace.rpc.tcp.framing import FrameDecoder

__all__ = ["SocketLink"]

logger = logging.getLogger(__name__)

_RECV_BYTES = 256 * 1024  # read buffer; reused: recv(256 KiB) would map fresh memory per call
_HANDSHAKE_RECV_BYTES = 4096  # one read before authentication (frames of <= 64 bytes)
_TLS_HANDSHAKE_RECV_BYTES = 17 * 1024  # one TLS record at most
_TLS_READ_BYTES = 64 * 1024  # plaintext taken from the TLS object per read call
_BUSY_WINDOW = 20e-6  # seconds: a frame this soon after the last send waits for the batch


class SocketLink:
    """Frames over one connected socket; owns and closes it.

    Args:
        loop: The service's event loop (its thread reads and, when the socket is full, writes).
        sock: A connected TCP socket; made non-blocking, with TCP_NODELAY.
        limit_bytes: Largest incoming frame accepted during the handshake phase (until
            :meth:`start`, which sets ``rpc.framesize``).

    Threading:
        Construct on the loop thread; then see the module docstring.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, limit_bytes: int):
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        host, port = sock.getpeername()[:2]
        self.peer = f"{host}:{port}"
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._sock = sock
        self._fd = sock.fileno()
        self._decoder = FrameDecoder(limit_bytes)
        self._buffer = bytearray(0)  # the read buffer is allocated by start(): authenticated
        self._view = memoryview(self._buffer)
        self._mac: ChannelMac | None = None
        self._tls: ssl.SSLObject | None = None
        self._tls_in = ssl.MemoryBIO()
        self._tls_out = ssl.MemoryBIO()
        self._received: collections.deque[bytes] = collections.deque()  # before start()
        self._on_frame: Callable[[bytes | memoryview], None] | None = None
        self._on_lost: Callable[[str], None] | None = None
        # Write side: the queue is appended to by any thread; the rest is guarded by _lock.
        self._queue: collections.deque[bytes] = collections.deque()
        self._lock = threading.Lock()
        self._backlog: memoryview | None = None  # unsent bytes while the socket is full
        self._flush_scheduled = False
        self._last_send = 0.0  # time.monotonic() of the last send
        self._max_unsent = 1 << 62  # set by start()
        self._unsent_lock = threading.Lock()  # guards _unsent_queued
        self._unsent_queued = 0  # bytes queued while the socket is full (approximate: +-1 batch)
        self._overflowing = False
        self.last_received = time.monotonic()  # of the last bytes read (loop thread)
        self.closed = False

    # Setup (loop thread, before start) -----------------------------------------------------------

    async def start_tls(self, context: ssl.SSLContext, *, server_side: bool) -> None:
        """Run the TLS handshake; afterwards every frame is encrypted.

        Raises:
            ssl.SSLError: If the peer's certificate is refused or it does not speak TLS.
            ConnectionClosedError: If the peer closes during the handshake.
        """
        tls = context.wrap_bio(self._tls_in, self._tls_out, server_side=server_side)
        while True:
            try:
                tls.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            out = self._tls_out.read()
            if out:
                await self._loop.sock_sendall(self._sock, out)
            if done:
                break
            data = await self._loop.sock_recv(self._sock, _TLS_HANDSHAKE_RECV_BYTES)
            if not data:
                raise ConnectionClosedError("connection closed during the TLS handshake")
            self._tls_in.write(data)
        self._tls = tls
        if self._tls_in.pending:  # the peer's first frames came with its last handshake bytes
            with self._lock:
                self._received.extend(self._decoder.feed(self._decrypt(b"")))

    async def read_frame(self) -> bytes:
        """The next frame's payload, read by awaiting (handshake phase, before :meth:`start`).

        Raises:
            ConnectionClosedError: If the peer closes first.
            FrameSizeError: If the frame announces more than ``limit_bytes``.
        """
        while not self._received:
            if self.closed:
                raise ConnectionClosedError(f"connection with {self.peer} is closed")
            data = await self._loop.sock_recv(self._sock, _HANDSHAKE_RECV_BYTES)
            if not data:
                self._decoder.check_end()
            if self._tls is not None:
                with self._lock:
                    data = self._decrypt(data)
                self._flush()
            self._received.extend(self._decoder.feed(data))
        return self._received.popleft()

    async def send_handshake(self, frame: bytes) -> None:
        """Send a handshake frame now (encrypted with TLS); before :meth:`start` only.

        Raises:
            OSError: If the socket fails.
        """
        if self._tls is not None:
            with self._lock:
                frame = self._encrypt(frame)
        self._last_send = time.monotonic()
        await self._loop.sock_sendall(self._sock, frame)

    def start(
        self,
        on_frame: Callable[[bytes | memoryview], None],
        on_lost: Callable[[str], None],
        limit_bytes: int,
        *,
        mac: ChannelMac | None = None,
        max_unsent_bytes: int | None = None,
    ) -> None:
        """Deliver every incoming frame to ``on_frame`` from now on, on the loop thread.

        Args:
            on_frame: Called with each payload; it may call :meth:`close`.
            on_lost: Called once with the reason when the peer closes, the socket fails, an
                incoming frame is oversized, undecryptable or fails its MAC (logged as a
                warning), or the peer leaves more than ``max_unsent_bytes`` unread; the link
                is closed by then.
            limit_bytes: ``rpc.framesize``: the largest incoming payload from now on.
            mac: Seal and check every frame from now on (channel binding without TLS).
            max_unsent_bytes: ``rpc.write-queue.max-size``; None: unbounded.
        """
        self._buffer = bytearray(_RECV_BYTES)
        self._view = memoryview(self._buffer)
        self._decoder.limit_bytes = mac.record_limit_bytes if mac is not None else limit_bytes
        self._mac = mac
        if max_unsent_bytes is not None:
            self._max_unsent = max_unsent_bytes
        self._on_frame = on_frame
        self._on_lost = on_lost
        self.last_received = time.monotonic()
        self._loop.add_reader(self._fd, self._readable)
        self._deliver(list(self._received))
        self._received.clear()

    # Any thread ----------------------------------------------------------------------------------

    def write(self, frame: bytes) -> None:
        """Send ``frame`` after every frame written before it (on this or any thread).

        Never blocks: the frame is sent now, by this or a concurrent writer, or by the loop
        once the socket has room.

        Raises:
            ConnectionClosedError: If the link is closed (the frame is dropped).
        """
        if self.closed:
            raise ConnectionClosedError(f"connection with {self.peer} is closed")
        self._queue.append(frame)
        if self._backlog is not None or self._flush_scheduled:
            if self._backlog is not None:  # the peer is not keeping up: count what waits
                self._count_unsent(len(frame))
            return  # the loop sends the queue: once the socket drained, or on its next turn
        if time.monotonic() - self._last_send < _BUSY_WINDOW:
            self._flush_scheduled = True  # busy: batch until the loop's next turn
            if self._on_loop_thread():
                self._loop.call_soon(self._scheduled_flush)
            else:
                self._call_soon_threadsafe(self._scheduled_flush)
            return
        self._flush()

    def _count_unsent(self, size: int) -> None:
        with self._unsent_lock:
            self._unsent_queued += size
            unsent = self._unsent_queued
        backlog = self._backlog
        if backlog is not None:
            unsent += len(backlog)
        if unsent > self._max_unsent and not self._overflowing:
            self._overflowing = True
            reason = (
                f"the peer does not read: {unsent} bytes unsent exceed "
                f"rpc.write-queue.max-size={self._max_unsent}"
            )
            logger.warning("closing connection with %s: %s", self.peer, reason)
            self._lost_threadsafe(reason)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self._flush()

    def _flush(self) -> None:
        lock, queue = self._lock, self._queue
        while queue and self._backlog is None and lock.acquire(False):
            try:
                self._send_queued()
            finally:
                lock.release()
            # A frame appended while we held the lock by a writer that found it taken is
            # ours to send: the loop condition looks again.

    def _send_queued(self) -> None:
        """Send the queue until it is empty or the socket is full. Holds the lock."""
        queue = self._queue
        while queue and self._backlog is None and not self.closed:
            count = len(queue)  # only the lock holder pops: exactly these are ours
            frames = [queue.popleft()] if count == 1 else [queue.popleft() for _ in range(count)]
            if self._unsent_queued:
                popped = sum(map(len, frames))
                with self._unsent_lock:
                    self._unsent_queued = max(0, self._unsent_queued - popped)
            mac = self._mac
            if mac is not None:
                data = mac.seal(frames)
            else:
                data = frames[0] if count == 1 else b"".join(frames)
            if self._tls is not None:
                data = self._encrypt(data)
            self._send(data)

    def _send(self, data: bytes | memoryview) -> None:
        """Send ``data`` now, keeping the unsent rest as the backlog. Holds the lock."""
        self._last_send = time.monotonic()
        try:
            sent = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as error:
            self._lost_threadsafe(f"write failed: {error!r}")
            return
        if sent < len(data):
            self._backlog = memoryview(data)[sent:]
            with self._unsent_lock:
                self._unsent_queued = 0  # what was queued is in the backlog now
            if self._on_loop_thread():
                self._loop.add_writer(self._fd, self._writable)
            else:
                self._call_soon_threadsafe(self._add_writer)

    def _on_loop_thread(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def _call_soon_threadsafe(self, fn: Callable[..., object], *args: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: so is the link
            self._loop.call_soon_threadsafe(fn, *args)

    def _lost_threadsafe(self, reason: str) -> None:
        if self._on_loop_thread():
            self._loop.call_soon(self._lost, reason)  # not under the lock, not mid-callback
        else:
            self._call_soon_threadsafe(self._lost, reason)

    # TLS (hold the lock) -------------------------------------------------------------------------

    def _encrypt(self, data: bytes) -> bytes:
        tls = self._tls
        assert tls is not None
        view = memoryview(data)
        while view:
            view = view[tls.write(view) :]
        return self._tls_out.read()

    def _decrypt(self, data: bytes) -> bytes:
        tls = self._tls
        assert tls is not None
        self._tls_in.write(data)
        chunks = []
        with contextlib.suppress(ssl.SSLWantReadError, ssl.SSLZeroReturnError):
            while chunk := tls.read(_TLS_READ_BYTES):
                chunks.append(chunk)
        out = self._tls_out.read()  # e.g. a key update: goes out in sealing order
        if out:
            if self._backlog is None:
                self._send(out)
            else:  # behind what is waiting for the socket
                self._backlog = memoryview(self._backlog.tobytes() + out)
        return b"".join(chunks)

    # Loop thread ---------------------------------------------------------------------------------

    def _add_writer(self) -> None:
        if not self.closed and self._backlog is not None:
            self._loop.add_writer(self._fd, self._writable)

    def _writable(self) -> None:
        with self._lock:
            backlog = self._backlog
            if self.closed or backlog is None:
                return
            self._backlog = None
            self._send(backlog)
            if self._backlog is None:
                self._send_queued()
            if self._backlog is None and not self.closed:
                self._loop.remove_writer(self._fd)
        self._flush()

    def _readable(self) -> None:
        try:
            data = self._view[: self._sock.recv_into(self._buffer)].tobytes()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(f"connection lost: {error!r}")
            return
        self.last_received = time.monotonic()
        try:
            if not data:
                self._decoder.check_end()
            if self._tls is not None:
                with self._lock:
                    data = self._decrypt(data)
                self._flush()
            frames = self._decoder.feed(data)
        except ConnectionClosedError as error:
            self._lost("closed by peer" if str(error) == "connection closed" else str(error))
            return
        except (FrameSizeError, ssl.SSLError) as error:
            reason = f"malformed frame: {error}"
            logger.warning("closing connection with %s: %s", self.peer, reason)
            self._lost(reason)
            return
        self._deliver(frames)

    def _deliver(self, frames: list[bytes]) -> None:
        """Hand ``frames`` to ``on_frame`` in order; with a MAC they are sealed records, each
        checked before the frames in it are handed on."""
        on_frame = self._on_frame
        assert on_frame is not None
        mac = self._mac
        for frame in frames:
            if self.closed:
                return
            if mac is None:
                on_frame(frame)
                continue
            try:
                payloads = mac.open(frame)
            except FrameMacError as error:
                reason = f"malformed frame: {error}"
                logger.warning("closing connection with %s: %s", self.peer, reason)
                self._lost(reason)
                return
            for payload in payloads:
                if self.closed:
                    return
                on_frame(payload)

    def _lost(self, reason: str) -> None:
        if self.closed:
            return
        self.close()
        if self._on_lost is not None:
            self._on_lost(reason)

    def close(self) -> None:
        """Close the socket; frames not yet sent are dropped. Idempotent."""
        with self._lock:  # no writer is inside send() on this socket's descriptor
            if self.closed:
                return
            self.closed = True
            self._queue.clear()
            self._backlog = None
            self._loop.remove_reader(self._fd)
            self._loop.remove_writer(self._fd)
            self._sock.close()
