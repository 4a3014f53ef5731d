"""WindowStreamTask on its input gate's watermark, in this process (``window_task_harness``):
exchange files of partials come in, the gate's watermark moves step by step, and the output
of each step is compared (as a multiset) with the windows of the records by definition.

Guarantees guarded:
- at each watermark the task fires exactly the windows whose end - 1 the watermark reached
  since the previous firing (Flink's ``maxTimestamp() <= watermark``): none early (a watermark
  at end - 2 fires nothing), none twice (the same watermark again fires nothing), every
  bundle's partials of a window merged; files whose windows all fired leave the state, the
  rest stay (with compaction too);
- at a barrier the task snapshots exactly its unfired rows (with ``__fresh`` for rows that
  came since the last firing) with its fired watermark, and lists the sink data staged since;
- restored from that snapshot at parallelism 1 or 2, the subtasks read their key groups'
  rows and fire what the failure-free run fires after the barrier: nothing lost, nothing
  duplicated, a pending late firing included;
- a key's records in two bundles within the session gap merge into one session (touching
  windows merge, as Flink's ``TimeWindow.intersects``), outside it stay two; the task keeps
  the open sessions as its state.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from millrace.api.operators import SinkOperator, WindowAggregateOperator
from millrace.api.windows import EventTimeSessionWindows, TumblingEventTimeWindows
from millrace.runtime.checkpoint.key_groups import KeyGroupRange, key_group_range
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io.partition_events import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    CheckpointBarrier,
    DataBundle,
)
from millrace.runtime.jobgraph import OperatorKind
from millrace.spark.aggregation import AggregatePlan
from millrace.spark.keyed_state_files import read_key_groups
from millrace.spark.window_stream_task import WindowStreamTask
from tests.spark.window_task_harness import (
    US,
    DirectorySink,
    ScriptedGate,
    deployment,
    fired_between,
    run_task,
    session_windows,
    tumbling_windows,
    window_result,
    written,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

HOUR = 3_600_000
MINUTE = 60_000
GAP = 10 * MINUTE
# A key's key group is a function of the key (the producer computes it); here at both ends of
# the two key-group ranges of parallelism 2 (0-63, 64-127).
KEY_GROUPS = {"AA": 0, "B6": 63, "DL": 64, "UA": 127}
INVOKABLE = "millrace.spark.window_stream_task:WindowStreamTask"


def operator(window: Any, lateness_ms: int = 0) -> WindowAggregateOperator:
    from pyspark.sql import functions as F

    plan = AggregatePlan.of(
        (
            F.count("*").alias("flights"),
            F.sum("seats").alias("seats"),
            F.max("delay").alias("worst"),
        )
    )
    return WindowAggregateOperator(("carrier",), window, plan, "window", lateness_ms)


def bundle(work: Path, name: str, records: list[tuple], window: Any) -> DataBundle:
    """One producer bundle as the exchange carries it: partials per key, window and key group
    of ``records`` ``(carrier, t_ms, seats, delay)`` (sessions merged within the bundle), and
    the range of its window ends. Computed here in plain Python."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    merging = window.is_merging
    if merging:
        groups = session_windows(records, window.gap_ms)
    else:
        groups = tumbling_windows(records, window.size_ms)
    rows = [window_result(c, s, e, rs) for (c, s, e), rs in groups.items()]
    columns: dict[str, Any] = {
        "carrier": pa.array([r[0] for r in rows], pa.string()),
        "__ws": pa.array([r[1] for r in rows], pa.int64()),
    }
    if merging:
        columns["__we"] = pa.array([r[2] for r in rows], pa.int64())
    columns |= {
        "__kg": pa.array([KEY_GROUPS[r[0]] for r in rows], pa.int32()),
        "__p0_c": pa.array([r[3] for r in rows], pa.int64()),
        "__p1_s": pa.array([r[4] for r in rows], pa.int64()),
        "__p2_m": pa.array([r[5] for r in rows], pa.float64()),
    }
    path = work / "exchange" / f"{name}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), str(path))
    ends = [r[2] // US for r in rows]
    return DataBundle(str(path), len(rows), min(ends), max(ends))


def window_task(
    spark: Any,
    work: Path,
    op: WindowAggregateOperator,
    steps: list[tuple[list[Any], int]],
    *,
    attempt: str = "attempt-a",
    subtask: int = 0,
    parallelism: int = 1,
    restore: TaskStateSnapshot | None = None,
    max_files: int = 32,
) -> tuple[Any, ScriptedGate]:
    out = work / "out"
    gate = ScriptedGate(steps, out)
    tdd = deployment(
        INVOKABLE,
        [
            (OperatorKind.WINDOW, "window", op),
            (OperatorKind.SINK, "Sink: files", SinkOperator(DirectorySink(str(out)), "Sink")),
        ],
        attempt=attempt,
        subtask=subtask,
        parallelism=parallelism,
        restore=restore,
    )
    run = run_task(
        spark,
        work,
        tdd,
        WindowStreamTask,
        gate=gate,
        configuration={"state.compaction.max-files": max_files},
    )
    assert run.responder.declines == []
    return run, gate


def snapshot_rows(snapshot: TaskStateSnapshot) -> Counter:
    table = read_key_groups(snapshot, KeyGroupRange(0, 127))
    if table is None:
        return Counter()
    return Counter(zip(*[c.to_pylist() for c in table.columns], strict=True))


# Tumbling windows: which windows fire at each watermark ----------------------------------------

BUNDLES = [
    [
        ("AA", 10 * MINUTE, 3, 1.0),
        ("AA", 50 * MINUTE, None, 7.0),
        ("B6", HOUR - 1, 2, 2.0),  # the last ms of the first window
        ("DL", HOUR, 1, 0.5),  # the first ms of the second
        ("UA", 2 * HOUR + 30 * MINUTE, 5, 3.0),
    ],
    [("AA", 20 * MINUTE, 4, -1.0), ("DL", 2 * HOUR - 1, None, 9.0)],
    [("UA", 2 * HOUR + 10 * MINUTE, 1, 1.0), ("DL", HOUR + MINUTE, 2, 2.0)],
    [("UA", 2 * HOUR + 40 * MINUTE, None, 6.0)],
]


@pytest.mark.parametrize("max_files", [32, 2], ids=["no-compaction", "compaction"])
def test_each_watermark_fires_exactly_the_windows_it_completed(
    spark: Any, tmp_path: Path, max_files: int
) -> None:
    """Tumbling hours, no lateness (Arrow merges the partials); with ``max_files`` 2 the three
    pending files are compacted (a Spark job) when the second step leaves nothing due."""
    op = operator(TumblingEventTimeWindows(HOUR, 0))
    bundles = [bundle(tmp_path, f"b{i}", b, op.window) for i, b in enumerate(BUNDLES)]
    watermarks = [MIN_WATERMARK, HOUR - 2, HOUR - 1, HOUR - 1, 2 * HOUR - 1, 2 * HOUR - 1, 3 * HOUR]
    steps = [
        ([bundles[0]], watermarks[0]),
        ([bundles[1], bundles[3]], watermarks[1]),  # the first hour's end - 1 not reached
        ([], watermarks[2]),  # reached exactly: AA (two bundles merged), B6
        ([], watermarks[3]),  # the same again: nothing twice
        ([bundles[2]], watermarks[4]),  # DL's window of three records from three bundles
        ([CheckpointBarrier(1, 0)], watermarks[5]),
        ([], watermarks[6]),  # UA's window of two bundles
    ]
    run, gate = window_task(spark, tmp_path, op, steps, max_files=max_files)

    windows = tumbling_windows([r for b in BUNDLES for r in b], HOUR)
    outputs = gate.outputs_per_step()
    fired = MIN_WATERMARK
    for step, watermark in enumerate(watermarks):
        assert written(outputs[step]) == fired_between(windows, fired, watermark), step
        fired = max(fired, watermark)
    assert outputs[-1] == []  # the end of input: nothing left to fire
    assert sum(written(run.outputs()).values()) == len(windows) == 4

    # the barrier after DL's firing: the unfired rows (UA's two partials), the fired
    # watermark, and the sink data staged since the start
    [(checkpoint, snapshot)] = run.responder.acks
    assert checkpoint == 1 and snapshot.watermark_ms == 2 * HOUR - 1
    ua = [(1, 5, 3.0), (1, 1, 1.0), (1, None, 6.0)]  # one partial per bundle
    if max_files == 2:  # the first and fourth bundles' were compacted into one
        ua = [(2, 5, 6.0), (1, 1, 1.0)]
    expected_state = Counter(("UA", 2 * HOUR * US, 127, *p) for p in ua)
    assert snapshot_rows(snapshot) == expected_state
    assert [h.key_group_start for h in snapshot.keyed_state] == [0]
    assert [h.key_group_end for h in snapshot.keyed_state] == [127]
    staged = sorted(p for step in outputs[:5] for p in step)
    assert sorted(snapshot.sink_pending[1]) == staged
    # every window fired: no exchange or state file is left
    assert [b.path for b in bundles if os.path.exists(b.path)] == []
    state_dir = tmp_path / "task" / "state"
    assert [p for p in state_dir.rglob("*.parquet")] == []


# Snapshot and restore --------------------------------------------------------------------------

LATE = 30 * MINUTE  # allowed lateness


def late_script(tmp_path: Path, op: WindowAggregateOperator) -> tuple[list, list]:
    """Bundle 0 (the first hour fires at its end - 1), then bundle 1 with a late AA record
    within the lateness and a barrier before the firing it causes."""
    first = [
        ("AA", 10 * MINUTE, 3, 1.0),
        ("B6", 20 * MINUTE, 2, 2.0),
        ("DL", HOUR + 10 * MINUTE, 1, 0.5),
        ("UA", 2 * HOUR + 20 * MINUTE, 5, 3.0),
    ]
    second = [("AA", 30 * MINUTE, 4, 8.0), ("DL", HOUR + 30 * MINUTE, None, 1.0)]
    b0, b1 = bundle(tmp_path, "b0", first, op.window), bundle(tmp_path, "b1", second, op.window)
    before = [([b0], HOUR - 1), ([b1, CheckpointBarrier(1, 0)], HOUR - 1)]
    return before, [first, second]


def late_expected(first: list[tuple], second: list[tuple]) -> Counter:
    """The failure-free run's output by definition: every window once at its end - 1, and
    AA's first hour once more with the late record (Flink's late firing: the full result)."""
    windows = tumbling_windows(first + second, HOUR)
    expected = fired_between(windows, MIN_WATERMARK, MAX_WATERMARK)
    aa_first = [r for r in first if r[0] == "AA"]
    expected[window_result("AA", 0, HOUR, aa_first)] += 1
    return expected


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_restored_window_fires_what_the_failure_free_run_fires_after_its_barrier(
    spark: Any, tmp_path: Path, parallelism: int
) -> None:
    """Allowed lateness (the Spark plan fires). The first attempt fires the first hour, then
    takes a barrier with a late AA record pending; the restored subtasks (key groups split at
    parallelism 2) fire the late firing and the rest. Output committed by the checkpoint plus
    the restored output equals the failure-free run's, as a multiset."""
    op = operator(TumblingEventTimeWindows(HOUR, 0), LATE)
    before, (first, second) = late_script(tmp_path, op)
    run, _ = window_task(spark, tmp_path / "a", op, before)
    [(_, snapshot)] = run.responder.acks
    committed = written(list(snapshot.sink_pending[1]))
    windows = tumbling_windows(first, HOUR)
    assert committed == fired_between(windows, MIN_WATERMARK, HOUR - 1)  # AA and B6, once
    assert snapshot.watermark_ms == HOUR - 1
    # the snapshot: every row still within its lateness, the late bundle's marked fresh
    fresh = Counter((*r, True) for r in snapshot_rows(snapshot) if r[-1])
    assert {r[0] for r in fresh} == {"AA", "DL"} and sum(fresh.values()) == 2
    assert sum(snapshot_rows(snapshot).values()) == 6

    restored: Counter = Counter()
    after = [([], 2 * HOUR - 1), ([], MAX_WATERMARK)]
    for subtask in range(parallelism):
        own = key_group_range(128, parallelism, subtask)
        again, _ = window_task(
            spark,
            tmp_path / f"restored-{subtask}",
            op,
            after,
            attempt=f"attempt-r{subtask}",
            subtask=subtask,
            parallelism=parallelism,
            restore=TaskStateSnapshot(keyed_state=snapshot.keyed_state, watermark_ms=HOUR - 1),
        )
        out = written(again.outputs())
        assert {KEY_GROUPS[r[0]] for r in out} <= set(range(own.start, own.end + 1))
        restored += out
    assert committed + restored == late_expected(first, second)

    # the first attempt, run on instead of failing, fires the same after its barrier
    unfailed, _ = window_task(spark, tmp_path / "unfailed", op, [*before, *after])
    assert written(unfailed.outputs()) == late_expected(first, second)


# Session windows --------------------------------------------------------------------------------


def test_sessions_merge_across_bundles_within_the_gap_and_stay_apart_outside_it(
    spark: Any, tmp_path: Path
) -> None:
    """AA: a record at 0 in one bundle, one at GAP in the next (windows [0, GAP) and [GAP,
    2 GAP) touch): one session [0, 2 GAP). B6: records at 0 and GAP + 1: two sessions. The
    state kept at a barrier is the open sessions, AA's merged over the two bundles."""
    op = operator(EventTimeSessionWindows(GAP))
    first = [("AA", 0, 1, 1.0), ("B6", 0, 2, 2.0)]
    second = [("AA", GAP, 3, 3.0), ("B6", GAP + 1, 4, 4.0)]
    b0, b1 = bundle(tmp_path, "b0", first, op.window), bundle(tmp_path, "b1", second, op.window)
    steps = [
        ([b0], GAP - 2),  # nothing has ended
        ([b1], GAP - 1),  # B6's first session; AA's grew to 2 GAP
        ([CheckpointBarrier(1, 0)], GAP - 1),
        ([], 2 * GAP - 2),  # AA's merged session not yet
        ([], 2 * GAP - 1),  # AA's merged session
        ([], 2 * GAP),  # B6's second session ([GAP + 1, 2 GAP + 1))
    ]
    run, gate = window_task(spark, tmp_path, op, steps)
    sessions = session_windows(first + second, GAP)
    assert sorted(sessions) == [("AA", 0, 2 * GAP), ("B6", 0, GAP), ("B6", GAP + 1, 2 * GAP + 1)]
    outputs = gate.outputs_per_step()
    fired = MIN_WATERMARK
    for step, (_, watermark) in enumerate(steps):
        assert written(outputs[step]) == fired_between(sessions, fired, watermark), step
        fired = max(fired, watermark)
    assert written(run.outputs()) == fired_between(sessions, MIN_WATERMARK, MAX_WATERMARK)

    [(_, snapshot)] = run.responder.acks
    kept = defaultdict(list)
    for (carrier, start, end), records in sessions.items():
        if end - 1 > GAP - 1:
            kept[(carrier, start, end)] = records
    expected = Counter(
        (c, s * US, e * US, KEY_GROUPS[c], *window_result(c, s, e, rs)[3:])
        for (c, s, e), rs in kept.items()
    )
    assert snapshot_rows(snapshot) == expected
    assert snapshot.watermark_ms == GAP - 1
