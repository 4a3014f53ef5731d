"""Running keyed aggregates (``key_by().agg()``, no window) end to end, against pandas.

Bounded jobs write one final row per key, at parallelism 1, 2 and 3, with keyed state compacted
on the way (partials merged per key, or records kept for aggregates that do not decompose). An
unbounded job over a directory emits the changed keys at every checkpoint into PostgreSQL,
upserting on the key, and a TaskManager crashed mid-job costs nothing: the table ends equal to
pandas row for row.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pandas as pd
import psycopg
import pytest

from millrace import (
    Configuration,
    DirectorySource,
    FileSource,
    ParquetSink,
    PostgresSink,
    StreamExecutionEnvironment,
)
from millrace.errors import JobSubmissionError
from millrace.runtime.dispatcher.dispatcher_gateway import DispatcherGateway
from millrace.runtime.executiongraph import JobStatus
from millrace.runtime.job_result import JobResultSuccess
from millrace.runtime.minicluster import MiniCluster
from millrace.spark.spark_task_runtime import SparkTaskRuntime
from tests.faults import busy_task_executor, crash_task_executor
from tests.integration.helpers import held_at_december, read_flights, read_output
from tests.integration.streams import stream_settings
from tests.rows import assert_same_rows
from tests.waiting import result_within, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

VOCABULARY = [f"w{i:03d}" for i in range(300)]


def write_text(directory: Path, name: str, documents: range, seed: int) -> None:
    """Lines ``d<doc>: word word ...`` with Zipf-like word frequencies (fixed seed)."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
    lines = []
    for doc in documents:
        for _ in range(20):
            words = rng.choices(VOCABULARY, weights, k=rng.randint(1, 12))
            lines.append(f"d{doc}: " + " ".join(words))
    (directory / name).write_text("\n".join(lines) + "\n")


def pandas_counts(directory: Path) -> pd.DataFrame:
    """Per word: occurrences ``n`` and documents ``docs`` (pandas, from the files)."""
    rows = []
    for path in sorted(directory.glob("*.txt")):
        for line in path.read_text().splitlines():
            doc, _, text = line.partition(": ")
            rows += [(word, doc) for word in re.split(r"\s+", text) if word]
    frame = pd.DataFrame(rows, columns=["word", "doc"])
    grouped = frame.groupby("word")
    result = pd.DataFrame({"n": grouped.size(), "docs": grouped["doc"].nunique()}).reset_index()
    return result.sort_values("word", ignore_index=True)


def words_of(stream):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    return stream.transform(
        lambda df: df.select(
            F.split("value", ": ").getItem(0).alias("doc"),
            F.explode(F.split(F.split("value", ": ").getItem(1), " ")).alias("word"),
        ).where(F.col("word") != "")
    )


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_a_bounded_word_count_writes_one_final_row_per_word(spark, tmp_path, parallelism) -> None:
    from pyspark.sql import functions as F

    text = tmp_path / "text"
    text.mkdir()
    for part, seed in zip(range(6), (5, 3, 8, 1, 9, 2), strict=True):
        write_text(text, f"part-{seed}.txt", range(part * 10, part * 10 + 10), seed)
    settings = {
        "io.tmp.dirs": str(tmp_path / "tmp"),
        "parallelism.default": parallelism,
        "state.compaction.max-files": 2,  # six files per consumer: partials get merged
    }
    env = StreamExecutionEnvironment(Configuration(settings), spark)
    (
        words_of(env.from_source(FileSource.text(str(text))))
        .key_by("word")
        .agg(F.count("*").alias("n"), F.count("doc").alias("docs_lines"))
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    result = env.execute("word-count")

    out = read_output(tmp_path / "out", order=("word",))
    expected = pandas_counts(text)
    assert out["word"].tolist() == expected["word"].tolist()  # one row per word
    assert out["n"].tolist() == expected["n"].tolist()
    assert out["docs_lines"].tolist() == expected["n"].tolist()
    # at parallelism 1 the aggregate is chained into the source: one vertex, its output
    *_source, aggregate = result.accumulators.values()
    assert len(result.accumulators) == (1 if parallelism == 1 else 2)
    assert aggregate.records_out == len(expected)


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_running_aggregates_of_flights_per_origin_and_carrier_equal_pandas(
    spark, flights_dir, tmp_path, parallelism
) -> None:
    """Mixed aggregates (one does not decompose: the keyed side keeps records), files listed
    out of event-time order."""
    from pyspark.sql import functions as F

    shuffled = tmp_path / "flights"
    shuffled.mkdir()
    for month, name in zip((7, 2, 11, 5), "dcba", strict=True):
        shutil.copy(flights_dir / f"flights-2013-{month:02d}.parquet", shuffled / f"{name}.parquet")
    settings = {
        "io.tmp.dirs": str(tmp_path / "tmp"),
        "parallelism.default": parallelism,
        "execution.bundle.max-records": 10_000,
        "state.compaction.max-files": 2,
    }
    env = StreamExecutionEnvironment(Configuration(settings), spark)
    (
        env.from_source(FileSource.parquet(str(shuffled)))
        .key_by("origin", "carrier")
        .agg(
            F.count("*").alias("flights"),
            F.sum("distance").alias("distance"),
            F.min("dep_delay").alias("min_dep_delay"),
            F.max("arr_delay").alias("max_arr_delay"),
            F.avg("dep_delay").alias("avg_dep_delay"),
            F.count_distinct("dest").alias("destinations"),
        )
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    env.execute("flights-per-origin")

    flights = read_flights(shuffled)
    grouped = flights.groupby(["origin", "carrier"])
    expected = pd.DataFrame(
        {
            "flights": grouped.size(),
            "distance": grouped["distance"].sum(),
            "min_dep_delay": grouped["dep_delay"].min(),
            "max_arr_delay": grouped["arr_delay"].max(),
            "avg_dep_delay": grouped["dep_delay"].mean(),
            "destinations": grouped["dest"].nunique(),
        }
    ).reset_index()
    out = read_output(tmp_path / "out", order=("origin", "carrier"))
    assert_same_rows(out[list(expected.columns)], expected)  # one row per key, as a multiset


@pytest.mark.parametrize("parallelism", [1, 2])  # 1: the aggregate chained into the source
def test_a_bounded_running_aggregate_restores_its_keyed_state_after_a_crash(
    spark, flights_dir, tmp_path, parallelism
) -> None:
    """Checkpoints every 200 ms, a TaskManager crashed after two completed (December's flights
    held at the source until then, so the job cannot end first): the keyed state comes back by
    key group, the sources resume, and the one final row per key is exact."""
    from pyspark.sql import functions as F

    settings = stream_settings(
        tmp_path,
        **{
            "execution.bundle.max-records": 30_000,  # one month per bundle
            "execution.checkpointing.interval": "200 ms",
            "state.compaction.max-files": 3,
            "parallelism.default": parallelism,
        },
    )
    conf = Configuration(settings)
    env = StreamExecutionEnvironment(conf, spark)
    gate = tmp_path / "december"
    (
        env.from_source(FileSource.parquet(str(flights_dir)))
        .transform(held_at_december(gate), name="held at december")
        .key_by("dest")
        .agg(F.count("*").alias("flights"), F.max("distance").alias("distance"))
        .sink_to(ParquetSink(str(tmp_path / "out")))
    )
    graph = env.get_job_graph("flights-per-dest")
    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        waiting = cluster.job_client.submit_job_wait(graph)

        def completed() -> int:
            try:
                return dispatcher.request_checkpoint_statistics(graph.job_id).result(30).completed
            except JobSubmissionError:  # not submitted yet
                return 0

        wait_until(lambda: completed() >= 2 or waiting.done(), what="2 completed checkpoints")
        assert not waiting.done(), "the job ended before the TaskManager was lost"
        crash_task_executor(busy_task_executor(cluster))
        gate.touch()  # December may go on: the restored job runs to its end
        result = result_within(waiting, 180, what="the job's result after the crash")

    assert isinstance(result, JobResultSuccess), result
    assert result.details.restarts >= 1
    assert result.details.vertices[0].metrics.records_in < 336_776  # resumed, not re-read
    flights = read_flights(flights_dir)
    grouped = flights.groupby("dest")
    expected = pd.DataFrame(
        {"flights": grouped.size(), "distance": grouped["distance"].max()}
    ).reset_index()
    out = read_output(tmp_path / "out", order=("dest",))
    assert out["dest"].tolist() == sorted(expected["dest"])  # one row per key
    merged = out.merge(expected, on="dest", suffixes=("", "_pandas"))
    assert (merged["flights"] == merged["flights_pandas"]).all()
    assert (merged["distance"] == merged["distance_pandas"]).all()


def table_of(conninfo: str) -> pd.DataFrame:
    with psycopg.connect(conninfo) as conn:
        try:
            rows = conn.execute("SELECT word, n, docs FROM word_counts").fetchall()
        except psycopg.errors.UndefinedTable:
            rows = []
    frame = pd.DataFrame(rows, columns=["word", "n", "docs"])
    return frame.sort_values("word", ignore_index=True)


def same(table: pd.DataFrame, expected: pd.DataFrame) -> bool:
    return table.astype("int64", errors="ignore").equals(expected.astype("int64", errors="ignore"))


@pytest.mark.parametrize("parallelism", [1, 2])  # 1: the aggregate chained into the source
def test_an_unbounded_word_count_upserts_into_postgres_and_survives_a_crash(
    spark, tmp_path, postgres_conninfo, parallelism
) -> None:
    from pyspark.sql import functions as F

    inbox, produced = tmp_path / "inbox", tmp_path / "produced"
    inbox.mkdir()
    produced.mkdir()
    conf = Configuration(stream_settings(tmp_path, **{"parallelism.default": parallelism}))
    env = StreamExecutionEnvironment(conf, spark)
    (
        words_of(env.from_source(DirectorySource.text(str(inbox))))
        .key_by("word")
        .agg(F.count("*").alias("n"), F.count_distinct("doc").alias("docs"))
        .sink_to(PostgresSink(postgres_conninfo, "word_counts", staging=str(tmp_path / "stg")))
    )
    graph = env.get_job_graph("word-count-stream")

    def arrive(part: int) -> None:
        write_text(produced, f"part-{part}.txt", range(part * 5, part * 5 + 5), part)
        hidden = inbox / f".part-{part}.txt"
        shutil.copy(produced / f"part-{part}.txt", hidden)
        hidden.rename(inbox / f"part-{part}.txt")

    with MiniCluster(conf, SparkTaskRuntime(conf, given=spark)) as cluster:
        assert cluster.dispatcher is not None
        dispatcher = cluster.dispatcher.get_self_gateway(DispatcherGateway)
        cluster.job_client.submit_job_detached(graph).result(60)
        for part in (0, 1):
            arrive(part)
        first = pandas_counts(produced)
        wait_until(
            lambda: same(table_of(postgres_conninfo), first),
            what="the counts of the first two files committed",
        )

        crash_task_executor(busy_task_executor(cluster))
        for part in (2, 3, 4):
            arrive(part)
        final = pandas_counts(produced)
        wait_until(
            lambda: same(table_of(postgres_conninfo), final),
            what="the counts of all five files committed",
        )
        details = dispatcher.request_job_details(graph.job_id).result(30)
        dispatcher.cancel_job(graph.job_id).result(30)

    assert details.status is JobStatus.RUNNING and details.restarts >= 1
    table = table_of(postgres_conninfo)
    assert table["word"].tolist() == final["word"].tolist()
    assert table["n"].tolist() == final["n"].tolist()
    assert table["docs"].tolist() == final["docs"].tolist()
    assert len(first) < len(final) or (first["n"] < final.loc[: len(first) - 1, "n"]).any()
