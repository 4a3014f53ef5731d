"""Rows of the two inputs of a keyed interval join as the exchange carries them, and the
join's pairs by definition in plain Python (``test_interval_join_stream_task``,
``test_two_input_stream_task``).

First input: ``k, a_id, a_ms, v``; second: ``k, b_id, b_ms, v`` (``v`` clashes: the second's
comes out as ``v_right``); each row with its event time as ``__ws`` (microseconds) and its key
group ``__kg``. Flink's interval join ("Joining", Flink docs) pairs ``a`` and ``b`` when their
keys are equal and ``a.ts + lower <= b.ts <= a.ts + upper``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from millrace.api.join_operators import IntervalJoinOperator
from millrace.runtime.jobgraph import OperatorKind
from millrace.spark.interval_join_stream_task import IntervalJoinStreamTask
from tests.spark.keyed_task_harness import KeyedTaskRun

__all__ = [
    "LOWER_MS",
    "MAX_PARALLELISM",
    "OUTPUT",
    "T0",
    "UPPER_MS",
    "Side",
    "exchange",
    "pairs",
    "rows",
    "start_join",
]

T0 = 1_356_998_400_000  # 2013-01-01T00:00Z (ms)
MINUTE = 60_000
LOWER_MS = -10 * MINUTE
UPPER_MS = 20 * MINUTE
MAX_PARALLELISM = 8
OUTPUT = ("k", "a_id", "a_ms", "v", "b_id", "b_ms", "v_right")

Side = list[tuple[Any, str, int, Any]]  # (k, id, event time ms, v)


def rows(
    side: int, tag: str, n: int, keys: Sequence[str], start_ms: int, span_ms: int, seed: int
) -> Side:
    """``n`` rows of input ``side`` with ids ``{tag}{i}``, event times in
    ``[start_ms, start_ms + span_ms)``, a few null ``v``."""
    rng = random.Random(seed)
    prefix = "a" if side == 0 else "b"
    return [
        (
            rng.choice(list(keys)),
            f"{prefix}-{tag}{i}",
            start_ms + rng.randrange(span_ms),
            None if rng.random() < 0.2 else rng.randint(0, 9),
        )
        for i in range(n)
    ]


def exchange(side_rows: Side, side: int, groups: dict[str, int], parallelism: int) -> dict:
    """The exchange files of ``side_rows`` per target subtask (``pyarrow.Table``s, as the
    producers write them: ``__ws`` in microseconds, ``__kg``)."""
    import pyarrow as pa

    prefix = "a" if side == 0 else "b"
    out: dict[int, list[tuple[Any, ...]]] = {}
    for k, row_id, ms, v in side_rows:
        target = groups[k] * parallelism // MAX_PARALLELISM
        out.setdefault(target, []).append((k, row_id, ms, v, ms * 1000, groups[k]))
    schema = pa.schema(
        [
            ("k", pa.string()),
            (f"{prefix}_id", pa.string()),
            (f"{prefix}_ms", pa.int64()),
            ("v", pa.int64()),
            ("__ws", pa.int64()),
            ("__kg", pa.int32()),
        ]
    )
    names = schema.names
    return {
        target: pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in part], schema)
        for target, part in out.items()
    }


def pairs(left: Side, right: Side) -> Counter[tuple[Any, ...]]:
    """The joined rows by definition (``OUTPUT`` columns), as a multiset."""
    return Counter(
        (k, a_id, a_ms, v, b_id, b_ms, w)
        for k, a_id, a_ms, v in left
        for k2, b_id, b_ms, w in right
        if k == k2 and a_ms + LOWER_MS <= b_ms <= a_ms + UPPER_MS
    )


def start_join(spark: Any, work: Path, inputs: Sequence[int], **options: Any) -> KeyedTaskRun:
    """An interval join subtask keyed by ``k``, ``between(LOWER_MS, UPPER_MS)``."""
    op = IntervalJoinOperator(("k",), ("k",), LOWER_MS, UPPER_MS, "_right", "interval join")
    run = KeyedTaskRun(
        IntervalJoinStreamTask,
        [(OperatorKind.WINDOW, "interval join", op)],
        work,
        inputs=inputs,
        max_parallelism=MAX_PARALLELISM,
        **options,
    )
    return run.start(spark)
