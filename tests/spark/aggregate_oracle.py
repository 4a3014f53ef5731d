"""Records, aggregates and their answers computed by definition in plain Python, for the
running-aggregate tests (``test_running_aggregation``, ``test_keyed_aggregate_stream_task``).

The aggregates: ``count(*)``, ``count(v)``, ``sum(v)``, ``min(v)``, ``max(w)``, ``avg(v)``
(all decompose into partials), and ``count(DISTINCT v)`` with ``sum(v)`` (does not: the keyed
side buffers the records). Keys include null; values include nulls and keys whose values are
all null.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "SCHEMA",
    "answer",
    "buffered_columns",
    "decomposable_columns",
    "exchange_tables",
    "multiset",
    "records",
]

SCHEMA = "k string, v long, w double"

Row = tuple[Any, ...]  # (k, v, w)


def records(seed: int, n: int, keys: Sequence[str | None]) -> list[Row]:
    """``n`` records over ``keys``, deterministic in ``seed``: about one ``v`` in five null,
    and the key ``"nulls"`` (if given) with null ``v`` only."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.choice(list(keys))
        v = None if k == "nulls" or rng.random() < 0.2 else rng.randint(-50, 50)
        w = None if rng.random() < 0.1 else rng.randint(-1000, 1000) / 8
        out.append((k, v, w))
    return out


def decomposable_columns() -> tuple[Any, ...]:
    from pyspark.sql import functions as F

    return (
        F.count("*").alias("n"),
        F.count("v").alias("nv"),
        F.sum("v").alias("s"),
        F.min("v").alias("lo"),
        F.max("w").alias("hi"),
        F.avg("v").alias("mean"),
    )


def buffered_columns() -> tuple[Any, ...]:
    from pyspark.sql import functions as F

    return (F.count_distinct("v").alias("dv"), F.sum("v").alias("s"))


def _some(values: Iterable[Any]) -> list[Any]:
    return [x for x in values if x is not None]


def answer(rows: Iterable[Row], decomposable: bool = True) -> dict[Any, Row]:
    """Key -> its aggregates over ``rows``, by the aggregates' SQL definitions."""
    groups: dict[Any, list[Row]] = {}
    for row in rows:
        groups.setdefault(row[0], []).append(row)
    out = {}
    for k, group in groups.items():
        v = _some(r[1] for r in group)
        w = _some(r[2] for r in group)
        if decomposable:
            out[k] = (
                k,
                len(group),
                len(v),
                sum(v) if v else None,
                min(v) if v else None,
                max(w) if w else None,
                sum(v) / len(v) if v else None,
            )
        else:
            out[k] = (k, len(set(v)), sum(v) if v else None)
    return out


def multiset(tables: Iterable[Any], columns: Sequence[str] | None = None) -> Counter[Row]:
    """The rows of ``tables`` (``pyarrow.Table``s) as a multiset of tuples."""
    rows: Counter[Row] = Counter()
    for table in tables:
        names = list(columns) if columns is not None else table.column_names
        for row in table.select(names).to_pylist():
            rows[tuple(row[c] for c in names)] += 1
    return rows


def exchange_tables(
    spark: Any, rows: list[Row], op: Any, max_parallelism: int, consumers: int
) -> dict[int, Any]:
    """The producer's side: ``rows`` through ``keyed_exchange_frame`` (one Spark job), split
    by target subtask as the exchange writes them (``__target`` dropped)."""
    import pyarrow.compute as pc

    from millrace.spark.running_aggregation import keyed_exchange_frame
    from millrace.spark.windowing import TARGET

    frame = spark.createDataFrame(rows, SCHEMA)
    table = keyed_exchange_frame(frame, op, max_parallelism, consumers).toArrow()
    out = {}
    for target in range(consumers):
        part = table.filter(pc.equal(table.column(TARGET), target)).drop_columns([TARGET])
        if part.num_rows:
            out[target] = part
    return out
