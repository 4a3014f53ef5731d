"""A standalone ZooKeeper server on loopback for the tests (Debian's ``zookeeper`` package).

:func:`running_zookeeper` starts a :class:`LocalZooKeeper` in a directory of the test's on a
free port of 127.0.0.1 (up to three ports tried: a free port may be taken meanwhile) and always
stops it by its PID, SIGKILL included, when the block ends. The fixture ``zookeeper`` gives each
test a server of its own (it may restart or kill it). ZooKeeper's jars are installed with
``scripts/ensure_system_deps.sh`` when missing; a server that cannot be installed or started
fails the test that needs it, with the reason (``tests.real_parts``).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.errors import LocalServerError
from millrace.runtime.highavailability.local_zookeeper import DEFAULT_JAR_DIR, LocalZooKeeper
from tests.real_parts import part_unavailable

__all__ = ["free_port", "running_zookeeper", "zookeeper"]

ROOT = Path(__file__).resolve().parents[1]
START_WAIT = 60.0  # seconds a server gets to serve
STOP_WAIT = 10.0  # seconds between SIGTERM and SIGKILL


def free_port() -> int:
    """A port of 127.0.0.1 free right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ensure_zookeeper_installed() -> None:
    """Install Debian's ``zookeeper`` with ``scripts/ensure_system_deps.sh`` if its jar is
    missing (a failed install shows in the start error that follows)."""
    if not (DEFAULT_JAR_DIR / "zookeeper.jar").is_file():
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "ensure_system_deps.sh")],
            capture_output=True,
            timeout=900,
        )


@contextlib.contextmanager
def running_zookeeper(directory: Path) -> Iterator[LocalZooKeeper]:
    """A started server with its data in ``directory``, stopped by PID when the block ends.

    Raises:
        LocalServerError: If ZooKeeper cannot be installed, or no start succeeds.
    """
    ensure_zookeeper_installed()
    error: LocalServerError | None = None
    for _ in range(3):
        server = LocalZooKeeper(
            directory, port=free_port(), start_timeout=START_WAIT, stop_timeout=STOP_WAIT
        )
        try:
            server.start()  # kills the server itself if it does not serve
        except LocalServerError as failed:
            error = failed
            continue
        try:
            yield server
        finally:
            server.stop()
        return
    assert error is not None
    raise error


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[LocalZooKeeper]:
    """A ZooKeeper server of the test's own on loopback (it may restart or kill it), stopped
    by PID in teardown."""
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(running_zookeeper(tmp_path / "zookeeper"))
        except LocalServerError as error:
            part_unavailable("ZooKeeper", error)
        yield server
