"""The SinkCommitter across failed commits and a resume from a retained checkpoint.

A bounded job writes to a ParquetSink and a PostgresSink with checkpoints every 200 ms and no
restart left. PostgreSQL freezes mid-job (SIGSTOP of its postmaster: connections hang until the
sink's 2 s connect timeout): checkpoints keep completing (their metadata is durable) while the
first PostgreSQL commit hangs and the others queue behind it. It fails, and the job fails with
checkpoints retained whose commits never ran; the one whose commit failed first may already be
deleted (3 are retained), and the job may have finished meanwhile (then its final checkpoint
holds what the last attempts staged, and the Parquet part of it may be committed already).
The job is resumed from the newest retained checkpoint with ``millrace run -s``, PostgreSQL
back: that run commits what every retained or named checkpoint owes, exactly once, and both
sinks end equal to pandas on the same files, row by row. Committing a committed checkpoint
again changes neither.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import textwrap
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

from millrace import Configuration, StreamExecutionEnvironment
from millrace.errors import JobSubmissionError
from millrace.runtime.checkpoint.checkpoint_storage import METADATA_FILE, CheckpointStorage
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.job_result import JobResultFailure
from millrace.runtime.jobmaster.job_preparation import prepare_job
from millrace.runtime.jobmaster.sink_committer import SinkCommitter
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import stop_process
from tests.integration.helpers import (
    assert_same_result,
    expected_flight_delays,
    read_flights,
    read_output,
    run_cli,
)
from tests.integration.test_postgres_sink_recovery import read_table
from tests.waiting import WAIT, result_within, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

JOB_SCRIPT = '''
"""Flight delays into Parquet and PostgreSQL: ``job.py FLIGHTS OUT CONNINFO STAGING``."""
import sys

from pyspark.sql import functions as F

from millrace import (
    FileSource, ParquetSink, PostgresSink, StreamExecutionEnvironment, tumbling,
)


def build(env, flights, out, conninfo, staging):
    delays = (
        env.from_source(
            FileSource.parquet(flights), event_time="time_hour", max_out_of_orderness="1 h"
        )
        .transform(lambda df: df.where(F.col("dep_delay").isNotNull()))
        .key_by("carrier")
        .window(tumbling("1 day"))
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("avg_dep_delay"))
    )
    delays.sink_to(ParquetSink(out))
    delays.sink_to(PostgresSink(conninfo, "delays", staging=staging, connect_timeout=2))


if __name__ == "__main__":
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, *sys.argv[1:5])
    env.execute("sink-commit-recovery")
'''


def load(script: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("sink_commit_job", script)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def markers(conninfo: str, job_id: str) -> list[int]:
    """Commit ids of ``job_id`` recorded by the PostgresSink (one per commit made)."""
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute(
            "SELECT commit_id FROM millrace_sink_commits WHERE job_id = %s ORDER BY commit_id",
            (job_id,),
        ).fetchall()
    return [r[0] for r in rows]


def newest_checkpoint(checkpoints: Path) -> Path:
    found = [d for d in checkpoints.glob("chk-*") if (d / METADATA_FILE).exists()]
    assert found, f"no retained checkpoint under {checkpoints}"
    return max(found, key=lambda d: int(d.name.split("-")[1]))


def test_a_checkpoint_whose_commit_failed_is_committed_once_when_the_job_resumes_from_it(
    spark, flights_dir, private_postgres_server, tmp_path
) -> None:
    conninfo = private_postgres_server.create_database()
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB_SCRIPT))
    out, staging = tmp_path / "out", tmp_path / "staging"
    settings = {
        "parallelism.default": 2,
        "io.tmp.dirs": str(tmp_path / "tmp"),
        "execution.bundle.max-records": 30_000,  # one month per bundle: a longer job
        "execution.checkpointing.interval": "200 ms",
        "state.checkpoints.num-retained": 3,
        "restart-strategy.type": "none",
    }
    conf = Configuration(settings)
    env = StreamExecutionEnvironment(conf, spark)
    load(script).build(env, str(flights_dir), str(out), conninfo, str(staging))
    graph = env.get_job_graph("sink-commit-recovery")

    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        waiting = cluster.job_client.submit_job_wait(graph)

        def completed() -> int:
            try:
                return dispatcher.request_checkpoint_statistics(graph.job_id).result(30).completed
            except JobSubmissionError:  # not submitted yet
                return 0

        wait_until(
            lambda: (completed() >= 2 and markers(conninfo, graph.job_id)) or waiting.done(),
            what="a PostgreSQL commit and 2 checkpoints",
        )
        assert not waiting.done(), "the job ended before PostgreSQL went down"
        postmaster = private_postgres_server.pid()
        assert postmaster is not None
        stop_process(postmaster)
        try:
            first = result_within(waiting, WAIT, what="the job failing on its commit")
        finally:
            os.kill(postmaster, signal.SIGCONT)
    assert isinstance(first, JobResultFailure), first
    assert "commit" in first.root_cause, first.root_cause

    retained = newest_checkpoint(tmp_path / "tmp" / "checkpoints" / graph.job_id)
    metadata = CheckpointStorage(str(tmp_path / "unused"), "").read(str(retained))
    done_before = markers(conninfo, graph.job_id)
    owed = [c.checkpoint_id for c in metadata.commits()]
    assert owed and not set(owed) <= set(done_before), "the retained checkpoint was committed"

    resumed = run_cli(
        [
            "run",
            str(script),
            str(flights_dir),
            str(out),
            conninfo,
            str(staging),
            "-s",
            str(retained),
            *[arg for key, value in settings.items() for arg in ("-D", f"{key}={value}")],
        ],
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    expected = expected_flight_delays(read_flights(flights_dir))
    in_postgres = read_table(conninfo, expected)
    assert not in_postgres.duplicated(["carrier", "window_start"]).any()
    assert_same_result(in_postgres, expected)
    assert_same_result(read_output(out), expected)
    done_after = markers(conninfo, graph.job_id)
    assert done_after == sorted(set(done_before) | set(owed))  # each once

    # committing it again, as a failover of the resumed run would: nothing changes
    committer = SinkCommitter(graph.job_id)
    committer.set_sinks(prepare_job(graph, conf, CheckpointStorage("", ""), None, None).sinks)
    files = sorted(p.name for p in out.glob("part-*"))
    result_within(committer.commit(metadata), 60, what="the repeated commit")
    committer.close()
    assert sorted(p.name for p in out.glob("part-*")) == files
    assert_same_result(read_table(conninfo, expected), expected)
    assert markers(conninfo, graph.job_id) == done_after
