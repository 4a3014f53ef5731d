"""TwoInputStreamTask, the common ground of the keyed joins, with the interval join as its
operator (``keyed_task_harness``: the task on its own thread, scripted producers, a real
``InputGate`` over the channels of both inputs):

- each channel's rows go to the input its descriptor names, whatever the channel's position;
- the task's event time is the minimum over the channels of both inputs: an input far ahead
  does not expire the state the other input's rows to come still need, and the checkpoint
  carries that minimum;
- key columns missing from an input, or of different types on the two inputs, fail the task
  with a message naming them; a restored state file that names no input fails the restore;
- ``joined_columns``: the first input's columns, then the second's, equal keys once, other
  clashes suffixed until the name is free, internal columns left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from millrace.errors import PipelineError
from millrace.runtime.checkpoint.task_state_snapshot import KeyedStateHandle, TaskStateSnapshot
from millrace.runtime.io.partition_events import Watermark
from millrace.spark.two_input_stream_task import joined_columns
from tests.spark.aggregate_oracle import multiset
from tests.spark.join_oracle import MAX_PARALLELISM, MINUTE, OUTPUT, T0, exchange, pairs, start_join
from tests.spark.keyed_task_harness import KeyedTaskRun, key_groups, pending_tables, snapshot_rows
from tests.waiting import result_within

HOUR = 60 * MINUTE


@pytest.fixture
def runs() -> Iterator[list[KeyedTaskRun]]:
    started: list[KeyedTaskRun] = []
    yield started
    for run in started:
        run.stop()


@pytest.mark.slow
@pytest.mark.spark
def test_the_watermark_is_the_minimum_over_both_inputs(
    spark, tmp_path: Path, runs: list[KeyedTaskRun]
) -> None:
    groups = key_groups(spark, ("a",), MAX_PARALLELISM)
    # channel 0 carries the second input, channel 1 the first
    run = start_join(spark, tmp_path, (1, 0))
    runs.append(run)
    left = [("a", "a-0", T0, 1)]
    run.bundle(1, exchange(left, 0, groups, 1)[0], window_size_ms=1)
    run.send(1, Watermark(T0 + 2 * HOUR))  # the first input is two hours ahead
    run.checkpoint(1, watermark_ms=T0 + MINUTE)  # the second input at T0 + 1 min
    assert run.clock[-1] == T0 + MINUTE

    # a-0 can match second-input rows up to T0 + 20 min: kept, though its own input is past
    right = [("a", "b-0", T0 + 15 * MINUTE, 2)]
    run.bundle(0, exchange(right, 1, groups, 1)[0], window_size_ms=1)
    snapshot = run.checkpoint(2, watermark_ms=T0 + MINUTE)
    assert snapshot.watermark_ms == T0 + MINUTE
    assert multiset(pending_tables(snapshot), OUTPUT) == pairs(left, right)
    assert sorted(t.num_rows for t in snapshot_rows(snapshot)) == [1, 1]

    run.checkpoint(3, watermark_ms=T0 + 2 * HOUR)  # now both inputs are past every row
    snapshot = run.checkpoint(4, watermark_ms=T0 + 2 * HOUR)
    assert snapshot.watermark_ms == T0 + 2 * HOUR
    assert snapshot.keyed_state == ()
    run.end()
    assert len(run.outputs()) == 1


def _table(columns: dict[str, pa.Array]) -> pa.Table:
    return pa.table({**columns, "__ws": pa.array([T0 * 1000], pa.int64()), "__kg": [0]})


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize(
    ("right", "message"),
    [
        (
            {"key": pa.array(["a"]), "b_id": pa.array(["b-0"])},
            r"key columns \['k'\] are not in input 1",
        ),
        (
            {"k": pa.array([1], pa.int64()), "b_id": pa.array(["b-0"])},
            "key 'k' of the first input is string but key 'k' of the second is int64",
        ),
    ],
    ids=["missing", "types"],
)
def test_key_columns_missing_or_of_other_types_fail_the_task(
    spark, tmp_path: Path, runs: list[KeyedTaskRun], right: dict, message: str
) -> None:
    run = start_join(spark, tmp_path, (0, 1))
    runs.append(run)
    run.bundle(0, _table({"k": pa.array(["a"]), "a_id": pa.array(["a-0"])}), 1)
    run.bundle(1, _table(right), 1)
    run.end_inputs()
    with pytest.raises(PipelineError, match=message):
        result_within(run.ended, 120, what="the task to fail")


@pytest.mark.slow
@pytest.mark.spark
def test_a_restored_state_file_that_names_no_input_fails_the_restore(
    spark, tmp_path: Path, runs: list[KeyedTaskRun]
) -> None:
    path = str(tmp_path / "state.parquet")
    pq.write_table(_table({"k": pa.array(["a"]), "a_id": pa.array(["a-0"])}), path)
    restore = TaskStateSnapshot(keyed_state=(KeyedStateHandle(path, 0, MAX_PARALLELISM - 1, 1),))
    run = start_join(spark, tmp_path / "run", (0, 1), restore=restore)
    runs.append(run)
    run.end_inputs()
    with pytest.raises(PipelineError, match="no input in its metadata"):
        result_within(run.ended, 120, what="the task to fail")


def test_joined_columns_keep_equal_keys_once_and_suffix_clashes_until_free() -> None:
    left = ["k", "x", "__ws", "__kg"]
    right = ["x", "k", "x_r", "y", "__ws", "__kg"]
    # keys paired by position: k with x, x with k, so no key of the second input is dropped
    assert joined_columns(left, right, ("k", "x"), ("x", "k"), "_r") == [
        ("l", "k", "k"),
        ("l", "x", "x"),
        ("r", "x", "x_r"),
        ("r", "k", "k_r"),
        ("r", "x_r", "x_r_r"),
        ("r", "y", "y"),
    ]
    # equal names at the same position: the second input's key is left out
    assert joined_columns(["k", "v"], ["k", "v", "__kg"], ("k",), ("k",), "_right") == [
        ("l", "k", "k"),
        ("l", "v", "v"),
        ("r", "v", "v_right"),
    ]
