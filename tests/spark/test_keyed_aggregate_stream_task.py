"""KeyedAggregateStreamTask, the running keyed aggregate (Flink SQL's streaming GROUP BY as
upserts), run on its own thread in the test session's SparkSession with scripted producers
(``keyed_task_harness``):

- at each checkpoint barrier it emits exactly the keys whose input changed since the previous
  barrier, each with its aggregates over all its input so far (partials merged, or a buffered
  aggregate over the records); untouched keys are not emitted again, a barrier after no input
  emits nothing; without checkpointing, every batch of input emits; the task counts the rows
  it received and emitted;
- a bounded job emits one final row per key, once, at the end of input, restored state included;
- compaction of the state files (past ``state.compaction.max-files``) merges partials per key
  and changes no answer;
- the keyed state survives snapshot and restore by key group at another parallelism: every
  restored subtask holds exactly the rows of its key groups (none lost, none twice), and the
  replayed input after the checkpoint gives the same answers as before the failure.

Answers are computed by definition in plain Python (``aggregate_oracle``); rows are compared
as multisets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from millrace.api.operators import (
    KeyedAggregateOperator,
    KeyedRecordsOperator,
    LocalKeyedAggregateOperator,
)
from millrace.runtime.checkpoint.key_groups import key_group_range
from millrace.runtime.jobgraph import OperatorKind
from millrace.spark.aggregation import AggregatePlan
from millrace.spark.keyed_aggregate_stream_task import KeyedAggregateStreamTask
from tests.spark.aggregate_oracle import (
    answer,
    buffered_columns,
    decomposable_columns,
    exchange_tables,
    multiset,
    records,
)
from tests.spark.keyed_task_harness import (
    KeyedTaskRun,
    keys_in_every_key_group,
    pending_tables,
    snapshot_rows,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

MAX_PARALLELISM = 8
OUT = ("k", "n", "nv", "s", "lo", "hi", "mean")
BUFFERED_OUT = ("k", "dv", "s")
PARTIALS = ("__p0_c", "__p1_c", "__p2_s", "__p3_m", "__p4_m", "__p5_s", "__p5_c")


@pytest.fixture
def runs() -> Iterator[list[KeyedTaskRun]]:
    started: list[KeyedTaskRun] = []
    yield started
    for run in started:
        run.stop()


def _ops(decomposable: bool, bounded: bool = False) -> tuple[Any, KeyedAggregateOperator]:
    plan = AggregatePlan.of(decomposable_columns() if decomposable else buffered_columns())
    local: Any = KeyedRecordsOperator(("k",))
    if decomposable:
        local = LocalKeyedAggregateOperator(("k",), plan)
    return local, KeyedAggregateOperator(("k",), plan, "running", bounded)


def _start(
    spark: Any,
    runs: list[KeyedTaskRun],
    work: Path,
    op: KeyedAggregateOperator,
    **options: Any,
) -> KeyedTaskRun:
    run = KeyedTaskRun(
        KeyedAggregateStreamTask,
        [(OperatorKind.AGGREGATE, "running", op)],
        work,
        inputs=(0, 0),  # two producer subtasks
        max_parallelism=MAX_PARALLELISM,
        **options,
    )
    runs.append(run)
    return run.start(spark)


def _send(spark: Any, run: KeyedTaskRun, channel: int, rows: list[Any], local: Any) -> None:
    """``rows`` through the producer's plan; the part of ``run``'s subtask sent on
    ``channel``."""
    part = exchange_tables(spark, rows, local, MAX_PARALLELISM, run.parallelism)
    if run.subtask_index in part:
        run.bundle(channel, part[run.subtask_index])


def _values(rows: list[Any], keys: set[Any], decomposable: bool = True) -> Counter[Any]:
    """The upserts of ``keys`` after ``rows``: each key's aggregates over all of them."""
    everything = answer(rows, decomposable)
    return Counter(everything[k] for k in keys)


@pytest.mark.parametrize("decomposable", [True, False], ids=["partials", "records"])
def test_each_checkpoint_emits_the_changed_keys_with_values_over_all_input(
    spark, tmp_path: Path, runs: list[KeyedTaskRun], decomposable: bool
) -> None:
    local, op = _ops(decomposable)
    names = OUT if decomposable else BUFFERED_OUT
    run = _start(spark, runs, tmp_path, op)
    first = records(11, 30, ("a", "b", "c"))
    second = records(12, 20, ("b", "d", "nulls"))
    _send(spark, run, 0, first, local)
    _send(spark, run, 1, second, local)
    snapshot = run.checkpoint(1)
    assert multiset(pending_tables(snapshot), names) == _values(
        first + second, {"a", "b", "c", "d", "nulls"}, decomposable
    )

    third = records(13, 15, ("a", None))  # a changes; the null key is new
    _send(spark, run, 0, third, local)
    snapshot = run.checkpoint(2)
    assert multiset(pending_tables(snapshot), names) == _values(
        first + second + third, {"a", None}, decomposable
    )

    snapshot = run.checkpoint(3)  # no input since the last barrier: nothing emitted
    assert snapshot.sink_pending == {}

    fourth = records(14, 10, ("d", "e"))
    _send(spark, run, 1, fourth, local)
    run.end()  # the keys changed after the last barrier are emitted at the end of input
    outputs = run.outputs()
    assert len(outputs) == 3
    assert multiset(outputs[-1:], names) == _values(
        first + second + third + fourth, {"d", "e"}, decomposable
    )
    # the task's counters: exchange rows received, rows emitted, one Spark job per emission
    received = sum(
        t.num_rows
        for rows in (first, second, third, fourth)
        for t in exchange_tables(spark, rows, local, MAX_PARALLELISM, 1).values()
    )
    metrics = run.env.metrics
    assert (metrics.records_in, metrics.records_out, metrics.bundles) == (
        received,
        sum(t.num_rows for t in outputs),
        3,
    )


def test_without_checkpoints_every_batch_of_input_emits_its_changed_keys(
    spark, tmp_path: Path, runs: list[KeyedTaskRun]
) -> None:
    local, op = _ops(True)
    run = _start(spark, runs, tmp_path, op, checkpointing=False)
    first, second = records(21, 25, ("a", "b", "c")), records(22, 10, ("c", None))
    _send(spark, run, 0, first, local)
    wait_until(lambda: len(run.outputs()) == 1, what="the first batch's emission")
    _send(spark, run, 1, second, local)
    wait_until(lambda: len(run.outputs()) == 2, what="the second batch's emission")
    run.end()
    outputs = run.outputs()
    assert len(outputs) == 2  # the end of input has nothing left to emit
    assert multiset(outputs[:1], OUT) == _values(first, {"a", "b", "c"})
    assert multiset(outputs[1:], OUT) == _values(first + second, {"c", None})


@pytest.mark.parametrize("decomposable", [True, False], ids=["partials", "records"])
def test_a_bounded_job_emits_every_key_once_at_the_end_of_input(
    spark, tmp_path: Path, runs: list[KeyedTaskRun], decomposable: bool
) -> None:
    local, op = _ops(decomposable, bounded=True)
    run = _start(spark, runs, tmp_path, op)
    first, second = records(31, 30, ("a", "b", "nulls")), records(32, 20, ("b", "c", None))
    _send(spark, run, 0, first, local)
    snapshot = run.checkpoint(1)
    assert snapshot.sink_pending == {}  # a bounded job emits only at the end
    _send(spark, run, 1, second, local)
    run.end()
    outputs = run.outputs()
    assert len(outputs) == 1
    names = OUT if decomposable else BUFFERED_OUT
    assert multiset(outputs, names) == Counter(answer(first + second, decomposable).values())

    # restored from the checkpoint (its state settled): the end of input still emits every key
    again = _start(spark, runs, tmp_path / "restored", op, restore=snapshot, attempt="restore")
    third = records(33, 10, ("c", "d"))
    _send(spark, again, 0, third, local)
    again.end()
    outputs = again.outputs()
    assert len(outputs) == 1
    assert multiset(outputs, names) == Counter(answer(first + third, decomposable).values())


def _merged(state: pa.Table) -> dict[Any, tuple[Any, ...]]:
    """Partial rows merged per key by definition (counts and sums add, min and max)."""
    merged: dict[Any, list[Any]] = {}
    for row in state.select(["k", *PARTIALS]).to_pylist():
        k = row["k"]
        if k not in merged:
            merged[k] = [row[p] for p in PARTIALS]
            continue
        m = merged[k]
        for i, (name, fold) in enumerate(
            zip(PARTIALS, (_add, _add, _add, min, max, _add, _add), strict=True)
        ):
            m[i] = _fold(fold, m[i], row[name])
    return {k: tuple(m) for k, m in merged.items()}


def _add(a: Any, b: Any) -> Any:
    return a + b


def _fold(fold: Any, a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else fold(a, b)


def test_compacted_state_merges_partials_per_key_and_changes_no_answer(
    spark, tmp_path: Path, runs: list[KeyedTaskRun]
) -> None:
    local, op = _ops(True)
    run = _start(spark, runs, tmp_path, op, settings={"state.compaction.max-files": "2"})
    keys = ("a", "b", "c", None)
    sent: list[Any] = []
    for checkpoint, seeds in ((1, (41, 42, 43)), (2, (44, 45, 46))):
        batch = [records(seed, 12, keys) for seed in seeds]
        for n, rows in enumerate(batch):
            _send(spark, run, n % 2, rows, local)
        changed = {k for rows in batch for k, _, _ in rows}
        sent += [row for rows in batch for row in rows]
        snapshot = run.checkpoint(checkpoint)
        assert multiset(pending_tables(snapshot), OUT) == _values(sent, changed)
    snapshot = run.checkpoint(3)  # the settled files were compacted in the turn of barrier 2
    [state] = snapshot_rows(snapshot)
    assert state.num_rows <= 2 * len(keys)  # at most 2 files of one row per key (6 sent)
    assert _merged(state) == {
        k: (n, nv, s, lo, hi, s, nv) for k, n, nv, s, lo, hi, _ in answer(sent).values()
    }


def test_state_restored_by_key_group_at_another_parallelism_loses_and_repeats_nothing(
    spark, tmp_path: Path, runs: list[KeyedTaskRun]
) -> None:
    local, op = _ops(True)
    keys = keys_in_every_key_group(spark, MAX_PARALLELISM)  # two keys of every key group
    before = [[(k, i, i / 2) for i, k in enumerate(keys)], records(52, 30, (*keys[:5], None))]
    after = records(53, 30, (*keys[3:9], None))  # input after the checkpoint, replayed
    run = _start(spark, runs, tmp_path / "p1", op)
    for channel, rows in enumerate(before):
        _send(spark, run, channel, rows, local)
    snapshot = run.checkpoint(1)
    saved = pa.concat_tables(snapshot_rows(snapshot))
    groups = set(saved.column("__kg").to_pylist())
    assert groups == set(range(MAX_PARALLELISM)), "the keys must fill every key group"
    _send(spark, run, 0, after, local)  # then the subtask fails: lost with it
    run.stop()

    parallelism = 3  # key groups 0-2, 3-5, 6-7: the ranges' ends fall inside the old one
    restored = []
    for index in range(parallelism):
        new = _start(
            spark,
            runs,
            tmp_path / f"p3-{index}",
            op,
            restore=snapshot,
            parallelism=parallelism,
            subtask_index=index,
            attempt=f"restore{index}",
        )
        _send(spark, new, 1, after, local)
        restored.append(new.checkpoint(2))
    changed = {k for k, _, _ in after}
    emitted = multiset([t for s in restored for t in pending_tables(s)], OUT)
    assert emitted == _values(before[0] + before[1] + after, changed)

    # the state after the restore: the checkpoint's rows, each in the subtask owning its key
    # group, plus the replayed input's partials
    state: Counter[Any] = Counter()
    for index, s in enumerate(restored):
        tables = snapshot_rows(s)
        own = key_group_range(MAX_PARALLELISM, parallelism, index)
        for table in tables:
            assert set(table.column("__kg").to_pylist()) <= set(range(own.start, own.end + 1))
        state += multiset(tables, ("k", "__kg", *PARTIALS))
    replayed = exchange_tables(spark, after, local, MAX_PARALLELISM, 1)[0]
    assert state == multiset([saved, replayed], ("k", "__kg", *PARTIALS))
