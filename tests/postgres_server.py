"""A private PostgreSQL server on loopback for the tests (Debian's ``postgresql`` package).

``PostgresServer`` runs ``initdb`` (trust authentication) in a temporary directory owned by
the ``postgres`` user (the tests run as root; PostgreSQL refuses to), then ``pg_ctl start`` on a
free port of 127.0.0.1 with its socket in that directory, so it shares nothing with another
server on the machine. ``stop`` is ``pg_ctl stop -m immediate``, then SIGKILL by the PID in
``postmaster.pid`` if the postmaster outlived it. Fixtures: ``postgres_server`` (one per test
session), ``postgres_conninfo`` (a fresh database per test) and ``private_postgres_server``
(a server of the test's own, for tests that stop and restart it). A server that cannot be
installed (``scripts/ensure_system_deps.sh``) or started fails the test that needs it, with the
reason (``tests.real_parts``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_parts import part_unavailable

ROOT = Path(__file__).resolve().parents[1]
START_WAIT = 60.0


class PostgresUnavailable(Exception):
    """PostgreSQL cannot be installed or started here."""


def postgres_bin_dir() -> Path:
    """``/usr/lib/postgresql/<highest version>/bin``, installing Debian's ``postgresql`` with
    ``scripts/ensure_system_deps.sh`` if it is missing.

    Raises:
        PostgresUnavailable: If it is missing and cannot be installed.
    """
    found = _bin_dirs()
    if not found:
        install = subprocess.run(
            ["bash", str(ROOT / "scripts" / "ensure_system_deps.sh")],
            capture_output=True,
            text=True,
            timeout=900,
        )
        found = _bin_dirs()
        if not found:
            raise PostgresUnavailable(
                "PostgreSQL binaries are missing under /usr/lib/postgresql/*/bin and "
                f"scripts/ensure_system_deps.sh could not install them: {install.stderr[-500:]}"
            )
    return found[-1]


def _bin_dirs() -> list[Path]:
    dirs = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")]
    return sorted(dirs, key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresServer:
    """One PostgreSQL server in its own directory, on 127.0.0.1:``port``.

    Args:
        bin_dir: Directory of ``initdb``, ``pg_ctl`` and ``postgres``.

    Threading:
        Test thread only.
    """

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.directory = Path(tempfile.mkdtemp(prefix="millrace-pg-"))
        self.data = self.directory / "data"
        self.log = self.directory / "server.log"
        self.port = free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.directory, "postgres", "postgres")

    def conninfo(self, dbname: str = "postgres") -> str:
        """libpq conninfo of database ``dbname`` on this server (user ``postgres``)."""
        return f"host=127.0.0.1 port={self.port} dbname={dbname} user=postgres"

    def init(self) -> None:
        """``initdb`` with trust authentication (no fsync: a test's data need not survive a
        machine crash).

        Raises:
            PostgresUnavailable: If initdb fails.
        """
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
            what="initdb",
        )

    def start(self) -> None:
        """Start the server and wait until it accepts connections (``pg_ctl -w``).

        Raises:
            PostgresUnavailable: If it does not start (the log's end is in the message).
        """
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(int(START_WAIT)),
            "start",
            what="pg_ctl start",
        )

    def stop(self) -> None:
        """``pg_ctl stop -m immediate``; SIGKILL by PID if the postmaster is still alive."""
        if not self.data.exists():
            return
        pid = self.pid()
        if pid is None:
            return
        with contextlib.suppress(PostgresUnavailable):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", what="stop")
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _wait_gone(pid)

    def pid(self) -> int | None:
        """The postmaster's PID from ``postmaster.pid``, or None if it is not running."""
        try:
            first = (self.data / "postmaster.pid").read_text().splitlines()[0]
        except (OSError, IndexError):
            return None
        pid = int(first)
        return pid if _alive(pid) else None

    def create_database(self) -> str:
        """A new empty database; returns its conninfo."""
        import psycopg

        name = f"test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.conninfo(name)

    def close(self) -> None:
        """Stop the server and delete its directory."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, program: str, *args: str, what: str) -> None:
        command = [str(self.bin_dir / program), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                cwd=self.directory,
                timeout=START_WAIT + 30,
            )
        except subprocess.TimeoutExpired as expired:
            raise PostgresUnavailable(
                f"{what} did not finish within {expired.timeout:g} s"
            ) from None
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-1000:] if self.log.exists() else ""
            raise PostgresUnavailable(
                f"{what} failed ({done.returncode}): {done.stderr.strip()[-1000:]} {log}"
            )


def start_server() -> PostgresServer:
    """A started server (up to three ports tried).

    Raises:
        PostgresUnavailable: If PostgreSQL is missing and cannot be installed, or no start
            succeeds.
    """
    bin_dir = postgres_bin_dir()
    error: PostgresUnavailable | None = None
    for _ in range(3):
        server = PostgresServer(bin_dir)
        try:
            server.init()
            server.start()
            return server
        except PostgresUnavailable as failed:  # e.g. the free port was taken meanwhile
            error = failed
            server.close()
    assert error is not None
    raise error


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_gone(pid: int, timeout: float = 30.0) -> None:
    """Until ``pid`` is gone (a SIGKILLed postmaster is reaped by init, not by us).

    Raises:
        AssertionError: If it still runs after ``timeout`` s.
    """
    deadline = time.monotonic() + timeout
    while _alive(pid):
        assert time.monotonic() < deadline, (
            f"postmaster {pid} still runs {timeout:g} s after SIGKILL"
        )
        time.sleep(0.05)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole test session, stopped (by PID if need be) at its end."""
    try:
        server = start_server()
    except PostgresUnavailable as error:
        part_unavailable("PostgreSQL", error)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def postgres_conninfo(postgres_server: PostgresServer) -> str:
    """conninfo of a fresh database of the session's server, for one test."""
    return postgres_server.create_database()


@pytest.fixture
def private_postgres_server() -> Iterator[PostgresServer]:
    """A server of the test's own (it may stop and start it), closed in teardown."""
    try:
        server = start_server()
    except PostgresUnavailable as error:
        part_unavailable("PostgreSQL", error)
    try:
        yield server
    finally:
        server.close()
