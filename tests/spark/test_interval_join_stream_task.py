"""IntervalJoinStreamTask over several bundles and checkpoints, and restored from a snapshot,
run on its own thread in the test session's SparkSession with scripted producers
(``keyed_task_harness``; the bounds themselves are ``test_interval_join_bounds``'s):

- every pair is emitted exactly once, at the first checkpoint by which both its rows arrived,
  whichever input they came on, through compaction of the joined rows' files; a checkpoint
  after no input emits nothing;
- both inputs' rows are kept as state while a row to come can match them;
- a snapshot restored at another parallelism gives each subtask exactly its key groups' rows of
  both inputs (none lost, none twice) and the watermark it had fired: a restored row joins the
  rows to come, and no pair of two restored rows is emitted again;
- a chain that does not start with an interval join fails the task.

Answers are the join's pairs by definition in plain Python (``join_oracle``), compared as
multisets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from millrace.errors import PipelineError
from millrace.runtime.checkpoint.key_groups import key_group_range
from millrace.runtime.jobgraph import OperatorKind
from millrace.spark.interval_join_stream_task import IntervalJoinStreamTask
from millrace.spark.two_input_stream_task import INPUT_METADATA
from tests.spark.aggregate_oracle import multiset
from tests.spark.join_oracle import (
    MAX_PARALLELISM,
    MINUTE,
    OUTPUT,
    T0,
    exchange,
    pairs,
    rows,
    start_join,
)
from tests.spark.keyed_task_harness import (
    KeyedTaskRun,
    key_groups,
    keys_in_every_key_group,
    pending_tables,
    snapshot_rows,
)
from tests.waiting import result_within

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture
def runs() -> Iterator[list[KeyedTaskRun]]:
    started: list[KeyedTaskRun] = []
    yield started
    for run in started:
        run.stop()


def _send(run: KeyedTaskRun, channel: int, side_rows: list[Any], groups: dict[str, int]) -> None:
    side = run.inputs[channel]
    part = exchange(side_rows, side, groups, run.parallelism).get(run.subtask_index)
    if part is not None:
        run.bundle(channel, part, window_size_ms=1)


def test_each_pair_is_emitted_once_at_the_first_checkpoint_with_both_rows(
    spark, tmp_path: Path, runs: list[KeyedTaskRun]
) -> None:
    keys = ("a", "b", "c")
    groups = key_groups(spark, keys, MAX_PARALLELISM)
    # input 0 on channel 0, input 1 on channels 1 and 2; an input's joined rows are compacted
    # when it holds more than two files (the first input's at barrier 3)
    run = start_join(spark, tmp_path, (0, 1, 1), settings={"state.compaction.max-files": "2"})
    runs.append(run)
    span = 60 * MINUTE
    left1, right1 = rows(0, "1-", 8, keys, T0, span, 1), rows(1, "1-", 8, keys, T0, span, 2)
    _send(run, 0, left1, groups)
    _send(run, 1, right1, groups)
    snapshot = run.checkpoint(1)
    assert multiset(pending_tables(snapshot), OUTPUT) == pairs(left1, right1)

    right2, left2 = rows(1, "2-", 8, keys, T0, span, 3), rows(0, "2-", 6, keys, T0, span, 4)
    _send(run, 2, right2, groups)
    _send(run, 0, left2, groups)
    snapshot = run.checkpoint(2)
    left, right = left1 + left2, right1 + right2
    assert multiset(pending_tables(snapshot), OUTPUT) == pairs(left, right) - pairs(left1, right1)

    left3 = rows(0, "3-", 6, keys, T0, span, 5)  # only the first input: joins kept rows
    _send(run, 0, left3, groups)
    snapshot = run.checkpoint(3)
    assert multiset(pending_tables(snapshot), OUTPUT) == pairs(left3, right)
    left += left3

    snapshot = run.checkpoint(4)  # no input: no pair
    assert snapshot.sink_pending == {}
    # both inputs' rows are all still state (the watermark is far below them)
    state = {int(t.schema.metadata[INPUT_METADATA]): t for t in snapshot_rows(snapshot)}
    assert sorted(state) == [0, 1]
    assert Counter(state[0].column("a_id").to_pylist()) == Counter(r[1] for r in left)
    assert Counter(state[1].column("b_id").to_pylist()) == Counter(r[1] for r in right)

    right3 = rows(1, "3-", 6, keys, T0, span, 6)
    _send(run, 1, right3, groups)
    run.end()
    outputs = run.outputs()
    assert multiset(outputs[-1:], OUTPUT) == pairs(left, right3)
    assert multiset(outputs, OUTPUT) == pairs(left, right + right3)  # each pair once in all


def test_both_inputs_rows_are_kept_while_a_row_to_come_can_match_them(
    spark, tmp_path: Path, runs: list[KeyedTaskRun]
) -> None:
    """``between(-10 min, +20 min)``: a first-input row at ``t`` matches second-input rows up
    to ``t + 20 min``; a second-input row at ``t`` matches first-input rows up to
    ``t + 10 min``. With the watermark short of both, rows arriving later join the old ones."""
    groups = key_groups(spark, ("a", "b"), MAX_PARALLELISM)
    run = start_join(spark, tmp_path, (0, 1))
    runs.append(run)
    old_left = [("a", "a-old", T0, 1), ("b", "a-old-b", T0, None)]
    old_right = [("a", "b-old", T0 + 2 * MINUTE, 2)]
    _send(run, 0, old_left, groups)
    _send(run, 1, old_right, groups)
    snapshot = run.checkpoint(1, watermark_ms=T0 + 9 * MINUTE)
    assert multiset(pending_tables(snapshot), OUTPUT) == pairs(old_left, old_right)
    # watermark T0 + 9 min: a-old can match until T0 + 20 min, b-old until T0 + 12 min
    new_right = [("a", "b-new", T0 + 15 * MINUTE, 3), ("b", "b-new-b", T0 + 19 * MINUTE, 4)]
    new_left = [("a", "a-new", T0 + 11 * MINUTE, 5)]
    _send(run, 1, new_right, groups)
    _send(run, 0, new_left, groups)
    snapshot = run.checkpoint(2, watermark_ms=T0 + 9 * MINUTE)
    expected = pairs(old_left + new_left, old_right + new_right) - pairs(old_left, old_right)
    assert len(expected) == 4  # a-old/b-new, a-old-b/b-new-b, a-new/b-old, a-new/b-new
    assert multiset(pending_tables(snapshot), OUTPUT) == expected
    run.end()


def test_a_snapshot_restored_at_another_parallelism_joins_on_without_repeating_pairs(
    spark, tmp_path: Path, runs: list[KeyedTaskRun]
) -> None:
    keys = keys_in_every_key_group(spark, MAX_PARALLELISM)
    groups = key_groups(spark, keys, MAX_PARALLELISM)
    span = 90 * MINUTE
    left, right = rows(0, "", 30, keys, T0, span, 7), rows(1, "", 30, keys, T0, span, 8)
    fired = T0 - 60 * MINUTE  # below every row: all are state
    run = start_join(spark, tmp_path / "p1", (0, 1))
    runs.append(run)
    _send(run, 0, left, groups)
    _send(run, 1, right, groups)
    first = run.checkpoint(1, watermark_ms=fired)
    assert multiset(pending_tables(first), OUTPUT) == pairs(left, right)
    snapshot = run.checkpoint(2, watermark_ms=fired)  # fired is now the gate's watermark
    assert snapshot.watermark_ms == fired
    saved = {int(t.schema.metadata[INPUT_METADATA]): t for t in snapshot_rows(snapshot)}
    replayed = rows(0, "after-", 12, keys, T0, span, 9)  # after the checkpoint: lost, replayed
    _send(run, 0, replayed, groups)
    run.stop()

    parallelism = 3  # key groups 0-2, 3-5, 6-7
    new_right = rows(1, "new-", 12, keys, T0, span, 10)
    emitted: Counter[Any] = Counter()
    state: dict[int, Counter[Any]] = {0: Counter(), 1: Counter()}
    for index in range(parallelism):
        new = start_join(
            spark,
            tmp_path / f"p3-{index}",
            (0, 1),
            restore=snapshot,
            parallelism=parallelism,
            subtask_index=index,
            attempt=f"restore{index}",
        )
        runs.append(new)
        # first the second input alone: its new rows join the restored rows of the first
        # (whose schema comes from the restored state), then the replayed first-input rows
        _send(new, 1, new_right, groups)
        after = new.checkpoint(1)  # its gate's watermark (1 ms) is below the restored one
        assert after.watermark_ms == fired
        emitted += multiset(pending_tables(after), OUTPUT)
        _send(new, 0, replayed, groups)
        after = new.checkpoint(2)
        emitted += multiset(pending_tables(after), OUTPUT)
        own = key_group_range(MAX_PARALLELISM, parallelism, index)
        for table in snapshot_rows(after):
            side = int(table.schema.metadata[INPUT_METADATA])
            assert set(table.column("__kg").to_pylist()) <= set(range(own.start, own.end + 1))
            state[side] += multiset([table])
    everything = pairs(left + replayed, right + new_right)
    assert emitted == everything - pairs(left, right)
    # the state: the snapshot's rows of both inputs, each once, and the input since
    replayed_rows = list(exchange(replayed, 0, groups, 1).values())
    new_rows = list(exchange(new_right, 1, groups, 1).values())
    assert state[0] == multiset([_plain(saved[0]), *replayed_rows])
    assert state[1] == multiset([_plain(saved[1]), *new_rows])


def test_a_chain_that_does_not_start_with_an_interval_join_fails(
    spark, tmp_path: Path, runs: list[KeyedTaskRun]
) -> None:
    from millrace.api.join_operators import WindowJoinOperator
    from millrace.api.windows import TumblingEventTimeWindows

    op = WindowJoinOperator(("k",), ("k",), TumblingEventTimeWindows(60_000), "_r", "join")
    run = KeyedTaskRun(
        IntervalJoinStreamTask, [(OperatorKind.WINDOW, "join", op)], tmp_path, inputs=(0, 1)
    )
    runs.append(run.start(spark))
    run.end_inputs()
    with pytest.raises(PipelineError, match="must start with an IntervalJoinOperator"):
        result_within(run.ended, 120, what="the task to fail")


def _plain(table: pa.Table) -> pa.Table:
    return table.replace_schema_metadata(None)
