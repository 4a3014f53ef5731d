"""LocalZooKeeper: one standalone ZooKeeper server on this machine, for development and tests.

What Flink's ``start-zookeeper-quorum.sh`` does for a quorum of one: write ``zoo.cfg`` into a
directory, run ``QuorumPeerMain`` (Debian's ``zookeeper`` package, jars in ``/usr/share/java``)
as a child JVM and wait until it serves. The directory holds::

    zoo.cfg          the server's configuration (rewritten at each start)
    data/            snapshots and transaction log: znodes survive stop/start and restart
    zookeeper.log    the JVM's stdout and stderr, appended to across restarts
    zookeeper.pid    the running server's PID (removed when it stops)

The server is started in a session of its own, so it outlives the process that started it
(``millrace zookeeper start``) until stopped by its PID: :meth:`LocalZooKeeper.running_in`
finds a server of a directory from another process, trusting the PID file only while
``/proc/<pid>/cmdline`` is that directory's ``QuorumPeerMain``.

Its tick is 500 ms and its session timeout bounds are explicit (1 s to 600 s), so a client may
ask for any ``high-availability.zookeeper.client.session-timeout`` the configuration accepts
(ZooKeeper's default bounds, 2 and 20 ticks, would cap it at 10 s). The transaction log is not
fsynced (``forceSync=no``): znodes survive a restart or a SIGKILL of the server, not a crash of
the machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from millrace.errors import LocalServerError

__all__ = ["DEFAULT_JAR_DIR", "INSTALL_HINT", "LocalZooKeeper", "zookeeper_classpath"]

DEFAULT_JAR_DIR = Path("/usr/share/java")
INSTALL_HINT = "apt-get install zookeeper (or bash scripts/ensure_system_deps.sh)"
_JAVA_INSTALL_HINT = (
    "apt-get install openjdk-17-jre-headless (or bash scripts/ensure_system_deps.sh), or set "
    "JAVA_HOME"
)
_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_JVM_OPTIONS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # starts faster; a development server is never CPU-bound
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.jmx.log4j.disable=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS",
)
_POLL = 0.05  # seconds between two checks of the server's state
_LOG_TAIL_CHARS = 3000


def zookeeper_classpath(jar_dir: Path = DEFAULT_JAR_DIR) -> str:
    """The JVM classpath of ZooKeeper's jars in ``jar_dir``.

    Debian's ``zookeeper.jar`` names its dependencies (``zookeeper-jute``, netty, slf4j-api,
    ...) in its manifest's ``Class-Path``, so the classpath is that jar plus ``slf4j-simple``
    (when present) to send the server's log to stderr. A directory without ``zookeeper.jar``
    but with ``zookeeper-3.*.jar`` (a release tarball's ``lib/``) is taken whole (``DIR/*``).

    Args:
        jar_dir: Directory of the jars.

    Returns:
        Paths joined with ``:``.

    Raises:
        LocalServerError: If ``jar_dir`` holds no ZooKeeper jar (the message names the
            install command).
    """
    main = jar_dir / "zookeeper.jar"
    if main.is_file():
        logger = jar_dir / "slf4j-simple.jar"
        return ":".join(str(p) for p in (main, logger) if p.is_file())
    if any(jar_dir.glob("zookeeper-3.*.jar")):
        return f"{jar_dir}/*"
    raise LocalServerError(
        "",
        f"the ZooKeeper jars are missing: no zookeeper.jar in {jar_dir}; install them with "
        f"{INSTALL_HINT}",
    )


def _find_java(java: str | None) -> str:
    """``java`` if given, else ``$JAVA_HOME/bin/java``, else ``java`` on PATH.

    Raises:
        LocalServerError: If that executable does not exist.
    """
    if java is None:
        home = os.environ.get("JAVA_HOME", "")
        candidate = Path(home) / "bin" / "java"
        java = str(candidate) if home and candidate.is_file() else "java"
    found = shutil.which(java)
    if found is None:
        raise LocalServerError(
            "", f"java is missing ({java!r} not found); install it with {_JAVA_INSTALL_HINT}"
        )
    return found


class LocalZooKeeper:
    """A standalone ZooKeeper server in ``data_dir`` on ``host:port``.

    Args:
        data_dir: Directory of the server's configuration, data, log and PID file; created at
            start. The same directory restarts the server with its znodes.
        port: Client port (1-65535); it must be free at start.
        host: Address the client port binds (``clientPortAddress``); loopback by default.
        tick_time_ms: ZooKeeper's tick, in milliseconds (heartbeats; the session timeout
            bounds below are set explicitly).
        min_session_timeout_ms: Shortest session timeout granted, in milliseconds.
        max_session_timeout_ms: Longest session timeout granted, in milliseconds.
        jar_dir: Directory of ZooKeeper's jars (see :func:`zookeeper_classpath`).
        java: The java executable; default ``$JAVA_HOME/bin/java`` or ``java`` on PATH.
        start_timeout: Seconds :meth:`start` waits for the server to serve.
        stop_timeout: Seconds :meth:`stop` waits after SIGTERM before SIGKILL.

    Threading:
        Not thread-safe: one thread (a test's, the CLI's) drives it. Another process may stop
        the server through :meth:`running_in`.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        port: int = 2181,
        host: str = "127.0.0.1",
        tick_time_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 600_000,
        jar_dir: Path | str = DEFAULT_JAR_DIR,
        java: str | None = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 10.0,
    ) -> None:
        if not 0 < port < 65536:
            raise ValueError(f"port must be 1-65535, got {port}")
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.host = host
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.jar_dir = Path(jar_dir)
        self.java = java
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def running_in(cls, data_dir: Path | str) -> LocalZooKeeper | None:
        """The server running in ``data_dir``, started by this or another process.

        Args:
            data_dir: A directory a LocalZooKeeper was started in.

        Returns:
            A LocalZooKeeper on the host and port of the directory's ``zoo.cfg``, whose
            :meth:`stop` and :meth:`kill` signal the PID of its PID file; None if no server of
            that directory runs (a stale PID file is removed).
        """
        directory = Path(data_dir).resolve()
        settings = _read_config(directory / "zoo.cfg")
        server = cls(
            directory,
            port=int(settings.get("clientPort", "2181")),
            host=settings.get("clientPortAddress", "127.0.0.1"),
        )
        if server.pid is None:
            server.pid_file.unlink(missing_ok=True)
            return None
        return server

    @property
    def connect_string(self) -> str:
        """``host:port``, for ``high-availability.zookeeper.quorum`` and kazoo's ``hosts``."""
        return f"{self.host}:{self.port}"

    @property
    def config_file(self) -> Path:
        """The server's ``zoo.cfg``."""
        return self.data_dir / "zoo.cfg"

    @property
    def log_file(self) -> Path:
        """The server's stdout and stderr (appended to at each start)."""
        return self.data_dir / "zookeeper.log"

    @property
    def pid_file(self) -> Path:
        """Holds the running server's PID."""
        return self.data_dir / "zookeeper.pid"

    @property
    def pid(self) -> int | None:
        """The running server's PID; None if it does not run."""
        if self._process is not None:
            return self._process.pid if self._process.poll() is None else None
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if self._is_our_server(pid) else None

    def start(self) -> None:
        """Write ``zoo.cfg``, start the server and wait until it serves clients.

        Raises:
            LocalServerError: If java or the jars are missing, a server of this directory
                already runs, the port is taken, or the server exits or does not serve within
                ``start_timeout`` (it is killed then; the error holds its log's end).
        """
        command = [
            _find_java(self.java),
            *_JVM_OPTIONS,
            "-cp",
            self._classpath(),
            _MAIN_CLASS,
            str(self.config_file),
        ]
        running = self.pid
        if running is not None:
            raise self._error(f"a server of this directory already runs (pid {running})")
        self._check_port_free()
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        self._write_config()
        with open(self.log_file, "ab") as log:
            log.write(f"--- millrace: starting {' '.join(command)}\n".encode())
            log.flush()
            self._process = subprocess.Popen(
                command,
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives the CLI; no terminal signal reaches it
            )
        _write_atomically(self.pid_file, f"{self._process.pid}\n")
        try:
            self._wait_until_serving()
        except BaseException:
            self.kill()
            raise

    def stop(self) -> None:
        """Stop the server: SIGTERM to its PID, SIGKILL if it still runs after
        ``stop_timeout`` s. Idempotent; znodes are kept for the next start.

        Raises:
            LocalServerError: If the server still runs 10 s after SIGKILL.
        """
        pid = self.pid
        if pid is not None:
            _signal(pid, signal.SIGTERM)
            if not self._wait_gone(pid, self.stop_timeout):
                self._kill_and_wait(pid)
        self._forget()

    def kill(self) -> None:
        """SIGKILL the server (a crash, for failover tests). Idempotent; znodes are kept.

        Raises:
            LocalServerError: If the server still runs 10 s after SIGKILL.
        """
        pid = self.pid
        if pid is not None:
            self._kill_and_wait(pid)
        self._forget()

    def restart(self) -> None:
        """:meth:`stop`, then :meth:`start` on the same directory and port: the znodes (and
        the sessions, which clients resume within their timeout) survive.

        Raises:
            LocalServerError: As :meth:`stop` and :meth:`start` do.
        """
        self.stop()
        self.start()

    def is_serving(self, timeout: float = 1.0) -> bool:
        """Whether the server answers ``srvr`` as serving clients.

        Args:
            timeout: Seconds for connecting and reading.
        """
        answer = self.four_letter_word("srvr", timeout)
        return "Zookeeper version" in answer and "not currently serving" not in answer

    def four_letter_word(self, command: str, timeout: float = 1.0) -> str:
        """The server's answer to a four-letter command (``ruok``, ``srvr``, ``stat``; the
        only ones its ``4lw.commands.whitelist`` allows).

        Args:
            command: The four letters.
            timeout: Seconds for connecting and reading.

        Returns:
            The answer; "" if nothing answers at ``host:port``.
        """
        chunks = []
        try:
            with socket.create_connection((self.host, self.port), timeout=timeout) as conn:
                conn.sendall(command.encode("ascii"))
                while chunk := conn.recv(4096):
                    chunks.append(chunk)
        except OSError:
            return ""
        return b"".join(chunks).decode(errors="replace")

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        """The last ``chars`` characters of the server's log ("" if there is none)."""
        try:
            with open(self.log_file, "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - chars))
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> LocalZooKeeper:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LocalZooKeeper({self.connect_string}, data_dir={str(self.data_dir)!r})"

    def _classpath(self) -> str:
        try:
            return zookeeper_classpath(self.jar_dir)
        except LocalServerError as error:
            raise self._error(error.reason) from None

    def _write_config(self) -> None:
        settings = {
            "tickTime": self.tick_time_ms,
            "minSessionTimeout": self.min_session_timeout_ms,
            "maxSessionTimeout": self.max_session_timeout_ms,
            "dataDir": self.data_dir / "data",
            "clientPort": self.port,
            "clientPortAddress": self.host,
            "maxClientCnxns": 0,  # every client comes from loopback: no per-address limit
            "forceSync": "no",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat",
            "autopurge.snapRetainCount": 3,
            "autopurge.purgeInterval": 1,
        }
        text = "".join(f"{key}={value}\n" for key, value in settings.items())
        _write_atomically(self.config_file, "# written by millrace LocalZooKeeper\n" + text)

    def _check_port_free(self) -> None:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
            try:
                probe.bind((self.host, self.port))
            except OSError as error:
                raise self._error(
                    f"cannot listen on {self.connect_string} ({error.strerror}): another "
                    "process holds the port; choose another one"
                ) from None

    def _wait_until_serving(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout
        while not self.is_serving(timeout=0.5):
            code = self._process.poll()
            if code is not None:
                raise self._error(f"the server exited with code {code}", self.log_tail())
            if time.monotonic() > deadline:
                raise self._error(
                    f"the server did not serve on {self.connect_string} within "
                    f"{self.start_timeout:g} s",
                    self.log_tail(),
                )
            time.sleep(_POLL)

    def _is_our_server(self, pid: int) -> bool:
        """Whether ``pid`` runs (not a zombie) this directory's ``QuorumPeerMain``."""
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            return False
        wanted = {_MAIN_CLASS.encode(), str(self.config_file).encode()}
        return state not in ("Z", "X") and wanted <= set(arguments)

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        """Until ``pid`` no longer runs (reaped if it is our child); False on timeout."""
        deadline = time.monotonic() + timeout
        if self._process is not None and self._process.pid == pid:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout)
            return self._process.poll() is not None
        while self._is_our_server(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(_POLL)
        return True

    def _kill_and_wait(self, pid: int) -> None:
        _signal(pid, signal.SIGKILL)
        if not self._wait_gone(pid, 10.0):
            raise self._error(f"the server (pid {pid}) still runs 10 s after SIGKILL")

    def _forget(self) -> None:
        self._process = None
        self.pid_file.unlink(missing_ok=True)

    def _error(self, reason: str, log_tail: str = "") -> LocalServerError:
        return LocalServerError(str(self.data_dir), reason, log_tail)


def _read_config(path: Path) -> dict[str, str]:
    """``key=value`` lines of a ``zoo.cfg`` ({} if it cannot be read)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
