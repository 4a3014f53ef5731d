"""HttpSource: records POSTed to the JobManager while TaskManagers die. Every record answered
202 appears in the committed output exactly once (compared row by row), a malformed line is a
dead letter, and the log is truncated below committed checkpoints.

The embedded cluster crashes an in-process TaskExecutor between posts; the standalone cluster
kills a TaskManager process with SIGKILL twice while a client thread keeps posting.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pandas as pd
import pyarrow.parquet as pq
import pytest

from millrace import Configuration, HttpSource, ParquetSink, StreamExecutionEnvironment
from millrace.connectors.http_source_log import truncation_mark
from millrace.connectors.http_source_server import stop_servers
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.directory_job import rest_auth
from tests.integration.standalone_cluster import StandaloneCluster, free_port
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

TOKEN = "t0ken-for-the-http-source-test"
SCHEMA = "id long, name string"
BATCH = 40
BAD_LINE = b"this is not json {"


def _build(env: StreamExecutionEnvironment, out: Path, token: str | None) -> None:
    env.from_source(HttpSource(SCHEMA, name="orders", token=token), name="orders").sink_to(
        ParquetSink(str(out))
    )


def _batch(start: int, count: int = BATCH) -> bytes:
    return b"".join(b'{"id": %d, "name": "n%d"}\n' % (i, i) for i in range(start, start + count))


class Poster:
    """Posts batches of ids and remembers the ids of every batch answered 202."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url, self.headers = url, headers
        self.accepted: list[int] = []
        self.next_id = 0
        self.answers: dict[int, int] = {}

    def post(self, body: bytes, ids: range) -> int:
        try:
            status = httpx.post(
                self.url, content=body, headers=self.headers, timeout=10
            ).status_code
        except httpx.HTTPError:
            status = 0  # not answered: the ids may be absent
        self.answers[status] = self.answers.get(status, 0) + 1
        if status == 202:
            self.accepted += ids
        return status

    def post_batch(self) -> int:
        ids = range(self.next_id, self.next_id + BATCH)
        self.next_id += BATCH
        return self.post(_batch(ids.start), ids)

    def wait_ready(self) -> None:
        wait_until(lambda: self.post_batch() == 202, what=f"the HttpSource at {self.url} to accept")


def _committed(out: Path) -> pd.DataFrame:
    files = sorted(out.glob("part-*.parquet"))
    if not files:
        return pd.DataFrame({"id": pd.Series([], dtype="int64"), "name": []})
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)


def _assert_exactly_once(out: Path, accepted: list[int]) -> None:
    """Every accepted id exactly once, with its name. Ids of posts not answered 202 may be
    absent, or present (stored before the answer was lost), but never twice."""
    frame = _committed(out)
    assert frame["id"].is_unique, frame[frame["id"].duplicated(keep=False)]
    assert (frame["name"] == "n" + frame["id"].astype(str)).all()
    missing = set(accepted) - set(frame["id"])
    assert not missing, f"{len(missing)} accepted ids missing, e.g. {sorted(missing)[:5]}"
    assert len(accepted) == len(set(accepted))


def test_records_posted_while_task_managers_crash_arrive_exactly_once(spark, tmp_path) -> None:
    out, side = tmp_path / "out", tmp_path / "side"
    port = free_port()
    conf = Configuration(
        {
            "parallelism.default": 1,
            "minicluster.number-of-taskmanagers": 3,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "pipeline.side-output.dir": str(side),
            "execution.checkpointing.interval": "300 ms",
            "heartbeat.interval": "100 ms",
            "heartbeat.pause": "1 s",
            "restart-strategy.fixed-delay.delay": "100 ms",
            "http-source.port": port,
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    _build(env, out, TOKEN)
    graph = env.get_job_graph("http-ingest")
    url = f"http://127.0.0.1:{port}/sources/orders/records"
    poster = Poster(url, {"Authorization": f"Bearer {TOKEN}"})
    try:
        with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
            cluster.job_client.submit_job_detached(graph).result(60)
            poster.wait_ready()
            assert httpx.post(url, content=_batch(10**6)).status_code == 401  # no token
            assert poster.post(_batch(10**6, 5) + BAD_LINE + b"\n", range(10**6, 10**6 + 5)) == 202
            client = cluster.job_client
            for crash in range(1, 3):
                seen = len(_committed(out))
                for _ in range(10):
                    assert poster.post_batch() == 202
                wait_until(lambda s=seen: len(_committed(out)) > s, what=f"output before {crash}")
                crash_task_executor(busy_task_executor(cluster))
                wait_until(
                    lambda c=crash: (
                        client.request_job_details(graph.job_id).result(30).restarts >= c
                    ),
                    what=f"restart {crash}",
                )
            for _ in range(10):
                assert poster.post_batch() == 202
            wait_until(
                lambda: len(_committed(out)) >= len(poster.accepted),
                what=f"{len(poster.accepted)} rows committed",
                seen=lambda: f"{len(_committed(out))} rows",
            )
            log_dir = tmp_path / "tmp" / "http-sources" / str(graph.job_id) / "orders"
            wait_until(lambda: truncation_mark(str(log_dir)) > 0, what="the log truncated")
            details = cluster.job_client.request_job_details(graph.job_id).result(30)
            cluster.job_client.cancel_job(graph.job_id).result(30)
    finally:
        stop_servers()

    assert details.restarts >= 2
    _assert_exactly_once(out, poster.accepted)
    dead = pd.read_parquet(side / "http-ingest" / "dead-letters")
    assert dead["record"].tolist() == [BAD_LINE.decode()]
    assert dead["reason"].tolist() == ["line is not valid JSON"]


def test_sigkill_of_task_managers_while_clients_post(spark, tmp_path) -> None:
    port = free_port()
    cluster = StandaloneCluster(
        tmp_path,
        {
            "heartbeat.interval": "200 ms",
            "heartbeat.pause": "2 s",
            "rpc.ask-timeout": "10 s",
            "rpc.lookup-timeout": "3 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms",
            "execution.checkpointing.interval": "500 ms",
            "http-source.port": str(port),
        },
    )
    out = tmp_path / "out"
    try:
        cluster.start_jobmanager()
        for _ in range(3):
            cluster.start_taskmanager(slots=1)
        cluster.wait_for_taskmanagers(3)
        env = StreamExecutionEnvironment(
            Configuration({**cluster.settings, "parallelism.default": 1}), spark
        )
        _build(env, out, None)  # the REST API's token of the cluster secret
        graph = env.get_job_graph("http-ingest")
        with cluster.remote() as client:
            client.job_client.submit_job_detached(graph).result(60)
        poster = Poster(f"http://127.0.0.1:{port}/sources/orders/records", rest_auth(cluster))
        poster.wait_ready()
        stop = threading.Event()

        def keep_posting() -> None:
            while not stop.is_set():
                poster.post_batch()
                time.sleep(0.02)

        client_thread = threading.Thread(target=keep_posting, name="poster")
        client_thread.start()
        try:
            for kill in range(2):
                seen, left = len(_committed(out)), 2 - kill
                cluster.wait_until(
                    lambda seen=seen: len(_committed(out)) > seen,
                    what=f"output before kill {kill + 1}",
                )
                busy = next(
                    i["id"] for i in cluster.taskmanagers() if i["freeSlots"] < i["slotsNumber"]
                )
                os.kill(cluster.pid_of(busy), signal.SIGKILL)
                cluster.wait_until(
                    lambda left=left: len(cluster.taskmanagers()) == left,
                    what=f"TaskManager {busy} gone",
                )
            time.sleep(1.0)  # clients keep posting after the second kill
        finally:
            stop.set()
            client_thread.join(30)
        assert not client_thread.is_alive()
        accepted = list(poster.accepted)
        cluster.wait_until(
            lambda: len(_committed(out)) >= len(accepted),
            what=f"{len(accepted)} accepted rows committed",
        )
        assert cluster.job(str(graph.job_id))["state"] == "RUNNING"
    finally:
        cluster.close()
    assert poster.answers.get(202, 0) > 20, poster.answers
    _assert_exactly_once(out, accepted)


def test_the_http_ingest_example_counts_posted_orders_per_minute(spark, tmp_path) -> None:
    from millrace.rpc.tcp.transport_security import TransportSecurity
    from millrace.runtime.dispatcher.rest_endpoint import rest_token
    from tests.integration.helpers import load_example

    out, port = tmp_path / "out", free_port()
    conf = Configuration(
        {
            "parallelism.default": 1,
            "minicluster.number-of-taskmanagers": 1,
            "io.tmp.dirs": str(tmp_path / "tmp"),
            "execution.checkpointing.interval": "300 ms",
            "security.cluster-secret": "a-secret-of-the-example-test-0123456789",
            "http-source.port": port,
        }
    )
    env = StreamExecutionEnvironment(conf, spark)
    load_example("http_ingest").build(env, str(out))
    graph = env.get_job_graph("http-ingest-example")
    token = rest_token(TransportSecurity.from_configuration(conf).secret)
    url = f"http://127.0.0.1:{port}/sources/orders/records"
    orders = [
        ("tea", 2, "10:00:05"),
        ("coffee", 1, "10:00:30"),
        ("tea", 3, "10:00:59"),
        ("tea", 1, "10:01:10"),
        ("cake", 4, "10:01:20"),
        ("tea", 1, "10:05:00"),  # moves event time past 10:02: the first two minutes fire
    ]
    body = "".join(
        f'{{"product": "{p}", "quantity": {q}, "ordered_at": "2026-11-20T{t}Z"}}\n'
        for p, q, t in orders
    ).encode()
    poster = Poster(url, {"Authorization": f"Bearer {token}"})
    try:
        with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
            cluster.job_client.submit_job_detached(graph).result(60)
            wait_until(
                lambda: poster.post(body, range(0)) == 202,
                what="the example's HttpSource to accept",
                seen=lambda: f"answers {poster.answers}",
            )
            wait_until(lambda: len(_committed(out)) >= 4, what="4 windows committed")
            cluster.job_client.cancel_job(graph.job_id).result(30)
    finally:
        stop_servers()
    frame = _committed(out).sort_values(["window_start", "product"], ignore_index=True)
    got = [
        (r.window_start.strftime("%H:%M"), r.product, r.orders, r.quantity)
        for r in frame.itertuples()
    ]
    assert got == [
        ("10:00", "coffee", 1, 1),
        ("10:00", "tea", 2, 5),
        ("10:01", "cake", 1, 4),
        ("10:01", "tea", 1, 1),
    ]
