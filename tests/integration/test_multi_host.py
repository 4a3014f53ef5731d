"""Several hosts (issue 15): a JobManager, two TaskManagers and a Spark standalone cluster (a
master and two workers), each in a network namespace of its own with one address on a bridge
(``tests.network_namespaces``), the client in the test process on the same bridge. Each
Millrace process binds every interface of its host (``jobmanager.bind-host`` /
``taskmanager.bind-host`` = 0.0.0.0) and advertises its host's address
(``jobmanager.rpc.address``, ``taskmanager.host``); each TaskManager's SparkSession is an
application of the Spark master, its driver reached by the executors at the TaskManager's
address (``spark.driver.host``). Each TaskManager host has its own working directory
(``io.tmp.dirs``: logs, cluster files, the copied secret); the exchange store
(``io.exchange.dir``, a ``file://`` URL), the checkpoints and the output are directories every
host shares. The flight-delays output equals pandas row for
row, failure-free, with a TaskManager's host cut off from the network (its link down at the switch)
until the JobManager's heartbeat declares it dead, then restored, and with every process of a
TaskManager host killed. And again through a Spark Connect server on the Spark host
(``spark.remote``): a second JobManager and two TaskManagers on the same hosts, and a client,
none of them with a JVM."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator

import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.errors import LocalServerError
from millrace.runtime.entrypoint.cluster_files import ClusterFiles
from millrace.runtime.job_result import JobResultSuccess
from millrace.spark.standalone_cluster import SparkStandaloneCluster
from tests.integration.helpers import (
    ROOT,
    assert_same_result,
    expected_flight_delays,
    load_example,
    read_flights,
    read_output,
)
from tests.integration.standalone_cluster import WAIT, StandaloneCluster
from tests.network_namespaces import VirtualNetwork
from tests.processes import descendants
from tests.real_parts import part_unavailable
from tests.waiting import result_within

pytestmark = [pytest.mark.slow, pytest.mark.spark]

PAUSE = 2.0  # heartbeat.pause of the cluster (s)


@pytest.fixture(scope="module")
def network() -> Iterator[VirtualNetwork]:
    started = VirtualNetwork().start()
    try:
        for host in ("jobmanager", "taskmanager-a", "taskmanager-b", "spark"):
            started.add_host(host)
        yield started
    finally:
        started.close()


@pytest.fixture(scope="module")
def spark_cluster(network: VirtualNetwork, tmp_path_factory) -> Iterator[SparkStandaloneCluster]:
    """A Spark master and two workers (2 cores each) on the host ``spark``, with a Spark
    Connect server holding one core of each worker (the TaskManagers' applications the others)."""
    started = SparkStandaloneCluster(
        tmp_path_factory.mktemp("spark-cluster"),
        workers=2,
        cores=2,
        memory="1g",
        host=network.hosts["spark"],
        port=7077,
        webui_port=8080,
        prefix=network.command("spark", []),
        connect_port=15002,
        connect_settings={"spark.cores.max": "2", "spark.executor.memory": "512m"},
    )
    try:
        started.start()
    except LocalServerError as error:
        part_unavailable("a Spark standalone cluster", error)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def cluster(
    network: VirtualNetwork, spark_cluster: SparkStandaloneCluster, tmp_path_factory
) -> Iterator[StandaloneCluster]:
    """The JobManager and two TaskManagers (2 slots each), one host each, their Spark on the
    Spark host."""
    address = network.hosts["jobmanager"]
    shared = tmp_path_factory.mktemp("multi-host-shared")
    started = StandaloneCluster(
        tmp_path_factory.mktemp("multi-host"),
        {
            "heartbeat.interval": "200 ms",
            "heartbeat.pause": f"{PAUSE} s",
            "rpc.ask-timeout": "10 s",
            "rpc.lookup-timeout": "3 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "3",
            "restart-strategy.fixed-delay.delay": "200 ms",
            "execution.bundle.max-records": "30000",  # a month per Spark job: a longer job
            "spark.master": spark_cluster.master_url,
            "spark.cores.max": "1",
            "io.exchange.dir": f"file://{shared}/exchange-store",
            "state.checkpoints.dir": f"file://{shared}/checkpoints",
            "spark.executor.memory": "512m",
        },
        host=address,
    )
    try:
        start_jobmanager_on(started, network)
        for host in ("taskmanager-a", "taskmanager-b"):
            start_taskmanager_on(started, network, host)
        started.wait_for_taskmanagers(2)
        yield started
    finally:
        started.close()


@pytest.fixture(scope="module")
def connect_cluster(
    network: VirtualNetwork, spark_cluster: SparkStandaloneCluster, tmp_path_factory
) -> Iterator[StandaloneCluster]:
    """A second JobManager and two TaskManagers on the same hosts whose Spark sessions are
    Connect sessions at the Spark host's Connect server: no JVM of their own."""
    address = network.hosts["jobmanager"]
    assert spark_cluster.connect_url is not None
    shared = tmp_path_factory.mktemp("multi-host-connect-shared")
    started = StandaloneCluster(
        tmp_path_factory.mktemp("multi-host-connect"),
        {
            "io.exchange.dir": f"file://{shared}/exchange-store",
            "state.checkpoints.dir": f"file://{shared}/checkpoints",
            "heartbeat.interval": "200 ms",
            "heartbeat.pause": "10 s",
            "rpc.ask-timeout": "30 s",
            "spark.remote": spark_cluster.connect_url,
        },
        host=address,
    )
    try:
        start_jobmanager_on(started, network)
        for host in ("taskmanager-a", "taskmanager-b"):
            start_taskmanager_on(started, network, host)
        started.wait_for_taskmanagers(2)
        yield started
    finally:
        started.close()


def start_jobmanager_on(cluster: StandaloneCluster, network: VirtualNetwork) -> None:
    """The cluster's JobManager on the host ``jobmanager``: it binds every interface and
    advertises the host's address (RPC and REST)."""
    address = network.hosts["jobmanager"]
    cluster.start_jobmanager(
        {
            "jobmanager.rpc.address": address,
            "jobmanager.bind-host": "0.0.0.0",
            "rest.bind-address": address,
        },
        prefix=network.command("jobmanager", []),
    )


def host_tmp(cluster: StandaloneCluster, host: str) -> str:
    """The working directory (``io.tmp.dirs``) of ``host``'s TaskManager: its own."""
    return str(cluster.work / host / "tmp")


def start_taskmanager_on(cluster: StandaloneCluster, network: VirtualNetwork, host: str) -> None:
    """A TaskManager (2 slots) on ``host``: it binds every interface and advertises the host's
    address, and so does its Spark driver (the executors call it back there). Its working
    directory is the host's own; the JobManager's secret is copied there, as an operator
    copies it to another machine."""
    address = network.hosts[host]
    secret = cluster.work / host / "secret"
    secret.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(cluster.work / "tmp" / "cluster" / "secret", secret)
    cluster.start_taskmanager(
        2,
        {
            "taskmanager.host": address,
            "taskmanager.bind-host": "0.0.0.0",
            "spark.driver.host": address,
            "io.tmp.dirs": host_tmp(cluster, host),
            "security.cluster-secret.file": str(secret),
        },
        prefix=network.command(host, []),
    )


def taskmanager_pid(cluster: StandaloneCluster, host: str, resource_id: str) -> int:
    """The process of TaskManager ``resource_id`` on ``host``, from the host's cluster files."""
    port = resource_id.split("-")[1]
    files = ClusterFiles(Configuration({"io.tmp.dirs": host_tmp(cluster, host)}))
    [pid] = [
        info.pid
        for info in files.processes()
        if info.kind == "taskmanager" and info.rpc_address.endswith(f":{port}")
    ]
    return pid


def busy_taskmanager(cluster: StandaloneCluster, network: VirtualNetwork) -> tuple[str, str]:
    """A TaskManager running tasks now (its resource id) and the host it runs on."""
    busy = [tm for tm in cluster.taskmanagers() if tm["freeSlots"] < tm["slotsNumber"]]
    address = busy[0]["path"].removeprefix("tcp://").split(":")[0]
    [host] = [name for name, a in network.hosts.items() if a == address]
    return busy[0]["id"], host


def flight_delays_graph(spark, cluster: StandaloneCluster, flights_dir, out):
    conf = Configuration({**cluster.settings, "parallelism.default": 2})
    env = StreamExecutionEnvironment(conf, spark)
    load_example("flight_delays").build(env, str(flights_dir), str(out))
    return env.get_job_graph("flight-delays")


def test_each_process_advertises_its_own_hosts_address(cluster, network) -> None:
    registered = {tm["id"]: tm["path"] for tm in cluster.taskmanagers()}
    hosts = {network.hosts["taskmanager-a"], network.hosts["taskmanager-b"]}
    assert {path.removeprefix("tcp://").split(":")[0] for path in registered.values()} == hosts


def test_flight_delays_on_three_hosts_and_a_spark_cluster_equal_pandas(
    spark, flights_dir, tmp_path, cluster, spark_cluster
) -> None:
    graph = flight_delays_graph(spark, cluster, flights_dir, tmp_path / "out")
    with cluster.remote() as client:
        result = result_within(client.job_client.submit_job_wait(graph), WAIT, what="the job")
    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts == 0
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
    applications = [
        app
        for app in spark_cluster.state().get("activeapps", [])
        if app.get("name") == "millrace-taskmanager"
    ]
    assert len(applications) == 2 and all(app["cores"] == 1 for app in applications)


def test_a_task_manager_host_cut_off_then_restored_loses_no_row(
    spark, flights_dir, tmp_path, cluster, network
) -> None:
    graph = flight_delays_graph(spark, cluster, flights_dir, tmp_path / "out")
    with cluster.remote() as client:
        waiting = client.job_client.submit_job_wait(graph)
        cluster.wait_until(
            lambda: cluster.job(graph.job_id).get("splits-assigned", 0) >= 3,
            what="three months read",
        )
        victim, host = busy_taskmanager(cluster, network)
        network.cut(host)
        cut_at = time.monotonic()
        try:
            dead_after = cluster.wait_until(
                lambda: victim not in {tm["id"] for tm in cluster.taskmanagers()},
                what="the cut-off TaskManager declared dead",
            )
            result = result_within(waiting, WAIT, what="the job's result after the cut")
        finally:
            network.restore(host)
        back_after = cluster.wait_until(
            lambda: len(cluster.taskmanagers()) == 2, what="the restored host's TaskManager back"
        )
    print(
        f"cut {host} ({victim}): declared dead after {dead_after:.1f} s, job done "
        f"{time.monotonic() - cut_at:.1f} s after the cut, back {back_after:.1f} s after restore"
    )
    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    assert dead_after >= PAUSE * 0.5  # the heartbeat's verdict, not a closed connection
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )


def test_a_task_manager_hosts_processes_killed_loses_no_row(
    spark, flights_dir, tmp_path, cluster, network
) -> None:
    """kill -9 of everything a TaskManager host runs (the TaskManager and its Spark driver JVM:
    one process group) mid-job: the job restarts on the other host; a TaskManager started
    again on that host joins the cluster."""
    graph = flight_delays_graph(spark, cluster, flights_dir, tmp_path / "out")
    with cluster.remote() as client:
        waiting = client.job_client.submit_job_wait(graph)
        cluster.wait_until(
            lambda: cluster.job(graph.job_id).get("splits-assigned", 0) >= 3,
            what="three months read",
        )
        victim, host = busy_taskmanager(cluster, network)
        os.killpg(taskmanager_pid(cluster, host, victim), signal.SIGKILL)
        result = result_within(waiting, WAIT, what="the job's result after the kill")
    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    assert_same_result(
        read_output(tmp_path / "out"), expected_flight_delays(read_flights(flights_dir))
    )
    start_taskmanager_on(cluster, network, host)
    cluster.wait_until(lambda: len(cluster.taskmanagers()) == 2, what=f"a TaskManager on {host}")


def test_flight_delays_on_three_hosts_through_spark_connect_equal_pandas(
    flights_dir, tmp_path, connect_cluster, spark_cluster
) -> None:
    """The client (on the bridge) and the TaskManagers (on their hosts) send their plans to the
    Connect server on the Spark host; no Millrace process there starts a JVM."""
    out = tmp_path / "out"
    script = ROOT / "examples" / "flight_delays.py"
    command = ["run", str(script), str(flights_dir), str(out)]
    client = connect_cluster._start(
        "client", [*command, "--jobmanager", connect_cluster.jobmanager]
    )
    jvms: set[str] = set()

    def exited() -> bool:
        jvms.update(c for c in descendants(client.pid).values() if "java" in c)
        return client.process.poll() is not None

    connect_cluster.wait_until(exited, what="millrace run exiting")
    assert client.process.returncode == 0, client.output()[-5000:]
    assert_same_result(read_output(out), expected_flight_delays(read_flights(flights_dir)))
    assert not jvms, "the client started a JVM"
    for process in connect_cluster.processes:
        tree = descendants(process.pid).values()
        assert not [c for c in tree if "java" in c], f"{process.kind} started a JVM"
    names = [app.get("name") for app in spark_cluster.state().get("activeapps", [])]
    assert "Spark Connect server" in names
