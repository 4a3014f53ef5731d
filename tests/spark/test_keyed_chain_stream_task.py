"""WindowChainStreamTask (``keyed_chain_stream_task``): a window chained into its source fires
as the unchained pair of tasks would, in this process (``window_task_harness``).

Guarantee guarded: each bundle's partials become the chained window's state (no exchange),
and after each watermark the source emits the chained window fires exactly what a
``WindowStreamTask`` fed by the unchained source's exchange files and watermarks fires, firing
by firing, and in all every window of the records once (plain-Python answer by definition).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from millrace.api.connector.source import Boundedness, SourceBundle, SourceReaderContext
from millrace.api.operators import (
    LocalWindowAggregateOperator,
    SinkOperator,
    SourceOperator,
    WindowAggregateOperator,
)
from millrace.api.windows import TumblingEventTimeWindows
from millrace.runtime.io.input_split import InputSplit, NextInputSplit, SplitState
from millrace.runtime.io.partition_events import (
    MIN_WATERMARK,
    CheckpointBarrier,
    DataBundle,
    Watermark,
)
from millrace.runtime.jobgraph import OperatorKind
from millrace.spark.aggregation import AggregatePlan
from millrace.spark.keyed_chain_stream_task import WindowChainStreamTask
from millrace.spark.source_stream_task import SourceStreamTask
from millrace.spark.window_stream_task import WindowStreamTask
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
