"""A Spark Connect ``Expression`` message as a classic Column, planned in this process's JVM.

The client of a standalone cluster builds the job's columns without a JVM, as Spark Connect
expressions (``pyspark.sql.functions`` in Connect mode needs no server to build them), and
ships their messages (``millrace.spark.connect_columns``). A TaskManager whose data plane is a
classic SparkSession (local, or ``spark.master``) turns each message into a Catalyst expression
with the planner the Spark Connect server itself uses (``SparkConnectPlanner``, in the
``spark-connect`` jar that pyspark ships), so the column means what the Connect server would
make of it, and wraps it as a classic Column (issue 15).
"""

from __future__ import annotations

import uuid
from typing import Any

__all__ = ["classic_column"]


def classic_column(spark: Any, message: bytes) -> Any:
    """The classic ``pyspark.sql.Column`` of a serialized ``spark.connect.Expression``.

    Args:
        spark: The classic ``SparkSession`` whose JVM plans the expression.
        message: The message's bytes, as the client shipped them.

    Returns:
        An unresolved column, resolved by the DataFrame it is used in (as any column).

    Raises:
        RuntimeError: If the JVM cannot read or plan the message (the cause names what).

    Threading:
        Any thread with access to ``spark`` (py4j calls only; no Spark job).
    """
    from py4j.protocol import Py4JError
    from pyspark.sql.classic.column import Column

    jvm = spark._jvm
    try:
        expression = jvm.org.apache.spark.connect.proto.Expression.parseFrom(bytearray(message))
        holder = jvm.org.apache.spark.sql.connect.service.SessionHolder(
            "millrace", str(uuid.uuid4()), spark._jsparkSession
        )
        planner = jvm.org.apache.spark.sql.connect.planner.SparkConnectPlanner(
            holder, jvm.scala.Option.apply(None)
        )
        catalyst = planner.transformExpression(expression)
        node = jvm.org.apache.spark.sql.classic.ExpressionColumnNode.apply(catalyst)
        return Column(jvm.org.apache.spark.sql.Column(node))
    except Py4JError as error:
        raise RuntimeError(
            f"cannot plan a Spark Connect column in this TaskManager's Spark: {error}"
        ) from error
