"""Local-global aggregation: which Spark aggregates decompose, and merging partials is exact."""

from __future__ import annotations

import pytest

from millrace.spark.aggregation import AggregatePlan

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def test_count_sum_min_max_avg_decompose(spark) -> None:
    from pyspark.sql import functions as F

    plan = AggregatePlan.of(
        (
            F.count("*").alias("n"),
            F.sum("x").alias("s"),
            F.min("x").alias("lo"),
            F.max("x").alias("hi"),
            F.avg("x").alias("mean"),
            F.count("x").alias("nx"),
        )
    )
    assert plan.decomposable
    assert plan.names == ("n", "s", "lo", "hi", "mean", "nx")
    assert [c.function for c in plan.calls] == ["count", "sum", "min", "max", "avg", "count"]


@pytest.mark.parametrize(
    "make",
    [
        lambda F: F.count_distinct("x"),
        lambda F: F.percentile_approx("x", 0.5),
        lambda F: F.sum(F.col("x")).alias("a") + 1,
    ],
)
def test_others_do_not(spark, make) -> None:
    from pyspark.sql import functions as F

    assert not AggregatePlan.of((make(F),)).decomposable


def test_non_columns_are_rejected(spark) -> None:
    with pytest.raises(TypeError, match="pyspark Columns"):
        AggregatePlan.of(("count",))


def test_partials_merged_in_two_steps_equal_one_aggregation(spark) -> None:
    from pyspark.sql import functions as F

    rows = [("a", float(i), i % 3) for i in range(100)] + [("b", None, 0), ("b", 2.5, 1)]
    frame = spark.createDataFrame(rows, "k string, x double, part int")
    columns = (
        F.count("*").alias("n"),
        F.avg("x").alias("mean"),
        F.sum("x").alias("s"),
        F.min("x").alias("lo"),
        F.max("x").alias("hi"),
    )
    plan = AggregatePlan.of(columns)
    partials = frame.groupBy("k", "part").agg(*plan.partial_columns())
    merged = partials.groupBy("k").agg(*plan.merge_columns())
    final = merged.groupBy("k").agg(*plan.final_columns()).orderBy("k").collect()
    direct = frame.groupBy("k").agg(*columns).orderBy("k").collect()
    assert [r.asDict() for r in final] == [r.asDict() for r in direct]
