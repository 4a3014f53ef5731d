"""High-availability soak (issue 12): no spurious leader change in a long run with TaskManager
kills and both CPUs busy, under the default HA settings.

A LocalZooKeeper in a temporary directory, two JobManager processes contending for the
leadership (``cluster start --foreground``, each on its own free ports), TaskManager processes
(2 slots each) and an unbounded job: a DirectorySource over an inbox that this script keeps
dropping small Parquet files of the flights into (written aside, then renamed in), the
flight-delays aggregation into a ParquetSink, checkpoints every 2 s. Every ``--kill-every``
seconds a random busy TaskManager (one with a used slot) is killed with SIGKILL and a
replacement started; ``--burners`` child processes spin in plain Python busy loops so that the
CPUs are busy. The HA keys are left at their defaults (session timeout 6 s, suspended
connections tolerated); only the restart strategy allows more attempts than the kills.

The leadership is watched in ZooKeeper: the leader session id in
``leader/dispatcher/connection_info`` (a kazoo DataWatch, and a poll every 0.2 s) and the
children of ``leader/latch``. A leader change is any change of the leader session id after the
first one seen. Also counted: the job's restarts (REST ``/jobs/{id}``) and its completed
checkpoints (REST ``/jobs/{id}/checkpoints``). The summary is printed at the end; the exit code
is 1 if the leader changed or the job is not RUNNING at the end.

Loopback only; every process started (ZooKeeper, JobManagers, TaskManagers with their Spark
JVMs, burners) is stopped by its PID or process group, also on Ctrl-C.

Usage: ``PYTHONPATH=src .venv/bin/python bench/ha_soak.py [--duration 600] [--kill-every 60]
[--burners 2] [--taskmanagers 3] [--work DIR]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tests.integration holds the standalone cluster's processes
    sys.path.insert(0, str(ROOT))

from tests.integration.standalone_cluster import (  # noqa: E402
    ClusterProcess,
    StandaloneCluster,
    free_port,
)
from tests.integration.streams import build_inbox_delays  # noqa: E402

from millrace import Configuration, StreamExecutionEnvironment  # noqa: E402
from millrace.cli.remote_cluster import RemoteCluster  # noqa: E402
from millrace.runtime.highavailability.leader_retrieval import retrieve_leader  # noqa: E402
from millrace.runtime.highavailability.local_zookeeper import LocalZooKeeper  # noqa: E402
from millrace.runtime.highavailability.zookeeper_client import (  # noqa: E402
    start_zookeeper_client,
    stop_zookeeper_client,
)
from millrace.runtime.highavailability.zookeeper_paths import (  # noqa: E402
    DISPATCHER,
    REST_SERVER,
    ZooKeeperPaths,
)
from millrace.spark.spark_session import create_spark_session, stop_spark_session  # noqa: E402

FLIGHTS = ROOT / "data" / "flights"
POLL = 0.2  # seconds between two looks at the leadership
JOB_POLL = 2.0  # seconds between two looks at the job over REST
SETTINGS = {
    "high-availability.type": "zookeeper",
    "execution.checkpointing.interval": "2 s",
    # the kills outnumber the default 3 attempts; Flink's default with checkpointing is unbounded
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "1000000",
}


@dataclass
class Leadership:
    """What the watch saw: leader session ids of the Dispatcher and latch children, in time."""

    started: float
    session_id: str | None = None
    present: bool = False  # connection_info exists
    changes: list[tuple[float, str, str]] = field(default_factory=list)  # (t, before, after)
    gone: list[float] = field(default_factory=list)  # when connection_info vanished
    latch: list[str] = field(default_factory=list)
    latch_changes: list[tuple[float, list[str], list[str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw_connection_info(self, data: bytes | None) -> None:
        now = time.monotonic() - self.started
        session_id = _session_id(data)
        with self.lock:
            if session_id is None:
                if self.present:
                    self.gone.append(now)
                    print(f"[{now:7.1f} s] no dispatcher leader in ZooKeeper", flush=True)
                self.present = False
                return
            self.present = True
            if self.session_id is not None and session_id != self.session_id:
                self.changes.append((now, self.session_id, session_id))
                print(
                    f"[{now:7.1f} s] LEADER CHANGE: dispatcher session {self.session_id} -> "
                    f"{session_id}",
                    flush=True,
                )
            self.session_id = session_id

    def saw_latch(self, children: list[str]) -> None:
        now = time.monotonic() - self.started
        children = sorted(children)
        with self.lock:
            if self.latch and children != self.latch:
                self.latch_changes.append((now, self.latch, children))
                print(f"[{now:7.1f} s] latch children {self.latch} -> {children}", flush=True)
            self.latch = children


def _session_id(data: bytes | None) -> str | None:
    if not data:
        return None
    try:
        return str(json.loads(data)["leader_session_id"])
    except (ValueError, KeyError, TypeError):
        return None


class Inbox(threading.Thread):
    """Drops ``rows`` flights into ``inbox`` every ``every`` s, in time order; after the last
    month it starts over one year later (event time keeps advancing)."""

    def __init__(self, inbox: Path, rows: int, every: float) -> None:
        super().__init__(name="inbox", daemon=True)
        self.inbox, self.rows, self.every = inbox, rows, every
        frames = [pd.read_parquet(f) for f in sorted(FLIGHTS.glob("flights-*.parquet"))]
        flights = pd.concat(frames, ignore_index=True).sort_values("time_hour", kind="stable")
        self.flights = pa.Table.from_pandas(flights, preserve_index=False)
        self.files = 0
        self.stopping = threading.Event()

    def drop(self) -> None:
        start = (self.files * self.rows) % self.flights.num_rows
        cycle = (self.files * self.rows) // self.flights.num_rows
        chunk = self.flights.slice(start, self.rows).to_pandas()
        chunk["time_hour"] = chunk["time_hour"] + pd.Timedelta(days=364 * cycle)
        hidden = self.inbox / f".incoming-{self.files:06d}.parquet"
        pq.write_table(pa.Table.from_pandas(chunk, preserve_index=False), hidden)
        hidden.rename(self.inbox / f"flights-{self.files:06d}.parquet")
        self.files += 1

    def run(self) -> None:
        while not self.stopping.wait(self.every):
            self.drop()


class Soak:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.zookeeper = LocalZooKeeper(work / "zookeeper", port=free_port())
        self.burners: list[subprocess.Popen[bytes]] = []
        self.kazoo: Any = None
        self.cluster: StandaloneCluster | None = None
        self.jobmanagers: list[ClusterProcess] = []
        self.taskmanagers: list[ClusterProcess] = []
        self.inbox: Inbox | None = None

    # --- processes -------------------------------------------------------------------------

    def start(self) -> None:
        self.zookeeper.start()
        settings = {
            **SETTINGS,
            "high-availability.zookeeper.quorum": self.zookeeper.connect_string,
            "high-availability.storageDir": str(self.work / "ha"),
            "high-availability.cluster-id": f"/soak-{os.getpid()}",
            "state.checkpoints.dir": str(self.work / "checkpoints"),
        }
        self.cluster = StandaloneCluster(self.work, settings)
        self.configuration = Configuration(self.cluster.settings)
        self.paths = ZooKeeperPaths.from_configuration(self.configuration)
        self.kazoo = start_zookeeper_client(self.configuration)
        self.jobmanagers.append(self.start_jobmanager())
        self.leader_rest(timeout=120)
        self.jobmanagers.append(self.start_jobmanager())
        for _ in range(self.args.taskmanagers):
            self.start_taskmanager()
        self.cluster.wait_until(
            lambda: len(self.rest("/taskmanagers")["taskmanagers"]) == self.args.taskmanagers,
            timeout=300,
            what=f"{self.args.taskmanagers} TaskManagers registered at the leader",
        )

    def start_jobmanager(self) -> ClusterProcess:
        assert self.cluster is not None
        ports = {"jobmanager.rpc.port": str(free_port()), "rest.port": str(free_port())}
        return self.cluster._start("jobmanager", ["cluster", "start", "--foreground"], ports)

    def start_taskmanager(self) -> ClusterProcess:
        """A TaskManager that finds the ResourceManager's leader in ZooKeeper."""
        assert self.cluster is not None
        command = ["taskmanager", "start", "--foreground", "--slots", str(self.args.slots)]
        started = self.cluster._start("taskmanager", command)
        self.taskmanagers.append(started)
        return started

    def start_burners(self) -> None:
        for _ in range(self.args.burners):
            self.burners.append(
                subprocess.Popen(
                    [sys.executable, "-c", "while True: pass"],
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )

    def close(self) -> None:
        if self.inbox is not None:
            self.inbox.stopping.set()
        for burner in self.burners:
            _kill_group(burner)
        if self.kazoo is not None:
            stop_zookeeper_client(self.kazoo)
        if self.cluster is not None:
            self.cluster.close()
        self.zookeeper.stop()

    # --- REST and ZooKeeper ----------------------------------------------------------------

    def leader_rest(self, timeout: float = 10.0) -> str:
        return retrieve_leader(self.kazoo, self.paths, REST_SERVER, timeout).address

    def rest(self, path: str) -> Any:
        response = httpx.get(f"{self.leader_rest()}{path}", timeout=10)
        response.raise_for_status()
        return response.json()

    def job(self, job_id: str) -> dict[str, Any]:
        try:
            return self.rest(f"/jobs/{job_id}")  # type: ignore[no-any-return]
        except Exception:  # a REST or ZooKeeper hiccup under load: look again
            return {}

    def checkpoints(self, job_id: str) -> dict[str, Any]:
        try:
            return self.rest(f"/jobs/{job_id}/checkpoints")  # type: ignore[no-any-return]
        except Exception:
            return {}

    # --- the run ---------------------------------------------------------------------------

    def submit(self) -> str:
        inbox, out = self.work / "inbox", self.work / "out"
        inbox.mkdir()
        conf = Configuration({**self.configuration.to_dict(), "parallelism.default": 2})
        # the aggregation's columns need a SparkSession to be built; it stops once submitted
        spark = create_spark_session(
            Configuration({"spark.master": "local[1]", "spark.driver.memory": "512m"}),
            app_name="ha-soak-client",
        )
        try:
            env = StreamExecutionEnvironment(conf, spark)
            build_inbox_delays(env, inbox, out)
            graph = env.get_job_graph("ha-soak")
        finally:
            stop_spark_session(spark)
        self.inbox = Inbox(inbox, self.args.rows_per_file, self.args.file_every)
        self.inbox.drop()
        with RemoteCluster(self.configuration, "").start() as client:
            client.job_client.submit_job_detached(graph).result(120)
        self.inbox.start()
        assert self.cluster is not None
        self.cluster.wait_until(
            lambda: self.job(str(graph.job_id)).get("state") == "RUNNING",
            timeout=300,
            what="the job running",
        )
        return str(graph.job_id)

    def busy_taskmanager(self) -> ClusterProcess | None:
        """A random TaskManager with a used slot, by its process."""
        assert self.cluster is not None
        try:
            listed = self.rest("/taskmanagers")["taskmanagers"]
        except Exception:
            return None
        busy = [t["id"] for t in listed if t["freeSlots"] < t["slotsNumber"]]
        random.shuffle(busy)
        for resource_id in busy:
            try:
                pid = self.cluster.pid_of(resource_id)
            except AssertionError:
                continue
            found = [p for p in self.taskmanagers if p.pid == pid and p.process.poll() is None]
            if found:
                return found[0]
        return None

    def run(self) -> int:
        args = self.args
        print(
            f"ha-soak: ZooKeeper {self.zookeeper.connect_string}, work {self.work}; starting "
            f"2 JobManagers and {args.taskmanagers} TaskManagers",
            flush=True,
        )
        self.start()
        job_id = self.submit()
        self.start_burners()
        leadership = Leadership(time.monotonic())
        connection_info = self.paths.connection_info(DISPATCHER)
        leadership.saw_connection_info(self.kazoo.get(connection_info)[0])
        first_session = leadership.session_id
        self.kazoo.DataWatch(
            connection_info, lambda data, _stat: leadership.saw_connection_info(data)
        )
        print(
            f"ha-soak: job {job_id} RUNNING; leader session {first_session}; "
            f"{len(self.burners)} burners; {args.duration:.0f} s, a TaskManager killed every "
            f"{args.kill_every:.0f} s",
            flush=True,
        )
        kills, restarts, state = 0, 0, "UNKNOWN"
        started = leadership.started
        next_kill = started + args.kill_every
        next_job = started
        checkpoints: dict[str, Any] = {}
        while (now := time.monotonic()) < started + args.duration:
            try:
                leadership.saw_latch(self.kazoo.get_children(self.paths.latch))
                leadership.saw_connection_info(self.kazoo.get(connection_info)[0])
            except Exception as error:  # the watcher's own session under load
                print(f"[{now - started:7.1f} s] ZooKeeper read failed: {error!r}", flush=True)
            for jm in self.jobmanagers:
                if jm.process.poll() is not None:
                    raise SystemExit(f"JobManager {jm.pid} exited:\n{jm.output()[-3000:]}")
            if now >= next_job:
                next_job = now + JOB_POLL
                job = self.job(job_id)
                if job:
                    restarts, state = job["restarts"], job["state"]
                checkpoints = self.checkpoints(job_id) or checkpoints
            if now >= next_kill:
                victim = self.busy_taskmanager()
                if victim is None:
                    next_kill = now + 5  # none busy right now (restarting): try again soon
                else:
                    next_kill = now + args.kill_every
                    _kill_group(victim.process)
                    kills += 1
                    replacement = self.start_taskmanager()
                    print(
                        f"[{now - started:7.1f} s] killed TaskManager {victim.pid} (SIGKILL), "
                        f"started {replacement.pid}; job {state}, restarts {restarts}, "
                        f"checkpoints {checkpoints.get('counts', {}).get('completed', '?')}",
                        flush=True,
                    )
            time.sleep(POLL)
        elapsed = time.monotonic() - started

        # the end: the job's state as the leader reports it
        deadline = time.monotonic() + 30
        while not (job := self.job(job_id)) and time.monotonic() < deadline:
            time.sleep(1)
        if job:
            restarts, state = job["restarts"], job["state"]
        checkpoints = self.checkpoints(job_id) or checkpoints
        counts = checkpoints.get("counts", {})
        latest = (checkpoints.get("latest") or {}).get("id", "?")
        changes = len(leadership.changes)
        assert self.inbox is not None
        print(
            "\nha-soak summary\n"
            f"  duration               {elapsed:.0f} s\n"
            f"  TaskManager kills      {kills}\n"
            f"  leader changes         {changes} (must be 0)\n"
            f"  leader gone (no node)  {len(leadership.gone)}\n"
            f"  latch changes          {len(leadership.latch_changes)}\n"
            f"  job restarts           {restarts}\n"
            f"  checkpoints completed  {counts.get('completed', '?')} "
            f"(failed {counts.get('failed', '?')}, latest id {latest})\n"
            f"  files dropped          {self.inbox.files}\n"
            f"  job state              {state}",
            flush=True,
        )
        for at, before, after in leadership.changes:
            print(f"  leader change at {at:.1f} s: {before} -> {after}")
        warnings = self.leader_warnings()
        if changes or leadership.gone or leadership.latch_changes:
            print("JobManager WARNING lines (kazoo, leader_election):")
            print("\n".join(warnings[-60:]) or "  (none)")
        else:
            print(f"  JobManager WARNING lines (kazoo, leader_election): {len(warnings)}")
        return 1 if changes or state != "RUNNING" else 0

    def leader_warnings(self) -> list[str]:
        found: dict[str, None] = {}  # stderr and the log file repeat the same warnings: once each
        for jm in self.jobmanagers:
            logs = [jm.log, *(self.work / "tmp" / "log").glob(f"jobmanager-*-{jm.pid}.log")]
            for log in logs:
                for line in log.read_text(errors="replace").splitlines():
                    if "WARNING" in line and re.search(r"kazoo|leader_election", line):
                        found.setdefault(f"  [jobmanager {jm.pid}] {line}")
        return list(found)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of the soak")
    parser.add_argument("--kill-every", type=float, default=60.0, help="seconds between kills")
    parser.add_argument("--burners", type=int, default=2, help="CPU-burning child processes")
    parser.add_argument("--taskmanagers", type=int, default=3)
    parser.add_argument("--slots", type=int, default=2, help="slots per TaskManager")
    parser.add_argument("--rows-per-file", type=int, default=2000)
    parser.add_argument("--file-every", type=float, default=2.0, help="seconds between files")
    parser.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    work = args.work or Path(tempfile.mkdtemp(prefix="millrace-ha-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    soak = Soak(args, work.resolve())
    code = 1
    try:
        code = soak.run()
    finally:
        soak.close()
        if args.keep or args.work is not None or code != 0:
            print(f"ha-soak: logs kept in {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
