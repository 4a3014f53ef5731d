"""RPC: tell throughput and ask latency of Millrace's transports against Pykka and raw asyncio.

One invocation, one process, loopback only. Every contender is measured the same way (see
``rpc_measure.py``): N tells then one ask (tells/s), then sequential asks (p50, p99 in us).
The contenders run round-robin for ``--rounds`` rounds and each figure printed is the median
over the rounds, so a noisy moment hits all of them alike.

Contenders: Millrace LocalRpcService (in-process), Millrace TcpRpcService (two services over
127.0.0.1), and the peers of ``rpc_peers.py``: Pykka ThreadingActor, an asyncio.Queue between
coroutines (in-process floor), a length-prefixed asyncio TCP echo with client and server on one
loop (TCP floor), and the same echo with the server on a second thread (the cost of a hop).

``--one-cpu`` runs the whole process on one CPU: thread hand-offs then cost a context switch
instead of waking another (often idle) CPU, which shows how much of a round trip is CPU work.

Usage: ``.venv/bin/python bench/rpc_throughput.py [--tells 50000] [--asks 5000] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol

from rpc_measure import Result, measure
from rpc_peers import asyncio_queue, asyncio_tcp_echo, asyncio_tcp_echo_two_threads, pykka_actor

from millrace.config import Configuration
from millrace.rpc import LocalRpcService, RpcEndpoint, RpcGateway
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec

TARGET_RATIO = 3.0  # BRIEF section 5: within 3x of the raw asyncio floor


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


CONTENDERS: dict[str, Callable[[int, int], Result]] = {
    "millrace in-process": millrace_local,
    "millrace tcp": millrace_tcp,
    "pykka": pykka_actor,
    "asyncio queue (floor)": asyncio_queue,
    "asyncio tcp echo (floor)": asyncio_tcp_echo,
    "asyncio tcp echo, 2 threads": asyncio_tcp_echo_two_threads,
}


def run_rounds(tells: int, asks: int, rounds: int) -> dict[str, Result]:
    """Median (tells/s, p50, p99) per contender over ``rounds`` round-robin rounds."""
    samples: dict[str, list[Result]] = {name: [] for name in CONTENDERS}
    for _ in range(rounds):
        for name, run in CONTENDERS.items():
            samples[name].append(run(tells, asks))
    return {
        name: tuple(statistics.median(column) for column in zip(*runs, strict=True))  # type: ignore[misc]
        for name, runs in samples.items()
    }


def _verdict(ratio: float) -> str:
    return "met" if ratio <= TARGET_RATIO else "not met"


def report(results: dict[str, Result]) -> None:
    """Print the table and the ratios against the floors and Pykka."""
    print(f"{'contender':<29}{'tells/s':>12}{'ask p50 us':>12}{'ask p99 us':>12}")
    for name, (throughput, p50, p99) in results.items():
        print(f"{name:<29}{throughput:>12,.0f}{p50:>12.1f}{p99:>12.1f}")
    local, tcp = results["millrace in-process"], results["millrace tcp"]
    queue, echo = results["asyncio queue (floor)"], results["asyncio tcp echo (floor)"]
    echo2, pykka = results["asyncio tcp echo, 2 threads"], results["pykka"]
    print(f"ratios (target: within {TARGET_RATIO:g}x of the floor, ahead of Pykka):")
    for label, ours, floor in (("in-process", local, queue), ("tcp", tcp, echo)):
        slower, p50, p99 = floor[0] / ours[0], ours[1] / floor[1], ours[2] / floor[2]
        print(
            f"  {label + ' vs its floor:':<28}tells {slower:.2f}x fewer/s ({_verdict(slower)}), "
            f"ask p50 {p50:.2f}x ({_verdict(p50)}), p99 {p99:.2f}x"
        )
    print(
        f"  {'tcp vs 2-thread echo:':<28}tells {echo2[0] / tcp[0]:.2f}x fewer/s, "
        f"ask p50 {tcp[1] / echo2[1]:.2f}x, p99 {tcp[2] / echo2[2]:.2f}x"
    )
    for label, ours in (("in-process", local), ("tcp", tcp)):
        print(
            f"  {label + ' vs pykka:':<28}tells {ours[0] / pykka[0]:.2f}x as many/s, "
            f"ask p50 {ours[1] / pykka[1]:.2f}x Pykka's"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tells", type=int, default=50_000)
    parser.add_argument("--asks", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=5, help="medians over this many rounds")
    parser.add_argument("--one-cpu", action="store_true", help="pin the process to one CPU")
    args = parser.parse_args()
    if args.one_cpu:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # threads started later inherit
    results = run_rounds(args.tells, args.asks, args.rounds)
    cpus = "1 CPU (pinned)" if args.one_cpu else f"{len(os.sched_getaffinity(0))} CPUs"
    print(
        f"{args.tells:,} tells, {args.asks:,} sequential asks per contender; "
        f"medians of {args.rounds} rounds; {cpus}"
    )
    report(results)


if __name__ == "__main__":
    main()
