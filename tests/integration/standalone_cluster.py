"""A standalone cluster of real processes on loopback, for the failure tests.

Each process (``millrace cluster start --foreground``, ``millrace taskmanager start
--foreground``) runs in its own session, so ``close`` can SIGKILL it together with its Spark JVM
by process group, whatever state the test left it in (stopped, killed, running).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from millrace.cli.remote_cluster import RemoteCluster
from millrace.config import Configuration
from millrace.runtime.entrypoint.cluster_files import ClusterFiles
from tests.integration.helpers import ROOT
from tests.processes import descendants
from tests.waiting import wait_until

WAIT = 120.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class ClusterProcess:
    kind: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class StandaloneCluster:
    """Processes of one cluster, sharing ``io.tmp.dirs`` (the exchange store and the secret).

    Args:
        work: The test's directory.
        settings: Configuration keys for every process (``-D``).
    """

    work: Path
    settings: dict[str, str] = field(default_factory=dict)
    processes: list[ClusterProcess] = field(default_factory=list)
    host: str = "127.0.0.1"  # the JobManager's RPC and REST address, as others reach it

    def __post_init__(self) -> None:
        self.rpc_port = free_port()
        self.rest_port = free_port()
        self.settings = {
            "io.tmp.dirs": str(self.work / "tmp"),
            "jobmanager.rpc.port": str(self.rpc_port),
            "rest.port": str(self.rest_port),
            # every process its own free port: tests never fight for 9249 (ProcessInfo names it)
            "metrics.reporter.prom.port": "0",
            "spark.driver.memory": "1g",
            **self.settings,
        }

    @property
    def jobmanager(self) -> str:
        return f"{self.host}:{self.rpc_port}"

    @property
    def configuration(self) -> Configuration:
        return Configuration(self.settings)

    def _start(
        self,
        kind: str,
        command: list[str],
        extra: dict[str, str] | None = None,
        prefix: list[str] | None = None,
    ) -> ClusterProcess:
        """Start ``millrace COMMAND`` with every setting, then ``extra`` (which win), behind
        ``prefix`` (e.g. ``ip netns exec HOST``, which execs: the PID is millrace's)."""
        args = [*(prefix or []), str(ROOT / ".venv" / "bin" / "millrace"), *command]
        for key, value in {**self.settings, **(extra or {})}.items():
            args += ["-D", f"{key}={value}"]
        log = self.work / f"{kind}-{len(self.processes)}.log"
        with open(log, "wb") as sink:
            process = subprocess.Popen(
                args,
                cwd=self.work,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=sink,
                start_new_session=True,
            )
        started = ClusterProcess(kind, process, log)
        self.processes.append(started)
        return started

    @contextlib.contextmanager
    def running(self, taskmanagers: int = 2, slots: int = 2) -> Iterator[StandaloneCluster]:
        """A JobManager and ``taskmanagers`` TaskManagers of ``slots`` slots, all registered;
        every process stopped on exit."""
        try:
            self.start_jobmanager()
            for _ in range(taskmanagers):
                self.start_taskmanager(slots=slots)
            self.wait_for_taskmanagers(taskmanagers)
            yield self
        finally:
            self.close()

    def start_jobmanager(
        self, extra: dict[str, str] | None = None, prefix: list[str] | None = None
    ) -> ClusterProcess:
        """Start a JobManager and wait until its REST API answers."""
        command = ["cluster", "start", "--foreground"]
        jobmanager = self._start("jobmanager", command, extra, prefix)
        self.wait_until(lambda: self._rest_up(jobmanager), what="the JobManager's REST API")
        return jobmanager

    def start_taskmanager(
        self, slots: int = 2, extra: dict[str, str] | None = None, prefix: list[str] | None = None
    ) -> ClusterProcess:
        return self._start(
            "taskmanager",
            [
                "taskmanager",
                "start",
                "--foreground",
                "--jobmanager",
                self.jobmanager,
                "--slots",
                str(slots),
            ],
            extra,
            prefix,
        )

    def _rest_up(self, jobmanager: ClusterProcess) -> bool:
        if jobmanager.process.poll() is not None:
            raise AssertionError(f"the JobManager exited:\n{jobmanager.output()[-3000:]}")
        try:
            self.rest("/overview")
        except httpx.HTTPError:
            return False
        return True

    def rest(self, path: str) -> Any:
        response = httpx.get(f"http://{self.host}:{self.rest_port}{path}", timeout=10)
        response.raise_for_status()
        return response.json()

    def job(self, job_id: str) -> dict[str, Any]:
        """The job's REST view (``/jobs/{id}``), or ``{}`` while the Dispatcher does not know the
        job (404): a submission is asynchronous, so the first polls can come before it arrives.

        Raises:
            httpx.HTTPError: Any other failure of the REST call.
        """
        response = httpx.get(f"http://{self.host}:{self.rest_port}/jobs/{job_id}", timeout=10)
        if response.status_code == 404:
            return {}
        response.raise_for_status()
        return response.json()

    def taskmanagers(self) -> list[dict[str, Any]]:
        """The TaskManagers registered at the ResourceManager, as REST shows them."""
        return self.rest("/taskmanagers")["taskmanagers"]

    def wait_for_taskmanagers(self, count: int) -> None:
        self.wait_until(lambda: len(self.taskmanagers()) == count, what=f"{count} TaskManagers")

    def pid_of(self, resource_id: str) -> int:
        """The process of a registered TaskManager (its RPC port is in its resource id)."""
        port = resource_id.split("-")[1]
        for info in ClusterFiles(self.configuration).processes():
            if info.kind == "taskmanager" and info.rpc_address.endswith(f":{port}"):
                return info.pid
        raise AssertionError(f"no process of TaskManager {resource_id}")

    def remote(self) -> RemoteCluster:
        """A client of this cluster (the test process proves the cluster's secret)."""
        return RemoteCluster(self.configuration, self.jobmanager).start()

    def wait_until(self, predicate, timeout: float = WAIT, what: str = "condition") -> float:  # type: ignore[no-untyped-def]
        """Poll ``predicate`` every 50 ms; returns the seconds it took.

        Raises:
            AssertionError: After ``timeout`` s, with the end of every process's log.
        """
        return wait_until(predicate, what=what, timeout=timeout, seen=self._logs)

    def _logs(self) -> str:
        return "\n".join(f"--- {p.kind} {p.pid}\n{p.output()[-2000:]}" for p in self.processes)

    def close(self) -> None:
        """SIGKILL every process group (processes and their JVMs) and reap them."""
        for proc in self.processes:
            try:
                os.killpg(proc.pid, signal.SIGCONT)  # a stopped group cannot die otherwise
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.process.wait(timeout=30)
        for proc in self.processes:  # JVMs reparented after their Python died
            _wait_group_gone(proc.pid)


def _wait_group_gone(pgid: int, timeout: float = 10.0) -> None:
    """SIGKILL process group ``pgid`` until it is gone.

    Raises:
        AssertionError: If members remain after ``timeout`` s.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, f"process group {pgid} outlived SIGKILL"
        time.sleep(0.05)


def run_client(
    cluster: StandaloneCluster,
    script: Path,
    *args: object,
    extra: dict[str, str] | None = None,
) -> ClusterProcess:
    """``millrace run SCRIPT ARGS --jobmanager ...`` with the cluster's settings and ``extra``."""
    command = ["run", str(script), *map(str, args), "--jobmanager", cluster.jobmanager]
    return cluster._start("client", command, extra)


def watch_client(
    cluster: StandaloneCluster, client: ClusterProcess, known: set[str]
) -> tuple[float, set[str]]:
    """Follow ``client`` until it exits: (seconds from its start until the JobManager listed a
    job not in ``known``, every command line its process tree ran meanwhile)."""
    started, submitted = time.monotonic(), None
    commands: set[str] = set()

    def done() -> bool:
        nonlocal submitted
        commands.update(descendants(client.pid).values())
        if submitted is None and {job["id"] for job in cluster.rest("/jobs")["jobs"]} - known:
            submitted = time.monotonic() - started
        return client.process.poll() is not None

    cluster.wait_until(done, what="millrace run exiting")
    assert submitted is not None, client.output()[-3000:]
    return submitted, commands
