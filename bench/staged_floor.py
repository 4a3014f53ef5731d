"""The floor of stage-by-stage execution: a bounded keyed aggregation run as Millrace's BATCH
mode runs it, in plain PySpark with no runtime around it.

``parallelism`` producer threads each run one Spark job over their share of the files (the
chain, then partial aggregates per key, key group and consumer), hand each consumer its rows as
a Parquet file, then ``parallelism`` consumer threads each merge their files with one Spark job
and write the result: two stages of concurrent Spark jobs with a blocking exchange between
them, like Millrace's source and keyed subtasks, minus every control-plane cost (no cluster,
RPC, deployment, operator shipping, metrics or commit). What Millrace BATCH costs above this
is the runtime's; what this costs above one plain Spark job is the design's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["staged_aggregate"]


def staged_aggregate(
    spark: Any,
    files: list[str],
    reader: Callable[[list[str]], Any],
    chain: Callable[[Any], Any],
    keys: list[str],
    partials: Callable[[], list[Any]],
    finals: Callable[[], list[Any]],
    parallelism: int,
    work: Path,
) -> float:
    """Aggregate ``chain(reader(files))`` per ``keys`` in two stages; returns seconds.

    Args:
        spark: The SparkSession.
        files: Input files, split among producers by index (``files[i::parallelism]``).
        reader: Reads a list of files as one DataFrame (e.g. ``spark.read.text``).
        chain: The producers' DataFrame -> DataFrame (e.g. lines -> words).
        keys: The key columns of the chain's output (the first one picks the key group).
        partials: The producers' partial aggregates (Spark columns, named).
        finals: The consumers' aggregates of the partials' columns (Spark columns, named).
        parallelism: Producers and consumers.
        work: A fresh directory for the exchange and the output (``out-<i>.parquet``).

    Raises:
        Exception: The first error of a producer or consumer.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    work.mkdir(parents=True)

    def produce(index: int) -> None:
        group = F.pmod(F.hash(*[F.col(k) for k in keys]), F.lit(128))
        target = (group * parallelism / 128).cast("int")
        table = (
            chain(reader(files[index::parallelism]))
            .groupBy(*keys, group.alias("kg"), target.alias("target"))
            .agg(*partials())
            .toArrow()
        )
        for consumer in range(parallelism):
            mine = table.filter(pc.equal(table.column("target"), consumer))
            pq.write_table(mine, work / f"{index}-to{consumer}.parquet")

    def consume(index: int) -> None:
        paths = [str(work / f"{p}-to{index}.parquet") for p in range(parallelism)]
        table = spark.read.parquet(*paths).coalesce(1).groupBy(*keys).agg(*finals()).toArrow()
        pq.write_table(table, work / f"out-{index}.parquet")

    errors: list[BaseException] = []

    def guarded(stage: Callable[[int], None], index: int) -> None:
        try:
            stage(index)
        except BaseException as error:  # re-raised on the caller's thread below
            errors.append(error)

    started = time.perf_counter()
    for stage in (produce, consume):
        threads = [threading.Thread(target=guarded, args=(stage, i)) for i in range(parallelism)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
    return time.perf_counter() - started
