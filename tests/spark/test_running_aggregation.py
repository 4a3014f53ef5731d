"""The Spark plans of the running keyed aggregate (``millrace.spark.running_aggregation``) over
small frames in the test session: the producer's partials (or records) with their key group and
target subtask, the rows emitted for the keys of fresh state files only, each with its
aggregates merged over all the state (Flink's local-global aggregation, SQL's GROUP BY as
upserts), compaction that changes no answer, and the once-only aggregate of bounded input.
Answers are computed by the aggregates' definitions in plain Python (``aggregate_oracle``);
rows are compared as multisets.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from millrace.api.operators import (
    KeyedAggregateOperator,
    KeyedRecordsOperator,
    LocalKeyedAggregateOperator,
)
from millrace.runtime.checkpoint.key_groups import key_group_range
from millrace.spark.aggregation import AggregatePlan
from millrace.spark.running_aggregation import (
    aggregated_once,
    compacted_state,
    emitted_rows,
    keyed_exchange_frame,
)
from tests.spark.aggregate_oracle import (
    SCHEMA,
    answer,
    buffered_columns,
    decomposable_columns,
    exchange_tables,
    multiset,
    records,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

KEYS = ("a", "b", "c", "d", None, "nulls")
MAX_PARALLELISM = 8
PARTIALS = ("__p0_c", "__p1_c", "__p2_s", "__p3_m", "__p4_m", "__p5_s", "__p5_c")
OUT = ("k", "n", "nv", "s", "lo", "hi", "mean")
BUFFERED_OUT = ("k", "dv", "s")


def _ops(decomposable: bool) -> tuple[Any, KeyedAggregateOperator]:
    """The producer's and the keyed side's operators of one aggregate."""
    plan = AggregatePlan.of(decomposable_columns() if decomposable else buffered_columns())
    assert plan.decomposable is decomposable
    local: Any = KeyedRecordsOperator(("k",))
    if decomposable:
        local = LocalKeyedAggregateOperator(("k",), plan)
    return local, KeyedAggregateOperator(("k",), plan, "running", False)


def _partials(rows: list[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    """One partial row per key by definition: count(*), count(v), sum(v), min(v), max(w),
    and avg(v) as sum and count."""
    out: Counter[tuple[Any, ...]] = Counter()
    for k, (_, n, nv, s, lo, hi, _mean) in answer(rows).items():
        out[(k, n, nv, s, lo, hi, s, nv)] += 1
    return out


def _state_file(spark: Any, tmp: Path, name: str, rows: list[tuple[Any, ...]], local: Any) -> str:
    """A keyed state file as the exchange hands it to the keyed side (one consumer)."""
    [table] = exchange_tables(spark, rows, local, MAX_PARALLELISM, 1).values()
    path = str(tmp / f"{name}.parquet")
    pq.write_table(table, path)
    return path


def _key_groups(spark: Any, keys: list[Any]) -> dict[Any, int]:
    """Spark's murmur3 ``hash`` of each key mod the max parallelism (Flink's key group)."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(k,) for k in keys], "k string")
    got = frame.select("k", F.pmod(F.hash("k"), F.lit(MAX_PARALLELISM)).alias("g")).collect()
    return {row.k: row.g for row in got}


def test_partials_are_one_row_per_key_with_its_key_group_and_target(spark) -> None:
    rows = records(1, 60, KEYS)
    local, _ = _ops(True)
    frame = spark.createDataFrame(rows, SCHEMA)
    table = keyed_exchange_frame(frame, local, MAX_PARALLELISM, 3).toArrow()
    assert multiset([table], ("k", *PARTIALS)) == _partials(rows)
    groups = _key_groups(spark, list(KEYS))
    expected = Counter((k, groups[k], groups[k] * 3 // MAX_PARALLELISM) for k in KEYS)
    assert multiset([table], ("k", "__kg", "__target")) == expected
    for k, group, target in expected:  # the target owns the key group (Flink's ranges)
        assert group in key_group_range(MAX_PARALLELISM, 3, target), k


def test_records_cross_the_exchange_whole_with_their_key_group_and_target(spark) -> None:
    rows = records(2, 40, KEYS)
    local, _ = _ops(False)
    table = keyed_exchange_frame(spark.createDataFrame(rows, SCHEMA), local, MAX_PARALLELISM, 2)
    table = table.toArrow()
    assert multiset([table], ("k", "v", "w")) == Counter(rows)
    groups = _key_groups(spark, list(KEYS))
    assert multiset([table], ("k", "__kg", "__target")) == Counter(
        (k, groups[k], groups[k] * 2 // MAX_PARALLELISM) for k, _, _ in rows
    )


def test_an_empty_bundle_has_no_partials(spark) -> None:
    local, _ = _ops(True)
    empty = spark.createDataFrame([], SCHEMA)
    assert keyed_exchange_frame(empty, local, MAX_PARALLELISM, 2).toArrow().num_rows == 0


@pytest.mark.parametrize("decomposable", [True, False], ids=["partials", "records"])
def test_only_fresh_keys_are_emitted_with_values_over_all_state(
    spark, tmp_path: Path, decomposable: bool
) -> None:
    local, op = _ops(decomposable)
    first, second = records(3, 30, KEYS), records(4, 20, KEYS)
    changed = records(5, 12, ("a", None, "e"))  # one settled key, the null key, a new key
    settled = [
        _state_file(spark, tmp_path, "s1", first, local),
        _state_file(spark, tmp_path, "s2", second, local),
    ]
    fresh = [_state_file(spark, tmp_path, "f1", changed, local)]
    schema = spark.read.parquet(*settled, *fresh).schema
    names = OUT if decomposable else BUFFERED_OUT
    everything = answer(first + second + changed, decomposable)
    expected = Counter(everything[k] for k in ("a", None, "e"))

    got = emitted_rows(spark, op, settled, fresh, schema).toArrow()
    assert multiset([got], names) == expected
    inferred = emitted_rows(spark, op, settled, fresh, None, one_partition=True).toArrow()
    assert multiset([inferred], names) == expected

    # nothing settled yet: every key of the fresh files, over the fresh files only
    alone = emitted_rows(spark, op, [], settled, schema).toArrow()
    assert multiset([alone], names) == Counter(answer(first + second, decomposable).values())


@pytest.mark.parametrize("decomposable", [True, False], ids=["partials", "records"])
def test_compaction_merges_partials_per_key_and_changes_no_answer(
    spark, tmp_path: Path, decomposable: bool
) -> None:
    local, op = _ops(decomposable)
    parts = [records(seed, 25, KEYS) for seed in (6, 7, 8)]
    paths = [_state_file(spark, tmp_path, f"s{i}", rows, local) for i, rows in enumerate(parts)]
    schema = spark.read.parquet(*paths).schema
    compacted = compacted_state(spark, op, paths, schema).toArrow()
    written = pa.concat_tables([pq.read_table(p) for p in paths])
    assert [(f.name, f.type) for f in compacted.schema] == [
        (f.name, f.type) for f in written.schema
    ]
    every = [row for rows in parts for row in rows]
    if decomposable:
        assert multiset([compacted], ("k", *PARTIALS)) == _partials(every)
    else:  # records are copied as they are
        assert multiset([compacted]) == multiset([written])
    path = str(tmp_path / "compacted.parquet")
    pq.write_table(compacted, path)
    names = OUT if decomposable else BUFFERED_OUT
    again = emitted_rows(spark, op, [], [path], schema).toArrow()
    assert multiset([again], names) == Counter(answer(every, decomposable).values())


@pytest.mark.parametrize("decomposable", [True, False], ids=["partials", "records"])
def test_bounded_input_is_aggregated_once_per_key(
    spark, tmp_path: Path, decomposable: bool
) -> None:
    local, op = _ops(decomposable)
    parts = [records(seed, 20, KEYS) for seed in (9, 10)]
    tables = [t for rows in parts for t in exchange_tables(spark, rows, local, 8, 2).values()]
    for i, table in enumerate(tables):  # both targets' files of both bundles
        pq.write_table(table, str(tmp_path / f"part-{i}.parquet"))
    frame = spark.read.parquet(str(tmp_path))
    names = OUT if decomposable else BUFFERED_OUT
    expected = Counter(answer(parts[0] + parts[1], decomposable).values())
    assert multiset([aggregated_once(frame, op).toArrow()], names) == expected
    without_internal = frame.drop("__kg")  # the key group column is optional
    assert multiset([aggregated_once(without_internal, op).toArrow()], names) == expected


def test_one_partition_aggregates_without_a_shuffle_and_the_default_reads_in_parallel(
    spark, tmp_path: Path
) -> None:
    """BATCH reads a subtask's exchange files as one partition, so the aggregation is one
    Spark stage (no Exchange in the plan); the streaming default reads the state files in
    parallel and aggregates through a shuffle. Both give every key once, by definition.
    Kills ``emitted_rows`` #1 (default one_partition True), #8, #9 (one_partition ignored:
    never / always coalesced), #11 (``coalesce(2)``)."""
    local, op = _ops(True)
    parts = [records(seed, 20, KEYS) for seed in (11, 12, 13)]
    paths = [_state_file(spark, tmp_path, f"f{i}", rows, local) for i, rows in enumerate(parts)]
    schema = spark.read.parquet(*paths).schema
    expected = Counter(answer([row for rows in parts for row in rows]).values())

    def plan(frame: Any) -> str:
        return frame._jdf.queryExecution().executedPlan().toString()

    parallel = emitted_rows(spark, op, [], paths, schema)
    assert "Exchange" in plan(parallel)
    assert multiset([parallel.toArrow()], OUT) == expected
    single = emitted_rows(spark, op, [], paths, schema, one_partition=True)
    assert "Exchange" not in plan(single)
    assert multiset([single.toArrow()], OUT) == expected


def test_state_files_are_read_with_the_given_schema_or_an_inferred_one(
    spark, tmp_path: Path
) -> None:
    """A given schema is the one the state is read with, not the files' own (Spark widens a
    file's int ``min`` partial to the schema's long); without one (None) it is inferred.
    Compaction and emission give the same rows either way, in the schema's types. Kills
    ``compacted_state`` #2, #3, #4 and ``emitted_rows`` #4."""
    import pyarrow.compute as pc

    local, op = _ops(True)
    parts = [records(seed, 20, KEYS) for seed in (14, 15)]
    paths = [_state_file(spark, tmp_path, f"s{i}", rows, local) for i, rows in enumerate(parts)]
    schema = spark.read.parquet(*paths).schema
    assert dict((f.name, f.dataType.simpleString()) for f in schema)["__p3_m"] == "bigint"
    for path in paths:  # the min(v) partial written as int32
        table = pq.read_table(path)
        index = table.schema.get_field_index("__p3_m")
        narrow = pc.cast(table.column(index), pa.int32())
        pq.write_table(table.set_column(index, "__p3_m", narrow), path)
    every = [row for rows in parts for row in rows]

    given = compacted_state(spark, op, paths, schema)
    assert given.dtypes == [(f.name, f.dataType.simpleString()) for f in schema]
    assert multiset([given.toArrow()], ("k", *PARTIALS)) == _partials(every)
    inferred = compacted_state(spark, op, paths, None)
    assert dict(inferred.dtypes)["__p3_m"] == "int"
    assert multiset([inferred.toArrow()], ("k", *PARTIALS)) == _partials(every)

    emitted = emitted_rows(spark, op, [], paths, schema)
    assert dict(emitted.dtypes)["lo"] == "bigint"
    assert multiset([emitted.toArrow()], OUT) == Counter(answer(every).values())
