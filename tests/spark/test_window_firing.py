"""The Spark plans of a window task's state (``window_firing``) against plain-Python answers
by the definitions, on small state frames in the test session's SparkSession.

Guarantees guarded:
- a firing at watermark ``W`` after a firing at ``F`` emits exactly the windows whose
  ``end - 1`` lies in ``(F, W]`` (Flink's ``TimeWindow.maxTimestamp() <= watermark``: a window
  ``[start, end)`` fires when the watermark reaches ``end - 1``), each once, its partials of
  every bundle merged into one row; none early, none twice;
- with allowed lateness a fired window stays in state until ``end - 1 + lateness`` is reached,
  and fires again (its full result) only when fresh rows joined it (Flink's late firing);
- a key's session windows from several bundles merge when they overlap or touch (Flink's
  ``TimeWindow.intersects``), and stay apart when one starts after the other ends; the merged
  session fires when the watermark reaches its end - 1, and the sessions still open are kept
  with their merged bounds and partials;
- compaction keeps the rows' meaning (one row per key, window and key group; the partials'
  types unchanged) and ``fired_once`` fires every window once.

Outputs are compared as multisets (``collections.Counter`` of tuples).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from decimal import Decimal
from typing import Any

import pytest

from millrace.api.operators import PandasWindowFunction, WindowAggregateOperator
from millrace.api.windows import EventTimeSessionWindows, TumblingEventTimeWindows
from millrace.runtime.io.partition_events import MAX_WATERMARK, MIN_WATERMARK
from millrace.spark.aggregation import AggregatePlan
from millrace.spark.window_firing import (
    FRESH,
    compacted_state,
    fired_once,
    fired_windows,
    live_rows,
    retained_state,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

HOUR = 3_600_000  # ms
GAP = 600_000  # a session gap: 10 minutes
US = 1000  # microseconds per millisecond: __ws and __we are epoch microseconds
# A key's key group is a function of the key; these sit at both ends of two subtasks' ranges.
KEY_GROUPS = {"AA": 0, "B6": 63, "DL": 64, "UA": 127}

PARTIALS = "carrier string, __ws long, __kg int, __p0_c long, __p1_s long, __p2_m double"
SESSION_PARTIALS = (
    "carrier string, __ws long, __we long, __kg int, __p0_c long, __p1_s long, __p2_m double"
)


def plan() -> AggregatePlan:
    from pyspark.sql import functions as F

    return AggregatePlan.of(
        (
            F.count("*").alias("flights"),
            F.sum("seats").alias("seats"),
            F.max("delay").alias("worst"),
        )
    )


def tumbling_op(lateness_ms: int = 0) -> WindowAggregateOperator:
    return WindowAggregateOperator(
        ("carrier",), TumblingEventTimeWindows(HOUR, 0), plan(), "window", lateness_ms
    )


def session_op(lateness_ms: int = 0) -> WindowAggregateOperator:
    return WindowAggregateOperator(
        ("carrier",), EventTimeSessionWindows(GAP), plan(), "window", lateness_ms
    )


def partial(carrier: str, start_ms: int, count: int, seats: int | None, worst: float) -> tuple:
    """A tumbling window's partial row, as a bundle's local aggregation leaves it."""
    return (carrier, start_ms * US, KEY_GROUPS[carrier], count, seats, worst)


def session_partial(
    carrier: str, start_ms: int, end_ms: int, count: int, seats: int | None, worst: float
) -> tuple:
    return (carrier, start_ms * US, end_ms * US, KEY_GROUPS[carrier], count, seats, worst)


def state(spark: Any, rows: list[tuple], schema: str, fresh: list[bool] | None = None) -> Any:
    """A state frame with ``__fresh`` (False unless given per row)."""
    flags = fresh if fresh is not None else [False] * len(rows)
    return spark.createDataFrame(
        [(*r, f) for r, f in zip(rows, flags, strict=True)], f"{schema}, {FRESH} boolean"
    )


def output(frame: Any) -> Counter:
    """A firing's rows as a multiset, window bounds as epoch microseconds."""
    from pyspark.sql import functions as F

    assert frame.columns == ["carrier", "window_start", "window_end", "flights", "seats", "worst"]
    rows = frame.select(
        "carrier",
        F.unix_micros("window_start"),
        F.unix_micros("window_end"),
        "flights",
        "seats",
        "worst",
    ).collect()
    return Counter(tuple(r) for r in rows)


def merged(rows: list[tuple]) -> tuple[int, int | None, float]:
    """Partials ``(count, seats, worst)`` merged by the aggregates' definitions (SQL sum and
    max skip nulls; the sum of nothing but nulls is null)."""
    seats = [r[1] for r in rows if r[1] is not None]
    return sum(r[0] for r in rows), (sum(seats) if seats else None), max(r[2] for r in rows)


def expected_tumbling(
    rows: list[tuple], size_ms: int, watermark: int, fired: int, fresh: list[bool] | None = None
) -> Counter:
    """The windows that fire at ``watermark`` after ``fired``, by definition: ``end - 1`` in
    ``(fired, watermark]``, or already fired but ``end - 1 <= watermark`` with a fresh row."""
    flags = fresh if fresh is not None else [False] * len(rows)
    windows: dict[tuple, list] = defaultdict(list)
    for (carrier, ws, _kg, *values), f in zip(rows, flags, strict=True):
        windows[(carrier, ws)].append((*values, f))
    out: Counter = Counter()
    for (carrier, ws), parts in windows.items():
        last = ws // US + size_ms - 1
        if last <= watermark and (last > fired or any(p[3] for p in parts)):
            out[(carrier, ws, ws + size_ms * US, *merged(parts))] += 1
    return out


def sessions_by_definition(rows: list[tuple]) -> dict[tuple, list[tuple]]:
    """A key's windows merged as Flink's MergingWindowSet merges them: sorted by start, a
    window joins the current session when it starts at or before the session's end."""
    by_key: dict[str, list[tuple]] = defaultdict(list)
    for r in rows:
        by_key[r[0]].append(r)
    sessions: dict[tuple, list[tuple]] = {}
    for carrier, own in by_key.items():
        own.sort(key=lambda r: (r[1], r[2]))
        current: list[tuple] = []
        start = end = 0
        for r in own:
            if current and r[1] <= end:
                current.append(r)
                end = max(end, r[2])
                continue
            if current:
                sessions[(carrier, start, end)] = current
            current, start, end = [r], r[1], r[2]
        sessions[(carrier, start, end)] = current
    return sessions


def expected_sessions(rows: list[tuple], watermark: int, fired: int) -> Counter:
    out: Counter = Counter()
    for (carrier, start, end), parts in sessions_by_definition(rows).items():
        last = end // US - 1
        if fired < last <= watermark:
            out[(carrier, start, end, *merged([p[4:] for p in parts]))] += 1
    return out


# Tumbling windows -------------------------------------------------------------------------------

# Partials of several bundles: AA's first window has three (two bundles, one with a null sum);
# windows start at 0, 1 h, 2 h and 3 h; four keys at the ends of two key-group ranges.
TUMBLING_ROWS = [
    partial("AA", 0, 2, 10, 5.0),
    partial("AA", 0, 1, None, 9.0),
    partial("AA", 0, 3, 7, -1.0),
    partial("B6", 0, 1, 4, 2.5),
    partial("AA", HOUR, 1, 3, 1.0),
    partial("DL", HOUR, 2, 8, 0.0),
    partial("DL", 2 * HOUR, 1, None, 3.0),
    partial("UA", 2 * HOUR, 4, 1, 7.0),
    partial("UA", 3 * HOUR, 1, 2, 4.0),
]


def test_a_sequence_of_firings_emits_each_due_window_once_and_keeps_the_rest(spark: Any) -> None:
    """Watermarks step over every window's end - 1: just before it (nothing fires early),
    exactly at it (it fires), the same watermark again (nothing twice), past two ends at once
    (both fire). What is left in state after the last firing is exactly the unfired window."""
    op = tumbling_op()
    frame = state(spark, TUMBLING_ROWS, PARTIALS)
    fired = MIN_WATERMARK
    steps = [HOUR - 2, HOUR - 1, HOUR - 1, 3 * HOUR - 1, 3 * HOUR, 4 * HOUR - 2]
    emitted: Counter = Counter()
    for watermark in steps:
        live = live_rows(frame, op, fired) if fired > MIN_WATERMARK else frame
        got = output(fired_windows(live, op, watermark, fired))
        assert got == expected_tumbling(TUMBLING_ROWS, HOUR, watermark, fired), watermark
        emitted += got
        fired = max(fired, watermark)
    every = expected_tumbling(TUMBLING_ROWS, HOUR, 4 * HOUR - 2, MIN_WATERMARK)
    assert emitted == every and len(every) == 6  # each window of the first three hours, once
    kept = live_rows(frame, op, fired).collect()
    assert Counter(tuple(r)[:-1] for r in kept) == Counter([partial("UA", 3 * HOUR, 1, 2, 4.0)])


@pytest.mark.parametrize(
    ("watermark", "fired"),
    [
        (HOUR - 1, HOUR - 2),  # the first window's end - 1 is reached: it fires
        (2 * HOUR - 1, HOUR - 1),  # fired at end - 1 before: not again; the next one fires
        (2 * HOUR - 1, 2 * HOUR - 1),  # the same watermark again: nothing
        (4 * HOUR, HOUR),  # fired after the first window's end - 1: it does not fire again
    ],
)
def test_a_window_already_fired_never_fires_again_without_fresh_rows(
    spark: Any, watermark: int, fired: int
) -> None:
    """Rows of fired windows may still be in the frame (allowed lateness keeps them): only
    windows whose end - 1 lies after the previous firing fire."""
    op = tumbling_op(lateness_ms=HOUR)
    frame = state(spark, TUMBLING_ROWS, PARTIALS)
    expected = expected_tumbling(TUMBLING_ROWS, HOUR, watermark, fired)
    assert output(fired_windows(frame, op, watermark, fired)) == expected


def test_fresh_rows_of_a_fired_window_within_its_lateness_fire_its_full_result_again(
    spark: Any,
) -> None:
    """Flink's late firing: a window fired at its end - 1 gets a late record within its
    allowed lateness: it fires once more with every row (old and fresh) merged; a fired
    window without fresh rows stays silent; a fresh row of a window not yet due waits."""
    op = tumbling_op(lateness_ms=30 * 60_000)
    rows = [
        partial("AA", 0, 2, 10, 5.0),  # fired at HOUR - 1
        partial("AA", 0, 1, 6, 8.0),  # fresh: arrived late, within the lateness
        partial("B6", 0, 1, 4, 2.5),  # fired, nothing fresh
        partial("DL", HOUR, 2, 8, 0.0),  # not fired yet, fresh
        partial("UA", 2 * HOUR, 1, 1, 1.0),  # not due, fresh
    ]
    fresh = [False, True, False, True, True]
    frame = state(spark, rows, PARTIALS, fresh)
    fired, watermark = HOUR - 1, 2 * HOUR - 1
    live = live_rows(frame, op, fired)
    got = output(fired_windows(live, op, watermark, fired))
    assert got == expected_tumbling(rows, HOUR, watermark, fired, fresh)
    assert got == Counter(
        {
            ("AA", 0, HOUR * US, 3, 16, 8.0): 1,
            ("DL", HOUR * US, 2 * HOUR * US, 2, 8, 0.0): 1,
        }
    )


@pytest.mark.parametrize("lateness", [0, 30 * 60_000])
@pytest.mark.parametrize("offset", [-1, 0, 1])
def test_live_rows_are_those_whose_end_minus_one_plus_lateness_lies_after_the_firing(
    spark: Any, lateness: int, offset: int
) -> None:
    """A window stays in state while ``end - 1 + lateness > fired`` (Flink's
    ``isWindowLate`` / cleanup time); checked at the first window's boundary exactly."""
    op = tumbling_op(lateness)
    fired = HOUR - 1 + lateness + offset
    frame = state(spark, TUMBLING_ROWS, PARTIALS)
    kept = Counter(tuple(r)[:-1] for r in live_rows(frame, op, fired).collect())
    expected = Counter(r for r in TUMBLING_ROWS if r[1] // US + HOUR - 1 + lateness > fired)
    assert kept == expected
    assert expected != Counter(TUMBLING_ROWS) or offset < 0  # the boundary drops the first hour


def test_fired_once_fires_every_window_once(spark: Any) -> None:
    op = tumbling_op()
    frame = state(spark, TUMBLING_ROWS, PARTIALS).drop(FRESH)
    expected = expected_tumbling(TUMBLING_ROWS, HOUR, MAX_WATERMARK, MIN_WATERMARK)
    assert output(fired_once(frame, op)) == expected
    assert sum(expected.values()) == 7


def test_compaction_merges_partials_per_key_window_and_key_group_keeping_their_types(
    spark: Any,
) -> None:
    """Compaction leaves one row per (key, window, key group) with its partials merged, in the
    partials' own types (a decimal sum is not widened), and fires as the rows it replaced."""
    from pyspark.sql import functions as F

    op = WindowAggregateOperator(
        ("carrier",),
        TumblingEventTimeWindows(HOUR, 0),
        AggregatePlan.of((F.count("*").alias("flights"), F.sum("price").alias("revenue"))),
        "window",
    )
    schema = "carrier string, __ws long, __kg int, __p0_c long, __p1_s decimal(22,2)"
    rows = [
        ("AA", 0, 0, 2, Decimal("1.50")),
        ("AA", 0, 0, 1, Decimal("2.25")),
        ("AA", HOUR * US, 0, 1, None),
        ("B6", 0, 63, 4, Decimal("10.00")),
        ("B6", 0, 63, 1, None),
        ("DL", 0, 64, 1, Decimal("0.01")),
    ]
    frame = state(spark, rows, schema)
    compacted = compacted_state(frame, op)
    assert compacted.dtypes == frame.drop(FRESH).dtypes
    groups: dict[tuple, list] = defaultdict(list)
    for carrier, ws, kg, count, price in rows:
        groups[(carrier, ws, kg)].append((count, price))
    expected = Counter(
        (
            *k,
            sum(c for c, _ in v),
            sum(p for _, p in v if p is not None) if any(p is not None for _, p in v) else None,
        )
        for k, v in groups.items()
    )
    assert Counter(tuple(r) for r in compacted.collect()) == expected


# Session windows --------------------------------------------------------------------------------

# Each row: one bundle's session of a key ([first record, last record + gap), pre-merged within
# its bundle). AA: two bundles' sessions touching (end == start): one session. B6: a second
# session starting 1 ms after the first one's end: two. DL: out of order and overlapping,
# three bundles: one. UA: one session alone.
SESSION_ROWS = [
    session_partial("AA", 0, GAP, 1, 5, 1.0),
    session_partial("AA", GAP, 2 * GAP, 2, 6, 4.0),
    session_partial("B6", 0, GAP, 1, 1, 2.0),
    session_partial("B6", GAP + 1, 2 * GAP + 1, 1, None, 3.0),
    session_partial("DL", 3 * GAP - 5, 4 * GAP - 5, 1, 2, 0.5),
    session_partial("DL", GAP, 2 * GAP, 3, 3, 9.0),
    session_partial("DL", 2 * GAP - 5, 3 * GAP - 5, 1, None, -2.0),
    session_partial("UA", 5 * GAP, 6 * GAP, 2, 2, 2.0),
]


def test_the_oracle_merges_as_the_cases_say() -> None:
    """The plain-Python merge itself: AA one session, B6 two, DL one, UA one."""
    bounds = sorted((c, s // US, e // US) for c, s, e in sessions_by_definition(SESSION_ROWS))
    assert bounds == [
        ("AA", 0, 2 * GAP),
        ("B6", 0, GAP),
        ("B6", GAP + 1, 2 * GAP + 1),
        ("DL", GAP, 4 * GAP - 5),
        ("UA", 5 * GAP, 6 * GAP),
    ]


@pytest.mark.parametrize(
    ("watermark", "fired"),
    [
        (GAP - 2, MIN_WATERMARK),  # nothing has ended
        (GAP - 1, MIN_WATERMARK),  # B6's first session only: AA's merged one runs on
        (2 * GAP - 2, GAP - 1),  # AA's merged session ends at 2 GAP: not yet
        (2 * GAP - 1, GAP - 1),  # AA's merged session fires; B6's second (ends 2 GAP + 1) not
        (2 * GAP, 2 * GAP - 1),  # B6's second session
        (MAX_WATERMARK, 2 * GAP),  # the rest: DL merged over three bundles, UA
    ],
)
def test_sessions_of_several_bundles_merge_and_fire_at_their_merged_end(
    spark: Any, watermark: int, fired: int
) -> None:
    op = session_op(lateness_ms=HOUR)  # fired sessions stay in the frame: none fires twice
    frame = state(spark, SESSION_ROWS, SESSION_PARTIALS)
    expected = expected_sessions(SESSION_ROWS, watermark, fired)
    assert output(fired_windows(frame, op, watermark, fired)) == expected


@pytest.mark.parametrize("lateness", [0, GAP])
def test_retained_sessions_are_those_still_open_with_their_merged_bounds(
    spark: Any, lateness: int
) -> None:
    """After a firing at 2 GAP - 1 the state keeps the sessions whose end - 1 + lateness lies
    after it: merged bounds, one row per key, session and key group, partials merged."""
    op = session_op(lateness)
    watermark = 2 * GAP - 1
    frame = state(spark, SESSION_ROWS, SESSION_PARTIALS, [True] * len(SESSION_ROWS))
    retained = retained_state(frame, op, watermark)
    assert retained.columns == frame.drop(FRESH).columns
    expected: Counter = Counter()
    for (carrier, start, end), parts in sessions_by_definition(SESSION_ROWS).items():
        if end // US - 1 + lateness > watermark:
            expected[
                (carrier, start, end, KEY_GROUPS[carrier], *merged([p[4:] for p in parts]))
            ] += 1
    assert Counter(tuple(r) for r in retained.collect()) == expected
    assert ("AA", 0, 2 * GAP * US) in {k[:3] for k in expected} or lateness == 0


def test_fired_once_and_compaction_of_sessions_use_the_merged_sessions(spark: Any) -> None:
    op = session_op()
    frame = state(spark, SESSION_ROWS, SESSION_PARTIALS)
    expected = expected_sessions(SESSION_ROWS, MAX_WATERMARK, MIN_WATERMARK)
    assert output(fired_once(frame.drop(FRESH), op)) == expected
    compacted = compacted_state(frame, op).collect()
    assert Counter(tuple(r) for r in compacted) == Counter(
        (carrier, start, end, KEY_GROUPS[carrier], *merged([p[4:] for p in parts]))
        for (carrier, start, end), parts in sessions_by_definition(SESSION_ROWS).items()
    )


# Buffered records: aggregates that do not decompose, pandas window functions ------------------

RECORDS = "carrier string, delay double, __ws long, __kg int"


def distinct_delays_per_hour() -> WindowAggregateOperator:
    """Distinct delays per carrier and hour: an aggregate that does not decompose, so the
    window's state holds its records."""
    from pyspark.sql import functions as F

    op = WindowAggregateOperator(
        ("carrier",),
        TumblingEventTimeWindows(HOUR, 0),
        AggregatePlan.of((F.count_distinct("delay").alias("delays"),)),
        "window",
    )
    assert not op.plan.decomposable
    return op


def test_buffered_records_are_aggregated_when_their_window_fires(spark: Any) -> None:
    """A non-decomposable aggregate (count distinct): the state holds the records; a firing
    aggregates exactly the due windows' records; compaction copies them unchanged."""
    from pyspark.sql import functions as F

    op = distinct_delays_per_hour()
    rows = [
        ("AA", 1.0, 0, 0),
        ("AA", 1.0, 0, 0),
        ("AA", 2.0, 0, 0),
        ("B6", 5.0, 0, 63),
        ("AA", 3.0, HOUR * US, 0),
        ("DL", 4.0, HOUR * US, 64),
    ]
    frame = state(spark, rows, RECORDS)
    got = fired_windows(frame, op, HOUR - 1, MIN_WATERMARK).select(
        "carrier", F.unix_micros("window_start"), F.unix_micros("window_end"), "delays"
    )
    assert Counter(tuple(r) for r in got.collect()) == Counter(
        [("AA", 0, HOUR * US, 2), ("B6", 0, HOUR * US, 1)]
    )
    assert Counter(tuple(r) for r in compacted_state(frame, op).collect()) == Counter(rows)


def _window_sizes(pdf: Any) -> Any:
    import pandas as pd

    return pd.DataFrame(
        {
            "carrier": [pdf["carrier"].iloc[0]],
            "start": [pdf["window_start"].iloc[0]],
            "records": [len(pdf)],
            "total": [float(pdf["delay"].sum())],
        }
    )


def test_a_pandas_window_function_sees_each_fired_windows_records(spark: Any) -> None:
    """With a pandas function the fired windows' records (no internal columns, window bounds
    added) go to it grouped per key and window; a fired window refires with all its records
    when a fresh one joined it; fired_once hands it every window once."""
    from pyspark.sql import functions as F

    op = WindowAggregateOperator(
        ("carrier",),
        TumblingEventTimeWindows(HOUR, 0),
        None,
        "window",
        30 * 60_000,
        PandasWindowFunction(
            _window_sizes, "carrier string, start timestamp, records long, total double"
        ),
    )
    rows = [
        ("AA", 1.0, 0, 0),  # fired before
        ("AA", 2.0, 0, 0),  # fresh: a late record within the lateness
        ("B6", 4.0, 0, 63),  # fired before, nothing fresh
        ("DL", 8.0, HOUR * US, 64),  # due now
        ("DL", 16.0, HOUR * US, 64),
        ("UA", 32.0, 2 * HOUR * US, 127),  # not due
    ]
    fresh = [False, True, False, False, False, True]
    frame = state(spark, rows, RECORDS, fresh)

    def run(result: Any) -> Counter:
        picked = result.select("carrier", F.unix_micros("start"), "records", "total")
        return Counter(tuple(r) for r in picked.collect())

    assert run(fired_windows(frame, op, 2 * HOUR - 1, HOUR - 1)) == Counter(
        [("AA", 0, 2, 3.0), ("DL", HOUR * US, 2, 24.0)]
    )
    assert run(fired_once(frame.drop(FRESH), op)) == Counter(
        [
            ("AA", 0, 2, 3.0),
            ("B6", 0, 1, 4.0),
            ("DL", HOUR * US, 2, 24.0),
            ("UA", 2 * HOUR * US, 1, 32.0),
        ]
    )


def test_an_empty_state_fires_nothing(spark: Any) -> None:
    op = tumbling_op()
    frame = state(spark, [], PARTIALS)
    assert output(fired_windows(frame, op, MAX_WATERMARK, MIN_WATERMARK)) == Counter()
    assert output(fired_once(frame.drop(FRESH), op)) == Counter()


def test_fired_once_aggregates_the_buffered_records_of_every_window(spark: Any) -> None:
    """A non-decomposable aggregate at the end of a bounded input: every window's records
    aggregated by the user's columns, once (kills ``fired_once`` #24: the partials' final
    columns for records)."""
    from pyspark.sql import functions as F

    op = distinct_delays_per_hour()
    rows = [
        ("AA", 1.0, 0, 0),
        ("AA", 1.0, 0, 0),
        ("AA", 2.0, 0, 0),
        ("B6", 5.0, 0, 63),
        ("AA", 3.0, HOUR * US, 0),
        ("DL", 4.0, 2 * HOUR * US, 64),
    ]
    windows: dict[tuple, set] = defaultdict(set)
    for carrier, delay, ws, _kg in rows:
        windows[(carrier, ws)].add(delay)
    expected = Counter((c, ws, ws + HOUR * US, len(d)) for (c, ws), d in windows.items())
    got = fired_once(spark.createDataFrame(rows, RECORDS), op).select(
        "carrier", F.unix_micros("window_start"), F.unix_micros("window_end"), "delays"
    )
    assert Counter(tuple(r) for r in got.collect()) == expected
