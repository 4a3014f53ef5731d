"""Spark Connect columns across processes: shipped as their Expression message, read back for
local-global aggregation. Connect columns are built without a server (``pyspark.sql.connect``'s
functions are pure Python), so these tests start no Spark."""

from __future__ import annotations

import pyspark
import pyspark.sql.connect.functions as CF
import pytest
from pyspark.sql.types import IntegerType, LongType
from pyspark.sql.window import Window

import millrace.spark.column_serde  # noqa: F401  (registers the reducer of Spark columns)
from millrace.runtime.jobgraph.user_code import deserialize_user_code, serialize_user_code
from millrace.spark.aggregation import AggregatePlan
from millrace.spark.connect_columns import (
    ShippedExpression,
    expression_of,
    load_connect_column,
    proto_name,
)


@pytest.fixture(autouse=True)
def connect_process(monkeypatch) -> None:
    """This process as a Connect one (what a remote session's builder sets): the suite's
    classic SparkSession may run in it too, and a classic process plans Connect columns as
    classic ones."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")


def test_a_connect_column_travels_as_its_expression_message() -> None:
    column = (CF.avg(CF.col("dep_delay")) * 2).alias("twice")
    shipped = _ship(column)
    assert type(shipped).__module__ == "pyspark.sql.connect.column"
    assert isinstance(shipped._expr, ShippedExpression)
    assert expression_of(shipped) == expression_of(column)
    # and again: a shipped column ships as it came
    assert expression_of(_ship(shipped)) == expression_of(column)


def test_another_pyspark_version_is_refused() -> None:
    message = expression_of(CF.col("x")).SerializeToString()
    with pytest.raises(RuntimeError, match=r"PySpark 0\.0\.1"):
        load_connect_column("0.0.1", message)


def test_the_same_aggregates_decompose_as_classic_columns_do() -> None:
    columns = (
        CF.count("*").alias("n"),
        CF.sum("x").alias("s"),
        CF.min("x").alias("lo"),
        CF.max("x").alias("hi"),
        CF.avg("x").alias("mean"),
        CF.count("x"),
    )
    for plan in (AggregatePlan.of(columns), AggregatePlan.of(_shipped(columns))):
        assert plan.decomposable
        assert plan.names == ("n", "s", "lo", "hi", "mean", "count(x)")
        assert [c.function for c in plan.calls] == ["count", "sum", "min", "max", "avg", "count"]
        assert plan.calls[0].argument is None
        assert proto_name(expression_of(plan.calls[1].argument)) == "x"


@pytest.mark.parametrize(
    "make",
    [
        lambda: CF.count_distinct("x").alias("d"),
        lambda: CF.percentile_approx("x", 0.5).alias("p"),
        lambda: (CF.sum(CF.col("x")) + 1).alias("a"),
        lambda: CF.sum("*").alias("s"),
        lambda: CF.sum(CF.col("x") * 2),  # unaliased: Spark names it, Millrace cannot
    ],
)
def test_others_are_buffered_and_keep_their_names(make) -> None:
    plan = AggregatePlan.of((make(),))
    assert not plan.decomposable
    assert plan.names == (proto_name(expression_of(make())),)


def test_spark_names_of_unaliased_columns() -> None:
    assert proto_name(expression_of(CF.count("*"))) == "count(1)"
    assert proto_name(expression_of(CF.max(CF.col("t")))) == "max(t)"
    assert proto_name(expression_of(CF.lit(3))) == "3"


def _ship(value: object) -> object:
    """``value`` serialized as operators are, and loaded back."""
    return deserialize_user_code(serialize_user_code(value, "a column"), "a column")


def _shipped(columns: tuple) -> tuple:
    return tuple(_ship(c) for c in columns)


def _shapes(F) -> list:  # F: the functions module, classic or Connect
    """The same columns built with ``F`` (``pyspark.sql.functions`` classic or Connect)."""
    return [
        ((F.col("delay") + 1) * F.lit(2)).alias("twice"),
        F.when(F.col("delay") > 10, F.upper(F.col("carrier"))).otherwise("on time"),
        F.col("delay").cast("double") / 3,
        F.col("carrier").isin("UA", "AA"),
        F.date_trunc("hour", F.col("at")).alias("hour"),
        F.coalesce(F.col("missing"), F.lit(-1)),
        F.expr("delay * 2 + length(carrier)").alias("sql_text"),
        F.split(F.col("carrier"), "").getItem(0),
        F.udf(lambda s: len(s) * 10, IntegerType())(F.col("carrier")),  # a Python UDF
        F.pandas_udf(lambda d: d * 2, LongType())(F.col("delay").cast("long")),
        F.row_number().over(Window.partitionBy("carrier").orderBy(F.col("delay").desc())),
        F.transform(F.array("delay", "missing"), lambda x: F.coalesce(x, F.lit(0)) + 1),
    ]


@pytest.mark.slow
@pytest.mark.spark
def test_a_process_with_a_classic_session_plans_them_as_classic_columns(spark, monkeypatch) -> None:
    """What a TaskManager of a local or spark.master data plane does with the columns of a
    client without a JVM: each shipped Connect column selects exactly what the same column
    built classically selects."""
    from pyspark.sql import functions as F
    from pyspark.sql.classic.column import Column as ClassicColumn

    messages = [expression_of(c).SerializeToString() for c in _shapes(CF)]
    average = expression_of(CF.avg("delay").alias("a")).SerializeToString()
    by_delay_descending = expression_of(CF.col("delay").desc()).SerializeToString()
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED")
    frame = spark.createDataFrame(
        [(1, "UA", "2013-01-01 05:17:00", None), (30, "B6", "2013-01-01 06:42:00", 4)],
        "delay int, carrier string, at string, missing int",
    ).withColumn("at", F.to_timestamp("at"))
    shipped = [load_connect_column(pyspark.__version__, m) for m in messages]
    assert all(isinstance(c, ClassicColumn) for c in shipped)
    classic = _shapes(F)
    for connect_built, classic_built in zip(shipped, classic, strict=True):
        assert frame.select(connect_built).collect() == frame.select(classic_built).collect()
    grouped = frame.groupBy("carrier").agg(load_connect_column(pyspark.__version__, average))
    assert sorted(grouped.collect()) == sorted(
        frame.groupBy("carrier").agg(F.avg("delay").alias("a")).collect()
    )
    descending = load_connect_column(pyspark.__version__, by_delay_descending)
    assert frame.orderBy(descending).collect() == frame.orderBy(F.col("delay").desc()).collect()


@pytest.mark.slow
@pytest.mark.spark
def test_a_message_the_jvm_cannot_plan_fails_with_the_cause(spark, monkeypatch) -> None:
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED")
    with pytest.raises(RuntimeError, match="cannot plan a Spark Connect column"):
        load_connect_column(pyspark.__version__, b"\xff\xff\xff")
