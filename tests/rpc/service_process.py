"""A TcpRpcService in a child process, as a cluster process runs it, for hostile-peer tests.

``python -m tests.rpc.service_process serve --secret HEX [--stack-kib N] [-D key=value]...``
hosts a ``store`` endpoint (:class:`StoreEndpoint`) on 127.0.0.1, escalates fatal errors like a
JobManager (``ProcessTermination``: exit code 1), prints ``READY <port>`` and serves until
SIGTERM. ``connect --secret HEX --address tcp://...`` connects a client to such a service,
asks once, prints ``CONNECTED`` and waits (a peer that a test can freeze with SIGSTOP).

The parent side, :func:`service_process`, starts one, waits (bounded) for its line, gives its
pid, descriptors, threads and memory, and stops it by pid whatever happened.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from millrace.rpc import RpcEndpoint, RpcGateway

ROOT = Path(__file__).resolve().parents[2]
START_WAIT = 60.0  # seconds a child gets to import and listen
STOP_WAIT = 10.0
LIFETIME = 900.0  # seconds a child lives at most, even if its test never stops it


class StoreGateway(RpcGateway, Protocol):
    def put(self, value: bytes) -> Future[int]: ...

    def size(self) -> Future[int]: ...

    def record(self, value: bytes) -> None: ...

    def fetch(self, size: int) -> Future[bytes]: ...


class StoreEndpoint(RpcEndpoint, StoreGateway):
    def __init__(self, service) -> None:  # type: ignore[no-untyped-def]
        super().__init__(service, "store")
        self.values: list[bytes] = []

    def put(self, value: bytes) -> int:
        self.values.append(value)
        return len(value)

    def size(self) -> int:
        return len(self.values)

    def record(self, value: bytes) -> None:
        self.values.append(value)

    def fetch(self, size: int) -> bytes:
        return b"x" * size


# The child ----------------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from millrace.config import Configuration
    from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
    from millrace.rpc.tcp.transport_security import TransportSecurity
    from millrace.runtime.control_messages import control_message_codec
    from millrace.runtime.entrypoint.process_termination import ProcessTermination

    if args.stack_kib:
        threading.stack_size(args.stack_kib * 1024)  # every thread started from now on
    termination = ProcessTermination()
    termination.install_signal_handlers()
    service = TcpRpcService(
        "hostile-target",
        security=TransportSecurity(bytes.fromhex(args.secret)),
        codec=control_message_codec(),
        configuration=Configuration(dict(pair.split("=", 1) for pair in args.D)),
    )
    service.set_fatal_error_handler(termination.on_fatal_error)
    StoreEndpoint(service).start()
    _watch_parent(lambda reason: termination.request_stop(reason))
    print(f"READY {service.authority.rsplit(':', 1)[1]}", flush=True)
    try:
        return termination.wait()  # bounded: SIGTERM, a fatal error, or _watch_parent's LIFETIME
    finally:
        service.close_async().exception(timeout=STOP_WAIT)


def _watch_parent(stop: Callable[[str], None]) -> threading.Event:
    """Call ``stop`` when the test process is gone or after LIFETIME; returns the event set
    then (a child never outlives its test by much)."""
    parent, deadline, done = os.getppid(), time.monotonic() + LIFETIME, threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            if os.getppid() != parent or time.monotonic() > deadline:
                stop("the test process is gone, or the child's lifetime is over")
                done.set()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    return done


def _connect(args: argparse.Namespace) -> int:
    from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
    from millrace.rpc.tcp.transport_security import TransportSecurity
    from millrace.runtime.control_messages import control_message_codec

    service = TcpRpcService(
        "frozen-client",
        security=TransportSecurity(bytes.fromhex(args.secret)),
        codec=control_message_codec(),
    )
    gateway = service.connect(args.address, StoreGateway).result(START_WAIT)
    gateway.size().result(START_WAIT)
    print("CONNECTED", flush=True)
    _watch_parent(lambda reason: None).wait(LIFETIME)  # until stopped (or frozen) by the test
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["serve", "connect"])
    parser.add_argument("--secret", required=True)
    parser.add_argument("--stack-kib", type=int, default=0)
    parser.add_argument("--address", default="")
    parser.add_argument("-D", action="append", default=[])
    args = parser.parse_args()
    return _serve(args) if args.mode == "serve" else _connect(args)


# The parent ---------------------------------------------------------------------------------------


@dataclass
class ServiceProcess:
    """A running child; its numbers are read from /proc."""

    process: subprocess.Popen[str]
    port: int
    stderr: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/task"))

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no VmRSS for pid {self.pid}")

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")

    def describe(self) -> str:
        code = self.process.poll()
        state = "running" if code is None else f"exited with {code}"
        return f"service pid {self.pid} {state}; its log ends: {self.log()[-1500:]}"


def _read_line(process: subprocess.Popen[str], prefix: str, timeout: float) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(timeout=0.2):
                line = process.stdout.readline()
                if line.startswith(prefix):
                    return line.strip()
                if not line and process.poll() is not None:
                    break
    raise AssertionError(f"no {prefix!r} line within {timeout:g} s (exit code {process.poll()})")


def _spawn(command: list[str], log: Path) -> subprocess.Popen[str]:
    with open(log, "w") as sink:
        return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=sink, text=True)


def _stop(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGCONT)  # a frozen child must be able to die
        process.terminate()
    try:
        process.wait(timeout=STOP_WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_WAIT)


@contextlib.contextmanager
def service_process(
    tmp_path: Path, secret: bytes, settings: dict[str, str] | None = None, stack_kib: int = 0
) -> Iterator[ServiceProcess]:
    """A child serving ``store``; stopped by its pid when the block ends."""
    command = [sys.executable, "-m", "tests.rpc.service_process", "serve", "--secret"]
    command += [secret.hex(), "--stack-kib", str(stack_kib)]
    for key, value in (settings or {}).items():
        command += ["-D", f"{key}={value}"]
    stderr = tmp_path / f"service-{time.monotonic_ns()}.log"
    with open(stderr, "w") as sink:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=sink, text=True
        )
    try:
        port = int(_read_line(process, "READY", START_WAIT).split()[1])
        yield ServiceProcess(process, port, stderr)
    finally:
        _stop(process)


@contextlib.contextmanager
def client_process(tmp_path: Path, secret: bytes, address: str) -> Iterator[subprocess.Popen[str]]:
    """A child connected to ``address`` (asked once); stopped by its pid when the block ends."""
    command = [sys.executable, "-m", "tests.rpc.service_process", "connect", "--secret"]
    command += [secret.hex(), "--address", address]
    with open(tmp_path / f"client-{time.monotonic_ns()}.log", "w") as sink:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=sink, text=True
        )
    try:
        _read_line(process, "CONNECTED", START_WAIT)
        yield process
    finally:
        _stop(process)


if __name__ == "__main__":
    sys.exit(main())
