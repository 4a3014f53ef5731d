"""The peers of ``rpc_throughput.py``: Pykka and the raw asyncio floors.

- Pykka ThreadingActor: the same bump/echo actor, in-process (two threads, like an endpoint).
- asyncio.Queue between two coroutines: the in-process floor (one thread, no hop at all).
- asyncio TCP echo over loopback, length-prefixed frames (4-byte big-endian length, as Millrace's
  framing), streams API: the TCP floor. Client and server share one event loop and thread, so a
  round trip costs syscalls and loop turns but no thread wake-up.
- the same echo with the server on its own event-loop thread: not a floor, a yardstick of what
  crossing threads costs on this machine (a Millrace TCP ask crosses four).
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time

import pykka
from rpc_measure import Result, measure, percentiles

_HEADER = struct.Struct(">I")


class PykkaBench(pykka.ThreadingActor):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def on_receive(self, message):  # type: ignore[no-untyped-def]
        if message[0] == "bump":
            self.count += message[1]
            return None
        return message[1]


def pykka_actor(tells: int, asks: int) -> Result:
    ref = PykkaBench.start()
    try:
        return measure(
            lambda v: ref.tell(("bump", v)),
            lambda: ref.ask(("echo", 0)),
            lambda i: ref.ask(("echo", i)),
            tells,
            asks,
        )
    finally:
        ref.stop()


def asyncio_queue(tells: int, asks: int) -> Result:
    async def run() -> Result:
        queue: asyncio.Queue = asyncio.Queue()
        count = 0

        async def consumer() -> None:
            nonlocal count
            while True:
                kind, value, reply = await queue.get()
                if kind == "bump":
                    count += value
                else:
                    reply.set_result(value)

        task = asyncio.create_task(consumer())
        loop = asyncio.get_running_loop()

        async def ask(i: int) -> int:
            reply = loop.create_future()
            queue.put_nowait(("echo", i, reply))
            return await reply

        started = time.perf_counter()
        for _ in range(tells):
            queue.put_nowait(("bump", 1, None))
        await ask(0)
        throughput = tells / (time.perf_counter() - started)
        latencies = []
        for i in range(asks):
            t0 = time.perf_counter()
            await ask(i)
            latencies.append((time.perf_counter() - t0) * 1e6)
        task.cancel()
        return (throughput, *percentiles(latencies))

    return asyncio.run(run())


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Echo server: tells ("t") are read and dropped, asks ("a") echoed back."""
    try:
        while True:
            (n,) = _HEADER.unpack(await reader.readexactly(4))
            payload = await reader.readexactly(n)
            if payload[:1] == b"a":
                writer.write(_HEADER.pack(n) + payload)
                await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        writer.close()


async def _echo_client(port: int, tells: int, asks: int) -> Result:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def ask(i: int) -> bytes:
        payload = b"a" + i.to_bytes(8, "big")
        writer.write(_HEADER.pack(len(payload)) + payload)
        await writer.drain()
        (n,) = _HEADER.unpack(await reader.readexactly(4))
        return await reader.readexactly(n)

    for i in range(200):  # warm-up, as measure() does
        await ask(i)
    tell = _HEADER.pack(9) + b"t" + (1).to_bytes(8, "big")
    started = time.perf_counter()
    for i in range(tells):
        writer.write(tell)
        if i % 256 == 0:
            await writer.drain()
    await ask(0)
    throughput = tells / (time.perf_counter() - started)
    latencies = []
    for i in range(asks):
        t0 = time.perf_counter()
        await ask(i)
        latencies.append((time.perf_counter() - t0) * 1e6)
    writer.close()
    await writer.wait_closed()
    return (throughput, *percentiles(latencies))


def asyncio_tcp_echo(tells: int, asks: int) -> Result:
    async def run() -> Result:
        server = await asyncio.start_server(_serve, "127.0.0.1", 0)
        try:
            return await _echo_client(server.sockets[0].getsockname()[1], tells, asks)
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(run())


def asyncio_tcp_echo_two_threads(tells: int, asks: int) -> Result:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="echo-server", daemon=True)
    thread.start()
    starting = asyncio.run_coroutine_threadsafe(asyncio.start_server(_serve, "127.0.0.1", 0), loop)
    server = starting.result(10)
    try:
        return asyncio.run(_echo_client(server.sockets[0].getsockname()[1], tells, asks))
    finally:

        async def stop() -> None:
            server.close()
            await server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
