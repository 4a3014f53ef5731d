"""The data plane through Spark Connect (issue 15): a Millrace standalone cluster of real
processes (a JobManager, two TaskManagers) and its client, all with
``spark.remote=sc://...``: none of them starts a JVM; their plans run on a Spark Connect server
submitted to a Spark standalone master with two workers (``SparkStandaloneCluster`` with
``connect_port``). The output equals pandas row for row, failure-free and with a Spark worker
killed mid-job (Spark runs the lost tasks again on the surviving worker's executor)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.runtime.job_result import JobResultFailure
from millrace.spark.standalone_cluster import SparkStandaloneCluster
from tests.integration.helpers import (
    ROOT,
    assert_same_result,
    expected_flight_delays,
    load_example,
    read_flights,
    read_output,
)
from tests.integration.standalone_cluster import (
    WAIT,
    ClusterProcess,
    StandaloneCluster,
    free_port,
    run_client,
    watch_client,
)
from tests.processes import descendants
from tests.spark_standalone import running_spark_standalone
from tests.waiting import result_within

pytestmark = [pytest.mark.slow, pytest.mark.spark]

HELD_JOB = '''
"""Flight delays with December held until GATE exists: ``job.py ROOT FLIGHTS OUT GATE``."""
import sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])  # the repository: the tests' helpers

from millrace import StreamExecutionEnvironment
from tests.integration.helpers import build_flight_delays_held

flights, out, gate = map(Path, sys.argv[2:5])
env = StreamExecutionEnvironment.get_execution_environment()
build_flight_delays_held(env, flights, out, gate)
env.execute("flight-delays-connect-held")
'''


REPLAY_JOB = '''
"""Flight delays over a ReplaySource: ``job.py ROOT FLIGHTS OUT``."""
import sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])  # the repository: the tests' helpers

from millrace import StreamExecutionEnvironment
from tests.integration.helpers import build_replayed_flight_delays

flights, out = map(Path, sys.argv[2:4])
env = StreamExecutionEnvironment.get_execution_environment()
build_replayed_flight_delays(env, flights, out, rate=400_000)
env.execute("replay-connect")
'''


@pytest.fixture(scope="module")
def spark_connect(tmp_path_factory) -> Iterator[SparkStandaloneCluster]:
    """A Spark master, two workers (2 cores, 1 GiB each) and a Spark Connect server on
    loopback, shared by this module's tests (the worker-kill test comes last)."""
    directory = tmp_path_factory.mktemp("spark-connect")
    with running_spark_standalone(directory, connect_port=free_port()) as started:
        yield started


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, spark_connect: SparkStandaloneCluster) -> Iterator[StandaloneCluster]:
    """A JobManager and two TaskManagers whose Spark sessions are Connect sessions."""
    assert spark_connect.connect_url is not None
    connected = StandaloneCluster(
        tmp_path_factory.mktemp("millrace-cluster"),
        {
            "spark.remote": spark_connect.connect_url,
            "heartbeat.interval": "200 ms",
            "heartbeat.pause": "10 s",
            "rpc.ask-timeout": "30 s",
            "execution.bundle.max-records": "30000",  # a month per Spark job: a longer job
        },
    )
    with connected.running() as started:
        yield started


def java_processes(processes: list[ClusterProcess]) -> dict[int, str]:
    """The JVMs among ``processes`` and everything they started."""
    found: dict[int, str] = {}
    for process in processes:
        tree = {process.pid: " ".join(map(str, process.process.args)), **descendants(process.pid)}
        found.update({pid: command for pid, command in tree.items() if "java" in command})
    return found


def test_flight_delays_through_spark_connect_equal_pandas_with_no_jvm_in_millrace(
    flights_dir, tmp_path, cluster, spark_connect
) -> None:
    out = tmp_path / "out"
    script = ROOT / "examples" / "flight_delays.py"
    known = {job["id"] for job in cluster.rest("/jobs")["jobs"]}
    client = run_client(cluster, script, flights_dir, out)
    submitted, commands = watch_client(cluster, client, known)
    print(f"millrace run through Spark Connect: job listed at the JobManager {submitted:.1f} s")

    assert client.process.returncode == 0, client.output()[-5000:]
    assert "flight-delays FINISHED" in client.output()
    assert_same_result(read_output(out), expected_flight_delays(read_flights(flights_dir)))
    assert not [c for c in commands if "java" in c], "the client started a JVM"
    assert java_processes(cluster.processes) == {}, "a Millrace process started a JVM"
    applications = [app["name"] for app in spark_connect.state().get("activeapps", [])]
    assert applications == ["Spark Connect server"], "the plans ran on the Connect server's app"


def test_a_replay_reaches_the_connect_server_as_stripe_files_and_equals_pandas(
    flights_dir, tmp_path, cluster
) -> None:
    """ReplaySource writes each stripe once into the exchange store and its bundles are scans
    of those files, which the Connect server's executors read there. The TaskManagers say they
    wrote the stripes, the output equals pandas, and the job's directory of the store is gone
    when the job ends."""
    script = tmp_path / "replay_job.py"
    script.write_text(REPLAY_JOB)
    out = tmp_path / "out"
    known = {job["id"] for job in cluster.rest("/jobs")["jobs"]}
    client = run_client(cluster, script, ROOT, flights_dir, out)
    watch_client(cluster, client, known)

    assert client.process.returncode == 0, client.output()[-5000:]
    assert "replay-connect FINISHED" in client.output()
    assert_same_result(read_output(out), expected_flight_delays(read_flights(flights_dir)))
    [job_id] = {job["id"] for job in cluster.rest("/jobs")["jobs"]} - known
    store = cluster.work / "tmp" / "jobs" / job_id
    deadline = time.monotonic() + WAIT
    while store.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not store.exists(), sorted(str(p) for p in store.rglob("*"))
    logs = "".join(f.read_text() for f in (cluster.work / "tmp" / "log").glob("taskmanager-*"))
    assert logs.count("records for Spark to scan") >= 4, "the stripes went through Arrow"


def test_a_job_built_with_a_local_spark_fails_on_connect_taskmanagers_with_the_fix(
    spark, flights_dir, tmp_path, cluster
) -> None:
    """Classic columns are JVM objects: TaskManagers without a JVM cannot load them, and the
    job fails (after its restarts) saying to set the same ``spark.remote`` everywhere."""
    settings = {k: v for k, v in cluster.settings.items() if k != "spark.remote"}
    conf = Configuration({**settings, "restart-strategy.type": "none"})
    env = StreamExecutionEnvironment(conf, spark)
    load_example("flight_delays").build(env, str(flights_dir), str(tmp_path / "out"))
    graph = env.get_job_graph("flight-delays-classic-columns")
    with cluster.remote() as client:
        result = result_within(client.job_client.submit_job_wait(graph), WAIT, what="the job")
    assert isinstance(result, JobResultFailure), result
    fix = "set the same spark.remote on the client and the cluster"
    assert fix in result.root_cause, result.root_cause


@dataclass
class HeldJob:
    """A held flight-delays job submitted by ``millrace run`` (``HELD_JOB``)."""

    cluster: StandaloneCluster
    client: ClusterProcess
    job_id: str
    gate: Path
    out: Path

    @property
    def held(self) -> Path:
        """Exists, with the holding process's PID, once a Spark job holds December."""
        return Path(f"{self.gate}.held")

    def checkpoints(self) -> int:
        return int(self.cluster.rest(f"/jobs/{self.job_id}/checkpoints")["counts"]["completed"])

    def await_checkpoint_or_hold(self) -> None:
        """A checkpoint completed, or December held (no checkpoint passes a held source)."""
        self.cluster.wait_until(
            lambda: self.checkpoints() >= 1 or self.held.exists(),
            what="a checkpoint, or December held",
        )

    def release(self) -> str:
        """Let December go on, wait for ``millrace run`` to exit; its output."""
        self.gate.touch()
        self.cluster.wait_until(
            lambda: self.client.process.poll() is not None, what="millrace run exiting"
        )
        return self.client.output()


STREAMING = {
    "execution.runtime-mode": "STREAMING",
    "execution.checkpointing.interval": "1 s",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "5",
    "restart-strategy.fixed-delay.delay": "500 ms",
}


def start_held_job(
    cluster: StandaloneCluster,
    tmp_path: Path,
    flights_dir: Path,
    extra: dict[str, str] | None = None,
) -> HeldJob:
    """``millrace run`` of ``HELD_JOB`` with ``extra`` settings, once its job runs."""
    script, out, gate = tmp_path / "job.py", tmp_path / "out", tmp_path / "december"
    script.write_text(HELD_JOB)
    client = run_client(cluster, script, ROOT, flights_dir, out, gate, extra=extra)

    def running() -> list[str]:
        assert client.process.poll() is None, f"millrace run exited:\n{client.output()[-3000:]}"
        return [j["id"] for j in cluster.rest("/jobs")["jobs"] if j["status"] == "RUNNING"]

    cluster.wait_until(running, what="the held job running")
    [job_id] = running()
    return HeldJob(cluster, client, job_id, gate, out)


def test_cancelling_a_job_interrupts_its_spark_jobs_on_the_connect_server(
    flights_dir, tmp_path, cluster
) -> None:
    """Cancelled while a Spark job of it holds December in the Connect server's Python worker
    (up to 300 s): the task's tag is interrupted (``interruptTag``), its Spark job ends, and
    the job is CANCELED long before the hold would end (the wait's 120 s are shorter than the
    hold: without the interrupt the test fails), its slots free again."""
    held = start_held_job(cluster, tmp_path, flights_dir)
    cluster.wait_until(held.held.exists, what="a Spark job holding December")
    cancelled_at = time.monotonic()
    with cluster.remote() as remote:
        remote.job_client.cancel_job(held.job_id).result(WAIT)
    cluster.wait_until(lambda: cluster.job(held.job_id).get("state") == "CANCELED", what="CANCELED")
    print(f"cancel through Spark Connect: CANCELED after {time.monotonic() - cancelled_at:.1f} s")
    cluster.wait_until(lambda: held.client.process.poll() is not None, what="millrace run exiting")
    assert held.client.process.returncode != 0 and "CANCELED" in held.client.output()
    cluster.wait_until(
        lambda: all(tm["freeSlots"] == tm["slotsNumber"] for tm in cluster.taskmanagers()),
        what="every slot free again",
    )


def test_a_taskmanager_killed_mid_stream_through_spark_connect_loses_no_row(
    flights_dir, tmp_path, cluster
) -> None:
    """STREAMING with checkpoints every second; kill -9 of a busy TaskManager once a checkpoint
    completed (or December is held): the job restarts on the other TaskManager's Connect
    session from its latest checkpoint and equals pandas."""
    held = start_held_job(cluster, tmp_path, flights_dir, STREAMING)
    held.await_checkpoint_or_hold()
    [victim, *_] = [tm for tm in cluster.taskmanagers() if tm["freeSlots"] < tm["slotsNumber"]]
    os.killpg(cluster.pid_of(victim["id"]), signal.SIGKILL)
    try:
        print(f"kill -9 of a Connect TaskManager after {held.checkpoints()} checkpoints")
        output = held.release()
        assert held.client.process.returncode == 0, output[-5000:]
        assert " restarts)" in output, "the job did not restart after the kill"
        assert_same_result(read_output(held.out), expected_flight_delays(read_flights(flights_dir)))
        assert cluster.job(held.job_id)["state"] == "FINISHED"
    finally:
        cluster.start_taskmanager(slots=2)  # the module's cluster whole again
        cluster.wait_until(
            lambda: len(cluster.taskmanagers()) == 2, what="2 TaskManagers registered again"
        )


def test_the_connect_server_killed_and_restarted_mid_stream_loses_no_row(
    flights_dir, tmp_path, cluster, spark_connect
) -> None:
    """kill -9 of the Connect server mid-stream (STREAMING, checkpoints every second) and a new
    one on its port: the TaskManagers' sessions are gone with it; their tasks fail, each
    TaskManager opens a new session, and the job restarts from its latest checkpoint and
    equals pandas."""
    held = start_held_job(cluster, tmp_path, flights_dir, STREAMING)
    held.await_checkpoint_or_hold()
    spark_connect.kill_connect_server()
    spark_connect.start_connect_server()
    output = held.release()

    assert held.client.process.returncode == 0, output[-5000:]
    assert " restarts)" in output, "the job did not restart"
    assert_same_result(read_output(held.out), expected_flight_delays(read_flights(flights_dir)))
    logs = "".join(p.output() for p in cluster.processes if p.kind == "taskmanager")
    assert "the Spark Connect session is gone" in logs


def worker_of(spark_cluster: SparkStandaloneCluster, pid: int) -> int:
    """The Spark worker whose executor runs process ``pid`` (a Python worker of it, in a
    process group of its own): the first ancestor in a worker's process group."""
    workers = {spark_cluster.pid(f"worker-{i}"): i for i in range(spark_cluster.workers)}
    current = pid
    while current > 1:
        fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        parent, group = int(fields[1]), int(fields[2])
        if group in workers:
            return workers[group]
        current = parent
    raise AssertionError(f"process {pid} runs under no Spark worker")


def test_a_spark_worker_killed_mid_job_through_spark_connect_loses_no_row(
    flights_dir, tmp_path, cluster, spark_connect
) -> None:
    """kill -9 of the Spark worker (with its executor) whose executor runs the task holding
    December: Spark runs that task again on the other worker's executor; the job goes on
    without a restart and equals pandas."""
    held = start_held_job(cluster, tmp_path, flights_dir)
    cluster.wait_until(lambda: held.held.exists() and held.held.read_text(), what="December held")
    victim = worker_of(spark_connect, int(held.held.read_text()))
    spark_connect.kill_worker(victim)  # the worker and the executor holding: kill -9
    output = held.release()

    assert held.client.process.returncode == 0, output[-5000:]
    assert "restarts)" not in output, "Spark's retry should have hidden the loss"
    assert_same_result(read_output(held.out), expected_flight_delays(read_flights(flights_dir)))
    survivor = 1 - victim
    assert spark_connect.executors(survivor) >= 1, "the Connect server lost every executor"
