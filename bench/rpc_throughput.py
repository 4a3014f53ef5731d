"""RPC: tell throughput and ask latency of Millrace's transports against Pykka and raw asyncio.

One invocation, one process, loopback only. For each contender:
- tell throughput: one sender thread sends N fire-and-forget messages that increment a counter,
  then one ask waits until all were processed; messages per second.
- ask round trip: sequential asks returning their argument; p50 and p99 in microseconds.

Contenders: Millrace LocalRpcService (in-process), Millrace TcpRpcService (two services over
127.0.0.1), Pykka ThreadingActor, and the raw floors: an asyncio.Queue between coroutines
(in-process) and a length-prefixed asyncio TCP echo (loopback).

Usage: ``.venv/bin/python bench/rpc_throughput.py [--tells 50000] [--asks 5000]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import struct
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol

import pykka

from millrace.config import Configuration
from millrace.rpc import LocalRpcService, RpcEndpoint, RpcGateway
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec

Result = tuple[float, float, float]  # tells/s, ask p50 us, ask p99 us


class BenchGateway(RpcGateway, Protocol):
    def bump(self, value: int) -> None: ...

    def echo(self, value: int) -> Future[int]: ...


class BenchEndpoint(RpcEndpoint, BenchGateway):
    def __init__(self, service) -> None:  # type: ignore[no-untyped-def]
        super().__init__(service, "bench")
        self.count = 0

    def bump(self, value: int) -> None:
        self.count += value

    def echo(self, value: int) -> int:  # type: ignore[override]
        return value


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]


def measure(
    tell: Callable[[int], object],
    flush: Callable[[], object],
    ask: Callable[[int], object],
    tells: int,
    asks: int,
) -> Result:
    for i in range(200):  # warm-up
        ask(i)
    started = time.perf_counter()
    for _ in range(tells):
        tell(1)
    flush()
    throughput = tells / (time.perf_counter() - started)
    latencies = []
    for i in range(asks):
        t0 = time.perf_counter()
        ask(i)
        latencies.append((time.perf_counter() - t0) * 1e6)
    return (throughput, *_percentiles(latencies))


def millrace_local(tells: int, asks: int) -> Result:
    service = LocalRpcService("bench", configuration=Configuration())
    endpoint = BenchEndpoint(service)
    endpoint.start()
    gateway = service.connect(endpoint.address, BenchGateway).result(10)
    try:
        return measure(
            gateway.bump,
            lambda: gateway.echo(0).result(60),
            lambda i: gateway.echo(i).result(10),
            tells,
            asks,
        )
    finally:
        service.close_async().result(10)


def millrace_tcp(tells: int, asks: int) -> Result:
    secret = b"bench-secret-0123456789abcdef"
    server = TcpRpcService(
        "server", security=TransportSecurity(secret), codec=control_message_codec()
    )
    client = TcpRpcService(
        "client", security=TransportSecurity(secret), codec=control_message_codec()
    )
    endpoint = BenchEndpoint(server)
    endpoint.start()
    gateway = client.connect(endpoint.address, BenchGateway).result(10)
    try:
        return measure(
            gateway.bump,
            lambda: gateway.echo(0).result(120),
            lambda i: gateway.echo(i).result(10),
            tells,
            asks,
        )
    finally:
        client.close_async().result(10)
        server.close_async().result(10)


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
        return (throughput, *_percentiles(latencies))

    return asyncio.run(run())


def asyncio_tcp_echo(tells: int, asks: int) -> Result:
    header = struct.Struct(">I")

    async def run() -> Result:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while True:
                    (n,) = header.unpack(await reader.readexactly(4))
                    payload = await reader.readexactly(n)
                    if payload[:1] == b"a":  # ask: echo back
                        writer.write(header.pack(n) + payload)
                        await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def ask(i: int) -> bytes:
            payload = b"a" + i.to_bytes(8, "big")
            writer.write(header.pack(len(payload)) + payload)
            await writer.drain()
            (n,) = header.unpack(await reader.readexactly(4))
            return await reader.readexactly(n)

        tell = header.pack(9) + b"t" + (1).to_bytes(8, "big")
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
        server.close()
        await server.wait_closed()
        return (throughput, *_percentiles(latencies))

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tells", type=int, default=50_000)
    parser.add_argument("--asks", type=int, default=5_000)
    args = parser.parse_args()
    contenders = {
        "millrace in-process": millrace_local,
        "millrace tcp": millrace_tcp,
        "pykka": pykka_actor,
        "asyncio queue (floor)": asyncio_queue,
        "asyncio tcp echo (floor)": asyncio_tcp_echo,
    }
    results = {name: run(args.tells, args.asks) for name, run in contenders.items()}
    print(f"{args.tells:,} tells, {args.asks:,} sequential asks per contender")
    print(f"{'contender':<26}{'tells/s':>12}{'ask p50 us':>12}{'ask p99 us':>12}")
    for name, (throughput, p50, p99) in results.items():
        print(f"{name:<26}{throughput:>12,.0f}{p50:>12.1f}{p99:>12.1f}")
    local, tcp = results["millrace in-process"], results["millrace tcp"]
    queue, echo = results["asyncio queue (floor)"], results["asyncio tcp echo (floor)"]
    pykka_r = results["pykka"]
    print("ratios:")
    print(
        f"  in-process vs asyncio queue floor: tells {queue[0] / local[0]:.2f}x slower, "
        f"ask p50 {local[1] / queue[1]:.2f}x, p99 {local[2] / queue[2]:.2f}x"
    )
    print(
        f"  tcp vs asyncio tcp echo floor:     tells {echo[0] / tcp[0]:.2f}x slower, "
        f"ask p50 {tcp[1] / echo[1]:.2f}x, p99 {tcp[2] / echo[2]:.2f}x"
    )
    print(
        f"  in-process vs pykka:               tells {local[0] / pykka_r[0]:.2f}x as many/s, "
        f"ask p50 {local[1] / pykka_r[1]:.2f}x"
    )


if __name__ == "__main__":
    main()
