"""RPC under a flood of unauthenticated connections (issue 9): memory, descriptors, latency.

A TcpRpcService runs in a child process (``--serve``) with the configured caps; this process
first measures a legitimate client's ask round trip (the peer: the same service, no flood),
then a second child (``--flood``, so that the attacker's work does not share the client's
interpreter) holds N silent, unauthenticated connections open against it from several loopback
source addresses (127.0.0.2, 127.0.0.3, ...: 127.0.0.0/8 is all loopback on Linux) for a
bounded time, reopening each one the service closes (refused over a cap, or dropped at the
handshake timeout) after a short pause, and this process measures the same client's asks
during the flood. It prints
the service's RSS and open descriptors before, at their peak during and after the flood,
against the caps, and the ask p50/p99 with the flood next to without it.

Loopback only; the children are stopped by their pids; the flood ends after ``--seconds``.

Usage: ``.venv/bin/python bench/rpc_flood.py [--connections 1000] [--addresses 20]
[--seconds 20] [--asks 2000] [-D rpc.handshake.max-pending=128 ...]``
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

from millrace.config import Configuration, RpcOptions
from millrace.rpc import RpcEndpoint, RpcGateway
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec

MAX_SECONDS = 300.0  # the flood never runs longer, whatever --seconds says
REOPEN_PAUSE = 0.05  # seconds before a closed flood connection is opened again
START_WAIT = 60.0


class EchoGateway(RpcGateway, Protocol):
    def echo(self, value: int) -> Future[int]: ...


class EchoEndpoint(RpcEndpoint, EchoGateway):
    def __init__(self, service: TcpRpcService) -> None:
        super().__init__(service, "echo")

    def echo(self, value: int) -> int:  # type: ignore[override]
        return value


def serve(secret: bytes, settings: dict[str, str]) -> None:
    """The child: host ``echo`` until SIGTERM."""
    service = TcpRpcService(
        "flooded",
        security=TransportSecurity(secret),
        codec=control_message_codec(),
        configuration=Configuration(settings),
    )
    EchoEndpoint(service).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"READY {service.authority.rsplit(':', 1)[1]}", flush=True)
    stop.wait(MAX_SECONDS * 2)
    service.close_async().exception(timeout=10)


class Server:
    """The child process and its numbers, from /proc."""

    def __init__(self, secret: bytes, settings: dict[str, str]) -> None:
        command = [sys.executable, __file__, "--serve", "--secret", secret.hex()]
        for key, value in settings.items():
            command += ["-D", f"{key}={value}"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(START_WAIT):
                raise RuntimeError(f"the server did not start within {START_WAIT:g} s")
        line = self.process.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError(f"the server did not start: {line!r}")
        self.port = int(line.split()[1])

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)


class Flood:
    """N silent connections from ``addresses`` loopback sources, each reopened after the server
    closes it, on one thread, until :meth:`stop` or the deadline."""

    def __init__(self, port: int, connections: int, addresses: int, seconds: float) -> None:
        self.port = port
        self.connections = connections
        self.sources = [f"127.0.0.{2 + i % addresses}" for i in range(connections)]
        self.deadline = time.monotonic() + min(seconds, MAX_SECONDS)
        self.opened = self.closed_by_server = self.challenged = self.failed = 0
        self.open_now = 0
        self.peak_open = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flood", daemon=True)

    def start(self) -> Flood:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=MAX_SECONDS)

    def _open(self, selector: selectors.BaseSelector, index: int) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.bind((self.sources[index], 0))
            code = sock.connect_ex(("127.0.0.1", self.port))
        except OSError:
            sock.close()
            self.failed += 1
            return
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            self.failed += 1
            return
        selector.register(sock, selectors.EVENT_READ, index)
        self.opened += 1
        self.open_now += 1
        self.peak_open = max(self.peak_open, self.open_now)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        reopen: list[tuple[float, int]] = [(0.0, i) for i in range(self.connections)]
        try:
            while not self._stopping.is_set() and time.monotonic() < self.deadline:
                now = time.monotonic()
                due = [i for at, i in reopen if at <= now]
                reopen = [(at, i) for at, i in reopen if at > now]
                for index in due:
                    self._open(selector, index)
                for key, _ in selector.select(0.02) if selector.get_map() else []:
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    try:
                        data = sock.recv(4096)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if data:
                        self.challenged += 1  # the challenge: say nothing, hold on
                        continue
                    selector.unregister(sock)
                    sock.close()
                    self.open_now -= 1
                    self.closed_by_server += 1
                    reopen.append((time.monotonic() + REOPEN_PAUSE, key.data))
                if not selector.get_map():
                    time.sleep(0.02)
        finally:
            for key in list(selector.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            selector.close()


def run_flood(port: int, connections: int, addresses: int, seconds: float) -> None:
    """The flood child: prints ``OPENED`` once every connection was opened once, then, when
    the flood ends (deadline or SIGTERM), ``STATS opened challenged closed failed peak``."""
    flood = Flood(port, connections, addresses, seconds)
    signal.signal(signal.SIGTERM, lambda *_: flood._stopping.set())
    flood.start()
    while flood.opened < connections and time.monotonic() < flood.deadline:
        time.sleep(0.05)
    print("OPENED", flush=True)
    flood._thread.join(timeout=MAX_SECONDS + 10)
    counts = (flood.opened, flood.challenged, flood.closed_by_server, flood.failed)
    print("STATS", *counts, flood.peak_open, flush=True)


class FloodProcess:
    """The flood child, seen from the benchmark."""

    def __init__(self, port: int, connections: int, addresses: int, seconds: float) -> None:
        command = [sys.executable, __file__, "--flood", "--port", str(port)]
        command += ["--connections", str(connections), "--addresses", str(addresses)]
        command += ["--seconds", str(seconds)]
        self.deadline = time.monotonic() + min(seconds, MAX_SECONDS)
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.stats = (0, 0, 0, 0, 0)

    def wait_opened(self) -> None:
        """Until every flood connection was opened once (bounded by the flood's deadline)."""
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if selector.select(max(self.deadline - time.monotonic(), 0.1)):
                self.process.stdout.readline()

    def stop(self) -> None:
        """End the flood and read its numbers; the child is killed if it does not end."""
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            out, _ = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate(timeout=30)
        line = next((x for x in out.splitlines() if x.startswith("STATS")), "STATS 0 0 0 0 0")
        opened, challenged, closed, failed, peak = (int(x) for x in line.split()[1:])
        self.stats = (opened, challenged, closed, failed, peak)


def ask_latencies(gateway: EchoGateway, asks: int) -> tuple[float, float]:
    """(p50, p99) in microseconds of ``asks`` sequential asks."""
    samples = []
    for i in range(asks):
        started = time.perf_counter()
        gateway.echo(i).result(30)
        samples.append((time.perf_counter() - started) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--addresses", type=int, default=20, help="loopback source addresses")
    parser.add_argument("--seconds", type=float, default=20.0, help=f"at most {MAX_SECONDS:g}")
    parser.add_argument("--asks", type=int, default=2000)
    parser.add_argument("-D", action="append", default=[], help="server key=value")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--flood", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--secret", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    settings = dict(pair.split("=", 1) for pair in args.D)
    if args.serve:
        serve(bytes.fromhex(args.secret), settings)
        return
    if args.flood:
        run_flood(args.port, args.connections, args.addresses, args.seconds)
        return
    secret = os.urandom(32)
    conf = Configuration(settings)
    server = Server(secret, settings)
    client = TcpRpcService(
        "legitimate", security=TransportSecurity(secret), codec=control_message_codec()
    )
    try:
        gateway = client.connect(f"tcp://127.0.0.1:{server.port}/echo", EchoGateway).result(30)
        ask_latencies(gateway, 200)  # warm-up
        before = (server.rss_mib(), server.descriptors())
        quiet = ask_latencies(gateway, args.asks)
        flood = FloodProcess(server.port, args.connections, args.addresses, args.seconds)
        peak_rss, peak_fds = before
        samples: list[tuple[float, float]] = []
        try:
            flood.wait_opened()
            while time.monotonic() < flood.deadline - 1.0:
                samples.append(ask_latencies(gateway, max(args.asks // 10, 50)))
                peak_rss = max(peak_rss, server.rss_mib())
                peak_fds = max(peak_fds, server.descriptors())
        finally:
            flood.stop()
        time.sleep(_handshake_timeout(conf) + 0.5)  # the last held ones are dropped by now
        after = (server.rss_mib(), server.descriptors())
        during = (
            statistics.median(p50 for p50, _ in samples) if samples else float("nan"),
            statistics.median(p99 for _, p99 in samples) if samples else float("nan"),
        )
        report(conf, args, flood, before, (peak_rss, peak_fds), after, quiet, during)
    finally:
        client.close_async().exception(timeout=10)
        server.stop()


def _handshake_timeout(conf: Configuration) -> float:
    """rpc.handshake.timeout; the lookup timeout on code from before issue 9 (no such key)."""
    option = getattr(RpcOptions, "HANDSHAKE_TIMEOUT", RpcOptions.LOOKUP_TIMEOUT)
    return float(conf.get(option))


def _caps(conf: Configuration) -> str:
    if not hasattr(RpcOptions, "MAX_PENDING_HANDSHAKES"):  # run against code before issue 9
        return f"none (handshakes held for rpc.lookup-timeout={_handshake_timeout(conf):g} s)"
    return (
        f"rpc.handshake.max-pending={conf.get(RpcOptions.MAX_PENDING_HANDSHAKES)}, "
        f"rpc.handshake.max-pending-per-address="
        f"{conf.get(RpcOptions.MAX_PENDING_HANDSHAKES_PER_ADDRESS)}, "
        f"rpc.handshake.timeout={_handshake_timeout(conf):g} s"
    )


def report(conf, args, flood, before, peak, after, quiet, during) -> None:  # type: ignore[no-untyped-def]
    """Print the caps, the flood, the server's numbers and the client's latency."""
    print(f"caps: {_caps(conf)}")
    opened, challenged, closed, failed, peak_open = flood.stats
    print(
        f"flood: {args.connections} silent connections from {args.addresses} loopback "
        f"addresses for {args.seconds:g} s: {opened} opened, {challenged} got the "
        f"challenge (admitted), {closed} closed by the server, {failed} failed to open; "
        f"at most {peak_open} open at once"
    )
    print(f"{'server':<22}{'before':>10}{'flood peak':>12}{'after':>10}")
    print(f"{'RSS MiB':<22}{before[0]:>10.1f}{peak[0]:>12.1f}{after[0]:>10.1f}")
    print(f"{'open descriptors':<22}{before[1]:>10}{peak[1]:>12}{after[1]:>10}")
    print(f"{'legitimate ask':<22}{'p50 us':>10}{'p99 us':>12}")
    print(f"{'  without flood':<22}{quiet[0]:>10.1f}{quiet[1]:>12.1f}")
    print(f"{'  during flood':<22}{during[0]:>10.1f}{during[1]:>12.1f}")
    print(
        f"ratio during / without: p50 {during[0] / quiet[0]:.2f}x, p99 {during[1] / quiet[1]:.2f}x"
    )


if __name__ == "__main__":
    main()
