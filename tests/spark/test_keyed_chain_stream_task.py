"""The keyed chain stream tasks (``keyed_chain_stream_task``): a keyed stage of parallelism 1
chained into its source, run in this process (``window_task_harness``).

Guarantees guarded:

- ``WindowChainStreamTask``: each bundle's partials become the chained window's state (no
  exchange), and after each watermark the source emits the chained window fires exactly what a
  ``WindowStreamTask`` fed by the unchained source's exchange files and watermarks fires,
  firing by firing, and in all every window of the records once (plain-Python answer by
  definition).
- ``RunningAggregateChainStreamTask`` (Flink SQL's streaming GROUP BY as upserts): with
  checkpointing, each checkpoint's acknowledgement lists as pre-committed sink data exactly the
  keys the bundles before it changed since the previous checkpoint, each with its aggregates
  (count, count of values, sum, min, max, avg; null keys and null values) over all records so
  far; untouched keys are not emitted again, a checkpoint after no input emits nothing, and the
  keys changed after the last checkpoint are emitted at the end of input. With checkpointing
  off every bundle emits its changed keys. A bounded aggregate emits once, at the end of input,
  one final row per key (restored state included). A checkpoint's chained keyed state, restored
  into the chain, holds the same rows in the same key groups and continues with the same
  emissions. Answers by definition in plain Python (``aggregate_oracle``), as multisets.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from millrace.api.connector.source import Boundedness, SourceBundle, SourceReaderContext
from millrace.api.operators import (
    KeyedAggregateOperator,
    LocalKeyedAggregateOperator,
    LocalWindowAggregateOperator,
    SinkOperator,
    SourceOperator,
    WindowAggregateOperator,
)
from millrace.api.windows import TumblingEventTimeWindows
from millrace.runtime.checkpoint.task_state_snapshot import TaskStateSnapshot
from millrace.runtime.io.input_split import InputSplit, NextInputSplit, SplitState
from millrace.runtime.io.partition_events import (
    MIN_WATERMARK,
    CheckpointBarrier,
    DataBundle,
    Watermark,
)
from millrace.runtime.jobgraph import OperatorKind
from millrace.spark.aggregation import AggregatePlan
from millrace.spark.keyed_chain_stream_task import (
    RunningAggregateChainStreamTask,
    WindowChainStreamTask,
)
from millrace.spark.source_stream_task import SourceStreamTask
from millrace.spark.window_stream_task import WindowStreamTask
from tests.spark.aggregate_oracle import SCHEMA, answer, decomposable_columns, multiset, records
from tests.spark.keyed_task_harness import pending_tables, read_tables
from tests.spark.window_task_harness import (
    DirectorySink,
    ScriptedGate,
    deployment,
    fired_between,
    run_task,
    tumbling_windows,
    written,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

HOUR = 3_600_000
MINUTE = 60_000
SPLIT = InputSplit(0, "scripted/0")
# Records (carrier, t_ms, seats, delay) per bundle of the one split; the watermark after a
# bundle is its largest event time - 1 (no out-of-orderness).
BUNDLES = [
    [("AA", 10 * MINUTE, 3, 1.0), ("B6", 20 * MINUTE, 2, 2.0), ("DL", HOUR - 1, 1, 0.5)],
    [("AA", 40 * MINUTE, None, 7.0), ("DL", HOUR + 5 * MINUTE, 4, 3.0)],
    [("UA", 2 * HOUR + MINUTE, 5, 1.5), ("DL", 2 * HOUR, 1, 9.0), ("AA", HOUR, 2, 0.0)],
]


class ScriptedReader:
    """Reads the bundles of ``BUNDLES`` from the one split, one per poll; wants a split
    (and is finished) before it has one and once it read it to its end."""

    def __init__(self, context: SourceReaderContext) -> None:
        self._spark = context.spark
        self._split: InputSplit | None = None
        self._position = 0

    def add_split(self, split: InputSplit, position: int) -> None:
        self._split, self._position = split, position

    def wants_splits(self) -> bool:
        return self.is_finished()

    def poll(self, timeout: float) -> SourceBundle | None:
        from pyspark.sql import functions as F

        if self._split is None or self._position >= len(BUNDLES):
            return None
        rows = BUNDLES[self._position]
        self._position += 1
        frame = self._spark.createDataFrame(
            rows, "carrier string, ms long, seats long, delay double"
        ).select(
            "carrier",
            F.timestamp_millis("ms").alias("t"),
            "seats",
            "delay",
            F.lit(self._split.split_id).alias("__split"),
        )
        done = self._position == len(BUNDLES)
        return SourceBundle(
            frame,
            [SplitState(self._split, self._position, finished=done)],
            split_column="__split",
            internal_columns=("__split",),
        )

    def snapshot(self) -> list[SplitState]:
        return [] if self._split is None else [SplitState(self._split, self._position)]

    def is_finished(self) -> bool:
        return self._split is None or self._position >= len(BUNDLES)

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class ScriptedSource:
    boundedness: Boundedness = Boundedness.BOUNDED

    def create_reader(self, context: SourceReaderContext) -> ScriptedReader:
        return ScriptedReader(context)


def operators() -> tuple[Any, Any, Any]:
    from pyspark.sql import functions as F

    window = TumblingEventTimeWindows(HOUR, 0)
    plan = AggregatePlan.of(
        (
            F.count("*").alias("flights"),
            F.sum("seats").alias("seats"),
            F.max("delay").alias("worst"),
        )
    )
    source = SourceOperator(ScriptedSource(), "t", 0, "scripted")
    local = LocalWindowAggregateOperator(("carrier",), window, "t", plan)
    keyed = WindowAggregateOperator(("carrier",), window, plan, "window")
    return source, local, keyed


def firings(paths: list[str]) -> list[Counter]:
    """The non-empty firings in the order the task wrote them (its sequence numbers)."""
    outputs = [written([p]) for p in sorted(paths)]
    return [o for o in outputs if o]


def test_a_chained_window_fires_as_the_unchained_source_and_window_tasks(
    spark: Any, tmp_path: Path
) -> None:
    source, local, keyed = operators()
    split = [NextInputSplit(SPLIT, MIN_WATERMARK, position=0)]

    chain_out = tmp_path / "chain" / "out"
    chain = run_task(
        spark,
        tmp_path / "chain",
        deployment(
            "millrace.spark.keyed_chain_stream_task:WindowChainStreamTask",
            [
                (OperatorKind.SOURCE, "scripted", source),
                (OperatorKind.WINDOW, "local", local),
                (OperatorKind.WINDOW, "window", keyed),
                (OperatorKind.SINK, "Sink", SinkOperator(DirectorySink(str(chain_out)), "Sink")),
            ],
            attempt="attempt-chain",
            is_source=True,
        ),
        WindowChainStreamTask,
        splits=list(split),
    )

    # unchained: the source task writes exchange files and emits watermarks ...
    producer = run_task(
        spark,
        tmp_path / "source",
        deployment(
            "millrace.spark.source_stream_task:SourceStreamTask",
            [(OperatorKind.SOURCE, "scripted", source), (OperatorKind.WINDOW, "local", local)],
            attempt="attempt-source",
            is_source=True,
            output=True,
        ),
        SourceStreamTask,
        splits=list(split),
    )
    steps: list[tuple[list[Any], int]] = []
    watermark = MIN_WATERMARK
    for event in producer.events:
        if isinstance(event, Watermark):
            watermark = event.timestamp_ms
            steps.append(([], watermark))
        elif isinstance(event, DataBundle | CheckpointBarrier):
            steps.append(([event], watermark))
    assert sum(isinstance(e, DataBundle) for e in producer.events) == len(BUNDLES)
    # ... and a window task fires on them
    window_out = tmp_path / "window" / "out"
    gate = ScriptedGate(steps, window_out)
    run_task(
        spark,
        tmp_path / "window",
        deployment(
            "millrace.spark.window_stream_task:WindowStreamTask",
            [
                (OperatorKind.WINDOW, "window", keyed),
                (OperatorKind.SINK, "Sink", SinkOperator(DirectorySink(str(window_out)), "Sink")),
            ],
            attempt="attempt-window",
        ),
        WindowStreamTask,
        gate=gate,
    )

    windows = tumbling_windows([r for b in BUNDLES for r in b], HOUR)
    everything = fired_between(windows, MIN_WATERMARK, 2**63 - 1)
    chained, unchained = firings(chain.outputs()), firings(gate_files(window_out))
    assert sum(chained, Counter()) == everything
    assert chained == unchained


def gate_files(out: Path) -> list[str]:
    return sorted(str(p) for p in out.glob("*.parquet"))


# RunningAggregateChainStreamTask ---------------------------------------------------------------

RUNNING = "millrace.spark.keyed_chain_stream_task:RunningAggregateChainStreamTask"
OUT = ("k", "n", "nv", "s", "lo", "hi", "mean")
CHECKPOINTING = {"execution.checkpointing.interval": "1 h"}  # only the test's triggers
# Called on the task thread with a bundle's index as the reader hands it out (by hook name):
# what it triggers is taken at the bundle boundary right after that bundle.
_BEFORE_BUNDLE: dict[str, Any] = {}


class RecordsReader:
    """Reads ``(k, v, w)`` records, one bundle of ``bundles`` per poll, from the one split
    (from its restored position); calls the source's hook before handing a bundle out."""

    def __init__(self, context: SourceReaderContext, source: RecordsSource) -> None:
        self._spark = context.spark
        self._source = source
        self._split: InputSplit | None = None
        self._position = 0

    def add_split(self, split: InputSplit, position: int) -> None:
        self._split, self._position = split, position

    def wants_splits(self) -> bool:
        return self.is_finished()

    def poll(self, timeout: float) -> SourceBundle | None:
        bundles = self._source.bundles
        if self._split is None or self._position >= len(bundles):
            return None
        index = self._position
        self._position += 1
        if self._source.hook is not None:
            _BEFORE_BUNDLE[self._source.hook](index)
        frame = self._spark.createDataFrame(list(bundles[index]), SCHEMA)
        done = self._position == len(bundles)
        return SourceBundle(frame, [SplitState(self._split, self._position, finished=done)])

    def snapshot(self) -> list[SplitState]:
        return [] if self._split is None else [SplitState(self._split, self._position)]

    def is_finished(self) -> bool:
        return self._split is None or self._position >= len(self._source.bundles)

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class RecordsSource:
    bundles: tuple[tuple[tuple[Any, ...], ...], ...]
    hook: str | None = None
    boundedness: Boundedness = Boundedness.BOUNDED

    def create_reader(self, context: SourceReaderContext) -> RecordsReader:
        return RecordsReader(context, self)


def run_running_aggregate(
    spark: Any,
    work: Path,
    bundles: list[list[tuple[Any, ...]]],
    *,
    bounded: bool = False,
    checkpoints: dict[int, list[int]] | None = None,
    restore: TaskStateSnapshot | None = None,
) -> Any:
    """Run ``source -> local keyed aggregate -> running aggregate -> sink`` chained in one
    ``RunningAggregateChainStreamTask`` to the end of ``bundles``; ``checkpoints``: bundle
    index -> the checkpoints triggered as it is read (checkpointing on when given)."""
    plan = AggregatePlan.of(decomposable_columns())
    hook = None
    env: list[Any] = []
    if checkpoints is not None:
        hook = f"{work.name}-{len(_BEFORE_BUNDLE)}"
        _BEFORE_BUNDLE[hook] = lambda index: [
            env[0].trigger_checkpoint(c, c) for c in checkpoints.get(index, [])
        ]
    source = SourceOperator(RecordsSource(tuple(map(tuple, bundles)), hook), None, 0, "records")
    position = restore.split_states[0].position if restore is not None else 0
    out = work / "out"
    try:
        return run_task(
            spark,
            work,
            deployment(
                RUNNING,
                [
                    (OperatorKind.SOURCE, "records", source),
                    (OperatorKind.PARTITION, "local", LocalKeyedAggregateOperator(("k",), plan)),
                    (
                        OperatorKind.AGGREGATE,
                        "running",
                        KeyedAggregateOperator(("k",), plan, "running", bounded),
                    ),
                    (OperatorKind.SINK, "Sink", SinkOperator(DirectorySink(str(out)), "Sink")),
                ],
                attempt=f"attempt-{work.name}",
                is_source=True,
                restore=restore,
            ),
            RunningAggregateChainStreamTask,
            splits=[NextInputSplit(SPLIT, MIN_WATERMARK, position=position)],
            configuration=CHECKPOINTING if checkpoints is not None else None,
            on_split_request=lambda run: env.append(run.env),
        )
    finally:
        _BEFORE_BUNDLE.pop(hook, None)


def upserts(tables: list[Any]) -> Counter:
    """The emitted rows as a multiset, the average rounded (floating point)."""
    return Counter(_rounded(row) for row in multiset(tables, OUT).elements())


def expected(rows: list[tuple[Any, ...]], keys: set[Any]) -> Counter:
    """The upserts of ``keys`` after ``rows``: each key's aggregates over all of them."""
    everything = answer(rows)
    return Counter(_rounded(everything[k]) for k in keys)


def _rounded(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return (*row[:-1], None if row[-1] is None else round(row[-1], 9))


def acknowledged(run: Any) -> dict[int, TaskStateSnapshot]:
    assert run.responder.declines == []
    acks = dict(run.responder.acks)
    assert len(acks) == len(run.responder.acks), "a checkpoint acknowledged twice"
    return acks


def chained_state(snapshot: TaskStateSnapshot) -> Counter:
    """The keyed state rows of a snapshot's chained part (key, key group, partials)."""
    import pyarrow.parquet as pq

    assert snapshot.chained is not None
    tables = [pq.read_table(h.path) for h in snapshot.chained.keyed_state]
    assert len({t.schema for t in tables}) == 1
    return multiset(tables)


# bundles of (k, v, w); keys include null and "nulls" (only null v)
RUNNING_BUNDLES = [
    records(11, 30, ("a", "b", "c")),
    records(12, 20, ("b", "d", "nulls")),
    records(13, 15, ("a", None)),
    records(14, 10, ("d", "e")),
]


def _keys(*bundles: list[tuple[Any, ...]]) -> set[Any]:
    return {r[0] for b in bundles for r in b}


def test_a_chained_running_aggregate_emits_the_changed_keys_at_each_checkpoint(
    spark: Any, tmp_path: Path
) -> None:
    b = RUNNING_BUNDLES
    # checkpoint 1 after bundle 1; 2 and 3 after bundle 2 (3: no input since 2)
    schedule = {1: [1], 2: [2, 3]}
    run = run_running_aggregate(spark, tmp_path / "run", b, checkpoints=schedule)
    acks = acknowledged(run)
    assert sorted(acks) == [1, 2, 3]
    pending = {c: pending_tables(s) for c, s in acks.items()}
    assert upserts(pending[1]) == expected(b[0] + b[1], _keys(b[0], b[1]))
    assert upserts(pending[2]) == expected(b[0] + b[1] + b[2], _keys(b[2]))  # a, None only
    assert pending[3] == []  # no input since checkpoint 2: nothing emitted
    # the keys changed after the last checkpoint: emitted once at the end of input
    staged = {h for s in acks.values() for hs in s.sink_pending.values() for h in hs}
    after = [p for p in run.outputs() if p not in staged]
    assert len(run.outputs()) == 3 and len(after) == 1
    assert upserts(read_tables(after)) == expected([r for x in b for r in x], _keys(b[3]))

    # checkpoint 1 restored into the chain: its keyed state by key group, and the same
    # continuation (the split read again from its position after bundle 1)
    again = run_running_aggregate(
        spark, tmp_path / "restored", b, checkpoints=schedule, restore=acks[1]
    )
    restored = acknowledged(again)
    assert sorted(restored) == [2, 3]
    assert chained_state(restored[2]) == chained_state(acks[2])
    assert upserts(pending_tables(restored[2])) == upserts(pending[2])
    assert pending_tables(restored[3]) == []
    staged = {h for s in restored.values() for hs in s.sink_pending.values() for h in hs}
    assert upserts(read_tables([p for p in again.outputs() if p not in staged])) == upserts(
        read_tables(after)
    )


def test_a_chained_running_aggregate_without_checkpointing_emits_after_each_bundle(
    spark: Any, tmp_path: Path
) -> None:
    b = RUNNING_BUNDLES[:3]
    run = run_running_aggregate(spark, tmp_path, b)
    outputs = run.outputs()
    assert len(outputs) == len(b)  # the end of input has nothing left to emit
    for i, path in enumerate(outputs):
        so_far = [r for x in b[: i + 1] for r in x]
        assert upserts(read_tables([path])) == expected(so_far, _keys(b[i])), f"bundle {i}"


def test_a_bounded_chained_running_aggregate_emits_every_key_once_at_the_end(
    spark: Any, tmp_path: Path
) -> None:
    b = RUNNING_BUNDLES[:3]
    run = run_running_aggregate(spark, tmp_path / "run", b, bounded=True, checkpoints={0: [1]})
    acks = acknowledged(run)
    assert sorted(acks) == [1] and acks[1].sink_pending == {}  # bounded: only at the end
    everything = [r for x in b for r in x]
    assert upserts(read_tables(run.outputs())) == expected(everything, _keys(*b))
    assert len(run.outputs()) == 1

    # restored from checkpoint 1 (bundle 0 in its settled state): every key at the end still
    again = run_running_aggregate(
        spark, tmp_path / "restored", b, bounded=True, checkpoints={}, restore=acks[1]
    )
    assert len(again.outputs()) == 1
    assert upserts(read_tables(again.outputs())) == expected(everything, _keys(*b))
