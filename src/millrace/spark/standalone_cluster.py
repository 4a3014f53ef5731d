"""SparkStandaloneCluster: a Spark standalone cluster on this machine, from the jars pyspark ships.

What Spark's ``sbin/start-master.sh`` and ``sbin/start-worker.sh`` do (pip's pyspark has no
``sbin``): each process is ``$SPARK_HOME/bin/spark-class`` with the deploy ``Master`` or
``Worker`` class, ``SPARK_HOME`` being pyspark's own directory. ``spark-class`` execs the JVM,
so the PID recorded is the JVM's; each process runs in a session of its own (its process group
holds the executors a Worker launches), so it outlives the process that started it
(``millrace spark-cluster start``) until stopped by its PID. The directory holds::

    cluster.json                    host, ports and worker count of the running cluster
    master.pid, master.log          the Master
    worker-<i>.pid, worker-<i>.log  Worker i
    connect.pid, connect.log        the Spark Connect server (``connect_port``), if any
    work/worker-<i>/                Worker i's application directories (executor logs)

Every process binds ``host`` (loopback by default: ``SPARK_LOCAL_IP``); the Master's REST
submission server is off, and a port of the Master's already taken fails the start (Spark would
otherwise bind the next port, where no client looks). ``start`` waits until the Master's web
UI (``/json/``) lists every Worker ALIVE. Stopping is by PID and process group: SIGTERM,
SIGKILL after a grace period.

A Millrace TaskManager (or the embedded cluster) runs its SparkSession on the cluster with
``spark.master`` set to :attr:`SparkStandaloneCluster.master_url`; each SparkSession is a Spark
application, so ``spark.cores.max`` decides how many cores each takes (issue 15).

With ``connect_port`` a Spark Connect server runs too (what ``sbin/start-connect-server.sh``
does: ``spark-submit`` of the ``SparkConnectServer`` class, here ``spark-class`` with
``SparkSubmit``), one application of the cluster with every core it has (unless
``connect_settings`` bound it), its jobs FAIR-scheduled in one FAIR pool and its sessions kept
however long they idle; Millrace's processes
then open Connect sessions at :attr:`SparkStandaloneCluster.connect_url` (``spark.remote``) and
start no JVM of their own. Its Python workers run this interpreter (``spark.pyspark.python``), so
the job's functions find the packages they import.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from millrace.errors import LocalServerError

__all__ = ["SparkStandaloneCluster", "spark_home"]

_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
_CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_STARTED = "Spark Connect server started at"  # its log line once its gRPC port is bound
_FAIR_DEFAULT_POOL = """<?xml version="1.0"?>
<allocations>
  <pool name="default"><schedulingMode>FAIR</schedulingMode></pool>
</allocations>
"""  # jobs without a pool (every Connect session's) share the cores instead of queueing
_POLL = 0.2  # seconds between two looks at the Master's state
_LOG_TAIL_CHARS = 3000


def spark_home() -> Path:
    """pyspark's directory: its ``bin/spark-class`` and ``jars/`` make a Spark distribution.

    Raises:
        LocalServerError: If pyspark is not installed or lacks ``bin/spark-class``.
    """
    try:
        import pyspark
    except ImportError as error:
        raise LocalServerError("", f"pyspark is not installed: {error}", server="Spark") from None
    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file():
        raise LocalServerError(str(home), "pyspark has no bin/spark-class", server="Spark")
    return home


class SparkStandaloneCluster:
    """A Spark standalone Master and ``workers`` Workers in ``directory`` on ``host``.

    Args:
        directory: Directory of the cluster's state, logs, PID files and work directories.
        workers: Number of Workers (>= 1).
        cores: Cores each Worker offers.
        memory: Memory each Worker offers to executors, in Spark's notation (``"1g"``).
        host: Address every process binds and advertises.
        port: The Master's port; None picks a free one.
        webui_port: The Master's web UI port (its ``/json/`` state); None picks a free one.
        start_timeout: Seconds :meth:`start` waits for the Master and every Worker.
        stop_timeout: Seconds :meth:`stop` waits after SIGTERM before SIGKILL.
        prefix: A command every process runs behind, one that execs it (e.g. ``ip netns exec
            NAME``: the cluster on another host of a test network).
        connect_port: Port of a Spark Connect server started with the cluster; None: none.
        connect_settings: More Spark settings of the Connect server's application (e.g.
            ``spark.cores.max``, ``spark.executor.memory``: by default it takes every core and
            1 GiB executors).

    Threading:
        Not thread-safe: one thread (a test's, the CLI's) drives it. Another process finds a
        running cluster with :meth:`running_in`.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        workers: int = 1,
        cores: int = 1,
        memory: str = "1g",
        host: str = "127.0.0.1",
        port: int | None = None,
        webui_port: int | None = None,
        start_timeout: float = 120.0,
        stop_timeout: float = 10.0,
        prefix: list[str] | None = None,
        connect_port: int | None = None,
        connect_settings: dict[str, str] | None = None,
    ) -> None:
        if workers < 1 or cores < 1:
            raise ValueError("a Spark standalone cluster needs at least one Worker and one core")
        if connect_port is not None and not 0 < connect_port < 65536:
            raise ValueError(f"connect_port must be a port (1-65535), not {connect_port}")
        self.directory = Path(directory).resolve()
        self.workers, self.cores, self.memory, self.host = workers, cores, memory, host
        self.port = port if port is not None else _free_port(host)
        self.webui_port = webui_port if webui_port is not None else _free_port(host)
        self.start_timeout, self.stop_timeout = start_timeout, stop_timeout
        self.prefix = list(prefix or [])
        self.connect_port = connect_port
        self.connect_settings = dict(connect_settings or {})
        self._children: dict[str, subprocess.Popen[bytes]] = {}  # the processes started here
        self._log_starts: dict[str, int] = {}  # each log's size when its process was spawned

    @classmethod
    def running_in(cls, directory: Path | str) -> SparkStandaloneCluster | None:
        """The cluster whose Master runs from ``directory`` (by its ``cluster.json`` and PID
        file), or None."""
        path = Path(directory).resolve()
        try:
            state = json.loads((path / "cluster.json").read_text())
        except (OSError, ValueError):
            return None
        cluster = cls(
            path,
            workers=int(state["workers"]),
            host=state["host"],
            port=int(state["port"]),
            webui_port=int(state["webui_port"]),
            connect_port=state.get("connect_port"),
        )
        return cluster if cluster.pid("master") is not None else None

    @property
    def master_url(self) -> str:
        """``spark://host:port``, the value of ``spark.master`` for this cluster."""
        return f"spark://{self.host}:{self.port}"

    @property
    def connect_url(self) -> str | None:
        """``sc://host:port``, the value of ``spark.remote`` for this cluster's Connect server
        (None without one)."""
        return None if self.connect_port is None else f"sc://{self.host}:{self.connect_port}"

    def pid(self, process: str) -> int | None:
        """The PID of ``"master"``, ``"worker-<i>"`` or ``"connect"`` if it runs this cluster's
        process."""
        try:
            pid = int((self.directory / f"{process}.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _runs(pid, str(self.directory)) else None

    def start(self) -> None:
        """Start the Master, then every Worker, and wait until the Master lists them ALIVE;
        then the Connect server, if any, and wait until it accepts connections.

        Raises:
            LocalServerError: If java or pyspark's ``spark-class`` is missing, a Master of this
                directory already runs, or the Master or a Worker exits or is not ALIVE within
                ``start_timeout`` (everything started is stopped; the error holds a log's end).
        """
        if self.pid("master") is not None:
            raise self._error("a Spark master of this directory already runs", "master")
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise self._error("java is missing: install a JRE 17 or set JAVA_HOME", "master")
        self.directory.mkdir(parents=True, exist_ok=True)
        state = {"host": self.host, "port": self.port, "webui_port": self.webui_port}
        (self.directory / "cluster.json").write_text(json.dumps({**state, "workers": 0}))
        try:
            self._spawn(
                "master",
                _MASTER_CLASS,
                ["--host", self.host, "--port", str(self.port)],
                ["--webui-port", str(self.webui_port)],
            )
            self._wait_for(lambda s: s.get("status") == "ALIVE", "master", "the master ALIVE")
            for index in range(self.workers):
                self.start_worker(index)
            if self.connect_port is not None:
                self.start_connect_server()
            (self.directory / "cluster.json").write_text(
                json.dumps({**state, "workers": self.workers, "connect_port": self.connect_port})
            )
        except BaseException:
            self.stop()
            raise

    def start_worker(self, index: int) -> None:
        """Start Worker ``index`` (again, after :meth:`kill_worker`) and wait until the Master
        counts one more ALIVE Worker.

        Raises:
            LocalServerError: If it exits or is not ALIVE within ``start_timeout``.
        """
        name = f"worker-{index}"
        work = self.directory / "work" / name
        work.mkdir(parents=True, exist_ok=True)
        alive = self.alive_workers()
        self._spawn(
            name,
            _WORKER_CLASS,
            ["--host", self.host, "--cores", str(self.cores), "--memory", self.memory],
            ["--work-dir", str(work), "--webui-port", "0", self.master_url],
        )
        self._wait_for(
            lambda s: sum(w.get("state") == "ALIVE" for w in s.get("workers", ())) > alive,
            name,
            f"{name} ALIVE at the master",
        )

    def kill_worker(self, index: int) -> None:
        """SIGKILL Worker ``index`` and the executors it launched (its process group): a host's
        Spark processes crash.

        Raises:
            LocalServerError: If they still run 10 s after SIGKILL.
        """
        self._stop(f"worker-{index}", signal.SIGKILL, 10.0)

    def kill_connect_server(self) -> None:
        """SIGKILL the Connect server (its process group); the master then ends its application
        and the workers its executors.

        Raises:
            LocalServerError: If it still runs 10 s after SIGKILL.
        """
        self._stop("connect", signal.SIGKILL, 10.0)

    def start_connect_server(self) -> None:
        """Start the Connect server on ``connect_port`` (again, after
        :meth:`kill_connect_server`) and wait until it listens.

        Raises:
            ValueError: If the cluster has no ``connect_port``.
            LocalServerError: If it exits or does not listen within ``start_timeout``.
        """
        if self.connect_port is None:
            raise ValueError("this cluster has no connect_port")
        self._start_connect_server(self.connect_port)

    def executors(self, index: int) -> int:
        """How many executor JVMs (``CoarseGrainedExecutorBackend``) Worker ``index`` runs now:
        the members of its process group that are executors."""
        pid = self.pid(f"worker-{index}")
        if pid is None:
            return 0
        count = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                group = int(stat.read_text().rsplit(")", 1)[1].split()[2])
                command = (stat.parent / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            count += group == pid and b"CoarseGrainedExecutorBackend" in command
        return count

    def stop(self) -> None:
        """Stop every Worker (with its executors), then the Master: SIGTERM to each process
        group, SIGKILL after ``stop_timeout`` s. Idempotent.

        Raises:
            LocalServerError: If a process still runs 10 s after SIGKILL.
        """
        names = sorted(p.stem for p in self.directory.glob("worker-*.pid"))
        for name in ["connect", *names, "master"]:
            self._stop(name, signal.SIGTERM, self.stop_timeout)
        with contextlib.suppress(OSError):
            (self.directory / "cluster.json").unlink()

    def state(self, timeout: float = 2.0) -> dict[str, Any]:
        """The Master's state as its web UI's ``/json/`` gives it ({} if it does not answer):
        ``status``, ``workers`` (each with ``state``, ``cores``, ``coresused``),
        ``activeapps``, ``completedapps``, ..."""
        url = f"http://{self.host}:{self.webui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                state: dict[str, Any] = json.loads(answer.read())
        except (OSError, ValueError):
            return {}
        return state

    def alive_workers(self) -> int:
        """How many Workers the Master lists ALIVE."""
        return sum(w.get("state") == "ALIVE" for w in self.state().get("workers", ()))

    def log_tail(self, process: str, chars: int = _LOG_TAIL_CHARS) -> str:
        """The end of ``process``'s log ("" if there is none)."""
        try:
            return (self.directory / f"{process}.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def __enter__(self) -> SparkStandaloneCluster:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SparkStandaloneCluster({self.master_url}, {self.workers} workers)"

    def _start_connect_server(self, port: int) -> None:
        """Submit the Spark Connect server to the cluster and wait for its gRPC port."""
        pools = self.directory / "fairscheduler.xml"  # FAIR among the sessions' jobs
        pools.write_text(_FAIR_DEFAULT_POOL)
        settings = {
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(port),
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.pyspark.python": sys.executable,
            "spark.scheduler.mode": "FAIR",
            "spark.scheduler.allocation.file": str(pools),
            # a TaskManager idle for hours keeps its session (Spark's default drops it)
            "spark.connect.session.manager.defaultSessionTimeout": "-1",
            "spark.ui.enabled": "false",
            "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
            "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
            "spark.port.maxRetries": "0",
            **self.connect_settings,
        }
        configs = [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]
        self._spawn(
            "connect",
            _SUBMIT_CLASS,
            ["--master", self.master_url, "--class", _CONNECT_CLASS, *configs],
            ["--name", "Spark Connect server", "spark-internal"],
        )
        deadline = time.monotonic() + self.start_timeout
        # the server's own word in this start's part of the log, not only an accepting port:
        # another process may hold it
        while not (_STARTED in self._new_log("connect") and _accepts(self.host, port)):
            child = self._children["connect"]
            if child.poll() is not None:
                cause = _first_exception(self._new_log("connect"))
                raise self._error(f"connect exited with {child.returncode}{cause}", "connect")
            if time.monotonic() > deadline:
                raise self._error(f"no Connect server within {self.start_timeout:g} s", "connect")
            time.sleep(_POLL)

    def _new_log(self, process: str) -> str:
        """What ``process`` logged since it was last spawned (the log is appended to)."""
        try:
            with open(self.directory / f"{process}.log", "rb") as log:
                log.seek(self._log_starts.get(process, 0))
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def _spawn(self, name: str, main_class: str, args: list[str], more: list[str]) -> None:
        home = spark_home()
        environment = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": self.host,
            # no REST submission server; a taken port fails the start instead of binding the
            # next one (clients would look for the master where it is not)
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false -Dspark.port.maxRetries=0",
            "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": sys.executable,
        }
        command = [*self.prefix, str(home / "bin" / "spark-class"), main_class, *args, *more]
        with open(self.directory / f"{name}.log", "ab") as log:
            self._log_starts[name] = log.tell()
            log.write(f"--- millrace: starting {' '.join(command)}\n".encode())
            log.flush()
            process = subprocess.Popen(
                command,
                cwd=self.directory,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: its executors with it
            )
        (self.directory / f"{name}.pid").write_text(f"{process.pid}\n")
        self._children[name] = process

    def _wait_for(
        self, condition: Callable[[dict[str, Any]], bool], process: str, what: str
    ) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not condition(self.state()):
            child = self._children.get(process)
            if child is not None and child.poll() is not None:
                raise self._error(f"{process} exited with {child.returncode}", process)
            if time.monotonic() > deadline:
                raise self._error(f"no {what} within {self.start_timeout:g} s", process)
            time.sleep(_POLL)

    def _stop(self, name: str, signum: signal.Signals, timeout: float) -> None:
        pid = self.pid(name)
        if pid is not None:
            _signal_group(pid, signum)
            if not self._wait_gone(name, pid, timeout):
                _signal_group(pid, signal.SIGKILL)
                if not self._wait_gone(name, pid, 10.0):
                    raise self._error(f"{name} (pid {pid}) still runs 10 s after SIGKILL", name)
        with contextlib.suppress(OSError):
            (self.directory / f"{name}.pid").unlink()

    def _wait_gone(self, name: str, pid: int, timeout: float) -> bool:
        child = self._children.get(name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if child is not None and child.pid == pid:
                if child.poll() is not None:
                    return True
            elif not _runs(pid, str(self.directory)):
                return True
            time.sleep(0.05)
        return False

    def _error(self, reason: str, process: str) -> LocalServerError:
        server = {"master": "Spark master", "connect": "Spark Connect server"}.get(
            process, f"Spark {process}"
        )
        return LocalServerError(str(self.directory), reason, self.log_tail(process), server)


def _runs(pid: int, directory: str) -> bool:
    """Whether ``pid`` runs (not a zombie) a Spark deploy process of ``directory``: its
    command line names a deploy class, and its working directory is ``directory``."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except (OSError, IndexError):
        return False
    classes = (_MASTER_CLASS, _WORKER_CLASS, _SUBMIT_CLASS)
    deploy = {c.encode() for c in classes} & set(arguments)
    return state not in ("Z", "X") and bool(deploy) and cwd == directory


def _signal_group(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _first_exception(log: str) -> str:
    """``": "`` and the first line of ``log`` naming a Java exception, or ""."""
    line = next((line for line in log.splitlines() if "Exception: " in line), "")
    return f": {line.strip()[:500]}" if line else ""


def _accepts(host: str, port: int) -> bool:
    """Whether a TCP connection to ``host:port`` is accepted."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
