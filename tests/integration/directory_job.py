"""A standalone cluster running the unbounded flight-delays job over a directory, for the tests
that read a running job from outside (REST, the dashboard, Prometheus): the JobManager and
TaskManager processes of :class:`StandaloneCluster`, the job submitted detached, and one month
of flights arrived in its inbox."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from millrace import Configuration, DirectorySource, ParquetSink, StreamExecutionEnvironment
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.dispatcher.rest_endpoint import rest_token
from tests.integration.standalone_cluster import StandaloneCluster
from tests.integration.streams import arrive, delays_per_day

__all__ = ["directory_job", "rest_auth"]


def rest_auth(cluster: StandaloneCluster) -> dict[str, str]:
    """The ``Authorization`` header of REST writes on ``cluster`` (its secret's token)."""
    secret = TransportSecurity.from_configuration(cluster.configuration).secret
    return {"Authorization": f"Bearer {rest_token(secret)}"}


@contextmanager
def directory_job(
    spark: Any,
    flights_dir: Path,
    work: Path,
    name: str,
    settings: dict[str, str],
    *,
    taskmanagers: int = 2,
) -> Iterator[tuple[StandaloneCluster, str]]:
    """Start a cluster of ``taskmanagers`` TaskManagers (2 slots each) under ``work``, submit
    ``delays_per_day`` over ``work/inbox`` at parallelism 2 into ``work/out``, let month 1
    arrive; yield ``(cluster, job id)``; close the cluster (its processes killed by PID)."""
    inbox = work / "inbox"
    inbox.mkdir()
    cluster = StandaloneCluster(work, dict(settings))
    try:
        cluster.start_jobmanager()
        for _ in range(taskmanagers):
            cluster.start_taskmanager(slots=2)
        cluster.wait_for_taskmanagers(taskmanagers)
        conf = Configuration({**cluster.settings, "parallelism.default": 2})
        env = StreamExecutionEnvironment(conf, spark)
        flights = env.from_source(
            DirectorySource.parquet(str(inbox)), event_time="time_hour", max_out_of_orderness="1 h"
        )
        delays_per_day(flights).sink_to(ParquetSink(str(work / "out")))
        graph = env.get_job_graph(name)
        with cluster.remote() as client:
            client.job_client.submit_job_detached(graph).result(60)
        arrive(flights_dir, inbox, 1)
        yield cluster, graph.job_id
    finally:
        cluster.close()
