"""A firing in Arrow (``arrow_window_firing``) gives exactly the due windows with their
aggregates, computed by the definitions in pandas from the records themselves (not from the
code under test), and the schema of the Spark plan it stands in for
(``window_firing.fired_windows``, whose rows must match the same answer): random records with
nulls, pre-aggregated per bundle as a source stage does (one Parquet file of partials each),
fired at a random watermark after a random earlier firing, tumbling and sliding windows, and
watermarks and earlier firings exactly at a window's end - 1."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from millrace.api.operators import WindowAggregateOperator
from millrace.api.windows import SlidingEventTimeWindows, TumblingEventTimeWindows
from millrace.runtime.io.partition_events import MIN_WATERMARK
from millrace.spark.aggregation import AggregatePlan
from millrace.spark.arrow_window_firing import arrow_firing_applies, fire_in_arrow
from millrace.spark.window_firing import FRESH, fired_windows, live_rows
from millrace.spark.windowing import KEY_GROUP, WINDOW_START, assign_windows, key_group

pytestmark = [pytest.mark.slow, pytest.mark.spark]

HOUR_MS = 3_600_000
SCHEMA = "carrier string, t timestamp, delay double, seats long"


def operator(window: Any, lateness_ms: int = 0) -> WindowAggregateOperator:
    from pyspark.sql import functions as F

    plan = AggregatePlan.of(
        (
            F.count("*").alias("flights"),
            F.avg("delay").alias("avg_delay"),
            F.sum("seats").alias("seats"),
            F.min("delay").alias("least"),
            F.max("seats").alias("most"),
        )
    )
    return WindowAggregateOperator(("carrier",), window, plan, "window", lateness_ms)


def write_partials(spark: Any, rows: list[tuple], op: WindowAggregateOperator, path: Path) -> str:
    """One bundle's partial aggregates per key, window and key group, as the source stage
    writes them to the exchange."""
    import pyarrow.parquet as pq

    frame = assign_windows(spark.createDataFrame(rows, SCHEMA), "t", op.window)
    partials = frame.groupBy("carrier", WINDOW_START, key_group(("carrier",), 128).alias(KEY_GROUP))
    pq.write_table(partials.agg(*op.plan.partial_columns()).toArrow(), str(path))
    return str(path)


def spark_firing(spark: Any, paths: list[str], op: Any, watermark: int, fired: int) -> Any:
    from pyspark.sql import functions as F

    frame = spark.read.parquet(*paths).withColumn(FRESH, F.lit(False))
    if fired > MIN_WATERMARK:
        frame = live_rows(frame, op, fired)
    return fired_windows(frame, op, watermark, fired).toArrow()


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)
    return a == b


def starts_ms(window: Any, t: int) -> list[int]:
    """The starts of the windows ``[start, start + size)`` holding time ``t``: the starts
    are ``offset`` modulo the slide (a tumbling window slides by its size)."""
    slide = getattr(window, "slide_ms", window.size_ms)
    last = t - (t - window.offset_ms) % slide
    return [s for s in range(last, t - window.size_ms, -slide)]


def by_definition(
    window: Any, bundles: list[list[tuple]], watermark: int, fired: int
) -> list[dict[str, Any]]:
    """The output of the firing by the definitions, in pandas over every record of every
    bundle: a window ``[s, e)`` is due when ``e - 1`` is at most the watermark and after the
    earlier firing's; per carrier (null a key of its own) and due window, ``count(*)``, the
    average of the non-null delays, the sum of the non-null seats, the least delay and the
    most seats (null when no value is)."""
    import datetime as dt

    import pandas as pd

    rows = [
        (carrier, start, delay, seats)
        for bundle in bundles
        for carrier, t, delay, seats in bundle
        for start in starts_ms(window, t)
    ]
    frame = pd.DataFrame(rows, columns=["carrier", "start", "delay", "seats"])
    last = frame["start"] + window.size_ms - 1
    due = frame[(last <= watermark) & (last > fired)].astype({"delay": float, "seats": float})
    out = due.groupby(["carrier", "start"], dropna=False, as_index=False).agg(
        flights=("delay", "size"),
        avg_delay=("delay", "mean"),
        seats=("seats", lambda v: v.sum(min_count=1)),
        least=("delay", "min"),
        most=("seats", "max"),
    )
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

    def value(v: Any) -> Any:
        return None if pd.isna(v) else v

    return [
        {
            "carrier": value(r.carrier),
            "window_start": epoch + dt.timedelta(milliseconds=int(r.start)),
            "window_end": epoch + dt.timedelta(milliseconds=int(r.start) + window.size_ms),
            "flights": int(r.flights),
            "avg_delay": value(r.avg_delay),
            "seats": None if pd.isna(r.seats) else int(r.seats),
            "least": value(r.least),
            "most": None if pd.isna(r.most) else int(r.most),
        }
        for r in out.itertuples(index=False)
    ]


def assert_same_rows(got: list[dict[str, Any]], want: list[dict[str, Any]], what: str) -> None:
    """``got`` is ``want`` as a multiset: the same (carrier, window) rows, each as often (the
    definition has each once), every column equal (floats within 1e-12 relative)."""

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["carrier"], row["window_start"], row["window_end"])

    g, w = Counter(map(key, got)), Counter(map(key, want))
    assert g == w, f"{what}: surplus windows {g - w}, missing {w - g}"
    wanted = {key(row): row for row in want}
    for row in got:
        expected = wanted[key(row)]
        assert row.keys() == expected.keys(), (what, row, expected)
        assert all(same(row[k], expected[k]) for k in row), (what, row, expected)


def window_ends(first_day: int, last_day: int) -> st.SearchStrategy[int]:
    """A watermark exactly at a window's end - 1 (every window here ends on a whole hour)."""
    return st.integers(first_day * 24, last_day * 24).map(lambda h: h * HOUR_MS - 1)


records = st.lists(
    st.tuples(
        st.sampled_from(["AA", "B6", "DL", None]),
        st.integers(0, 6 * 24 * HOUR_MS),
        st.one_of(st.none(), st.floats(-100, 1000, allow_nan=False)),
        st.one_of(st.none(), st.integers(-(10**6), 10**6)),
    ),
    min_size=1,
    max_size=40,
)


DAY_MS = 24 * HOUR_MS
AT_ENDS = [  # records at a window's first and last millisecond, the watermark at its end - 1
    [("AA", 0, 1.5, 2), ("AA", DAY_MS - 1, None, None), ("B6", DAY_MS - 1, 3.0, None)],
    [("AA", DAY_MS, -2.0, 7), (None, 2 * DAY_MS - 1, None, 5), ("DL", 2 * DAY_MS, 4.0, 1)],
]


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(
        [
            TumblingEventTimeWindows(24 * HOUR_MS, 0),
            TumblingEventTimeWindows(5 * HOUR_MS, HOUR_MS),
            SlidingEventTimeWindows(24 * HOUR_MS, 6 * HOUR_MS),
        ]
    ),
    st.lists(records, min_size=1, max_size=3),
    st.one_of(st.integers(0, 7 * 24 * HOUR_MS), window_ends(1, 7)),
    st.one_of(st.just(MIN_WATERMARK), st.integers(0, 3 * 24 * HOUR_MS), window_ends(0, 3)),
)
@example(TumblingEventTimeWindows(DAY_MS, 0), AT_ENDS, 2 * DAY_MS - 1, DAY_MS - 1)
@example(TumblingEventTimeWindows(DAY_MS, 0), AT_ENDS, DAY_MS - 1, MIN_WATERMARK)
@example(SlidingEventTimeWindows(DAY_MS, 6 * HOUR_MS), AT_ENDS, 2 * DAY_MS - 1, DAY_MS - 1)
def test_an_arrow_firing_equals_the_spark_plan(
    spark: Any, tmp_path_factory: Any, window: Any, bundles: list, watermark: int, fired: int
) -> None:
    import datetime as dt

    op = operator(window)
    assert arrow_firing_applies(op, [])
    work = tmp_path_factory.mktemp("partials")
    paths = []
    for i, bundle in enumerate(bundles):
        rows = [(c, dt.datetime.fromtimestamp(t / 1000, dt.UTC), d, s) for c, t, d, s in bundle]
        paths.append(write_partials(spark, rows, op, work / f"bundle-{i}.parquet"))
    spark_plan = spark_firing(spark, paths, op, watermark, fired)

    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes") == "true"
    actual = fire_in_arrow(paths, op, watermark, fired, large)

    assert actual is not None and actual.schema == spark_plan.schema
    want = by_definition(window, bundles, watermark, fired)
    assert_same_rows(actual.to_pylist(), want, "the Arrow firing")
    assert_same_rows(spark_plan.to_pylist(), want, "the Spark plan")


def test_the_arrow_path_stands_aside_where_spark_semantics_are_needed() -> None:
    """Allowed lateness (late firings), merging windows, a pandas function or a transform
    after the window: the Spark plan fires."""
    from millrace.api.windows import EventTimeSessionWindows

    day = TumblingEventTimeWindows(24 * HOUR_MS, 0)
    assert arrow_firing_applies(operator(day), [])
    assert not arrow_firing_applies(operator(day, lateness_ms=HOUR_MS), [])
    assert not arrow_firing_applies(operator(EventTimeSessionWindows(HOUR_MS)), [])
    assert not arrow_firing_applies(operator(day), [object()])


def test_a_decimal_sum_is_left_to_spark(spark: Any, tmp_path: Path) -> None:
    """Spark widens a decimal's sum; the Arrow path answers None and the task runs Spark."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    op = WindowAggregateOperator(
        ("carrier",),
        TumblingEventTimeWindows(HOUR_MS, 0),
        AggregatePlan.of((F.sum("price").alias("revenue"),)),
        "window",
    )
    path = str(tmp_path / "partials.parquet")
    table = pa.table(
        {
            "carrier": ["AA"],
            WINDOW_START: [0],
            KEY_GROUP: [1],
            "__p0_s": pa.array([1], pa.decimal128(12, 2)),
        }
    )
    pq.write_table(table, path)
    assert fire_in_arrow([path], op, HOUR_MS, MIN_WATERMARK, True) is None


def partial_file(tmp_path: Path, name: str, columns: dict[str, Any]) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(tmp_path / name)
    pq.write_table(
        pa.table({WINDOW_START: [0] * len(next(iter(columns.values()))), **columns}), path
    )
    return path


@pytest.mark.parametrize(
    ("call", "columns"),
    [
        ("max", {"carrier": ["AA", "AA"], "__p0_m": [5.0, float("nan")]}),  # Spark: NaN is max
        ("count", {"carrier": [[1], [2]], "__p0_c": [1, 2]}),  # a nested key
        ("count", {"carrier": [0.0, -0.0], "__p0_c": [1, 2]}),  # Spark groups -0.0 with 0.0
        ("sum", {"carrier": ["AA", "AA"], "__p0_s": [2**62, 2**62]}),  # Spark raises, Arrow wraps
    ],
    ids=["nan-max", "nested-key", "float-key", "overflow"],
)
def test_where_arrow_would_differ_from_spark_the_spark_plan_fires(
    tmp_path: Path, call: str, columns: dict[str, Any]
) -> None:
    from pyspark.sql import functions as F

    op = WindowAggregateOperator(
        ("carrier",),
        TumblingEventTimeWindows(HOUR_MS, 0),
        AggregatePlan.of((getattr(F, call)("x" if call != "count" else "*").alias("out"),)),
        "window",
    )
    path = partial_file(tmp_path, "partials.parquet", columns)
    assert fire_in_arrow([path], op, HOUR_MS, MIN_WATERMARK, True) is None
