"""Checkpoints that fail while an unbounded job runs: one declined (a sink's pre-commit fails),
one expired (``execution.checkpointing.timeout`` passes during a slow pre-commit). Both are
aborted with their reason in the checkpoint history, the job runs on without a restart, and the
committed output equals pandas on the same files: what the aborted checkpoints' tasks had
pre-committed is committed with the next checkpoint that completes.

The job is unbounded on purpose: a bounded job's final commit takes every staged file of its
last attempts, which would hide data that an aborted checkpoint dropped.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from millrace import Configuration, DirectorySource, ParquetSink, StreamExecutionEnvironment
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.integration.helpers import expected_flight_delays, read_flights
from tests.integration.streams import (
    arrive,
    assert_exactly,
    committed,
    delays_per_day,
    fired_through,
    stream_settings,
    wait_for_rows,
)
from tests.waiting import wait_value

pytestmark = [pytest.mark.slow, pytest.mark.spark]

TIMEOUT_S = 3.0  # execution.checkpointing.timeout
INJECTED = "No space left on device (injected)"


@dataclass(frozen=True)
class FaultyParquetSink(ParquetSink):
    """A ParquetSink whose pre-commit the test steers through files in ``control``: while
    ``decline`` exists, subtask 0's pre-commit fails; while ``hold`` exists, subtask 1's
    pre-commit waits (up to 2 minutes), longer than the checkpoint timeout."""

    control: str = ""

    def pre_commit(self, job_id: str, checkpoint_id: int, pending: Sequence[str]) -> None:
        control = Path(self.control)
        if (control / "decline").exists() and _written_by(pending, 0):
            raise OSError(INJECTED)
        deadline = time.monotonic() + 120
        while (control / "hold").exists() and _written_by(pending, 1):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        super().pre_commit(job_id, checkpoint_id, pending)


def _written_by(pending: Sequence[str], subtask: int) -> bool:
    """Whether a staged file of subtask ``subtask`` is among ``pending`` (ParquetSink names
    its files ``part-<job>-<subtask>-<attempt>-<sequence>.parquet.<attempt>``)."""
    return any(Path(p).name.split("-")[2] == f"{subtask:05d}" for p in pending)


def test_a_declined_and_an_expired_checkpoint_lose_nothing_and_the_job_runs_on(
    spark, flights_dir, tmp_path: Path
) -> None:
    inbox, out, control = tmp_path / "inbox", tmp_path / "out", tmp_path / "control"
    inbox.mkdir()
    control.mkdir()
    conf = Configuration(
        stream_settings(tmp_path, **{"execution.checkpointing.timeout": f"{TIMEOUT_S} s"})
    )
    env = StreamExecutionEnvironment(conf, spark)
    flights_stream = env.from_source(
        DirectorySource.parquet(str(inbox)), event_time="time_hour", max_out_of_orderness="1 h"
    )
    delays_per_day(flights_stream).sink_to(FaultyParquetSink(str(out), control=str(control)))
    graph = env.get_job_graph("faulty-pre-commit")
    flights = read_flights(flights_dir)
    expected = expected_flight_delays(flights)

    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)

        def failures() -> list[str]:
            stats = dispatcher.request_checkpoint_statistics(graph.job_id).result(30)
            return [r.failure for r in stats.history if r.status == "FAILED"]

        arrive(flights_dir, inbox, 1)
        wait_for_rows(out, len(fired_through(flights, expected, 1)))  # checkpoints work

        (control / "decline").touch()  # subtask 0 declines; subtask 1 acknowledges its data
        arrive(flights_dir, inbox, 2)
        declined = wait_value(
            failures,
            lambda reasons: any(INJECTED in r for r in reasons),
            what="a checkpoint declined by the failing pre-commit",
        )
        (control / "decline").unlink()

        (control / "hold").touch()  # subtask 1 acknowledges too late: the checkpoint expires
        arrive(flights_dir, inbox, 3)
        expired = wait_value(
            failures,
            lambda reasons: any(f"not complete within {TIMEOUT_S:g} s" in r for r in reasons),
            what="a checkpoint expired during the slow pre-commit",
        )
        (control / "hold").unlink()

        wait_for_rows(out, len(fired_through(flights, expected, 3)))
        details = dispatcher.request_job_details(graph.job_id).result(30)
        final = dispatcher.request_checkpoint_statistics(graph.job_id).result(30)
        dispatcher.cancel_job(graph.job_id).result(30)

    reason = next(r for r in declined if INJECTED in r)
    assert "declined by" in reason and "pre-commit of parquet at" in reason, reason
    assert expired
    assert details.status is JobStatus.RUNNING and details.restarts == 0
    assert final.failed >= 2 and final.completed >= 2
    assert_exactly(committed(out), fired_through(flights, expected, 3))
