"""Spark Connect's Column across processes: its ``Expression`` message.

A Spark Connect column (``pyspark.sql.connect.column.Column``, built by ``pyspark.sql.functions``
in a process whose session is remote, ``spark.remote``) is a Python expression tree that becomes
a protobuf ``spark.connect.Expression`` when a plan is sent. To ship one, the tree is turned into
that message here and its bytes travel; the receiving process wraps the message back into a
Column (:class:`ShippedExpression`), which Spark Connect sends as it came. No JVM is involved on
either side, so the client of a Connect data plane starts none (issue 15). A process with a
classic SparkSession receives it as the classic Column its JVM plans from the message
(``millrace.spark.connect_planner``): the client of any standalone cluster builds Connect
columns, without a JVM.

Aggregate decomposition (``millrace.spark.aggregation``) reads a Connect column through
:func:`expression_of`, whichever side of the wire it is on.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ShippedExpression",
    "expression_of",
    "is_simple",
    "load_connect_column",
    "proto_name",
    "reduce_connect_column",
]


def _client() -> Any:
    """The process's Connect session's client, or None (only a UDF whose output type is DDL
    text needs one to become a message). The default session, not the active one: that is
    per thread, and the session starts on a thread of its own."""
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession._get_default_session()
    return None if session is None else session.client


def expression_of(column: Any) -> Any:
    """The ``spark.connect.Expression`` message of a Connect ``column``.

    Raises:
        AttributeError: If ``column`` is not a Spark Connect column.
    """
    return column._expr.to_plan(_client())


def reduce_connect_column(column: Any) -> tuple[Any, tuple[str, bytes]]:
    """The pickle reduction of a Connect ``column``:
    ``(load_connect_column, (pyspark_version, message_bytes))``."""
    import pyspark

    return load_connect_column, (pyspark.__version__, expression_of(column).SerializeToString())


def load_connect_column(pyspark_version: str, message: bytes) -> Any:
    """Rebuild a column shipped by :func:`reduce_connect_column`.

    Args:
        pyspark_version: PySpark version of the shipping process.
        message: The serialized ``spark.connect.Expression``.

    Returns:
        ``pyspark.sql.connect.column.Column`` in a Connect process; in a process with a
        classic SparkSession (a TaskManager of a local or ``spark.master`` data plane, fed by
        a client without a JVM), the classic Column its JVM plans from the message
        (:func:`millrace.spark.connect_planner.classic_column`).

    Raises:
        RuntimeError: If this process runs another PySpark version (the message's schema may
            differ), or its JVM cannot plan the message.
    """
    import pyspark
    from pyspark.sql.connect import proto
    from pyspark.sql.connect.column import Column

    if pyspark.__version__ != pyspark_version:
        raise RuntimeError(
            f"the column was built with PySpark {pyspark_version}, this process runs PySpark "
            f"{pyspark.__version__}; run the same version everywhere"
        )
    from pyspark.sql import SparkSession
    from pyspark.sql.utils import is_remote

    classic = SparkSession._instantiatedSession
    if classic is not None and not is_remote():
        from millrace.spark.connect_planner import classic_column

        return classic_column(classic, message)
    expression = proto.Expression()
    expression.ParseFromString(message)
    return Column(ShippedExpression(expression))


def is_simple(expression: Any) -> bool:
    """Whether :func:`proto_name` names ``expression`` as Spark does: a column reference, a
    literal or ``*``."""
    return expression.WhichOneof("expr_type") in (
        "unresolved_attribute",
        "literal",
        "unresolved_star",
    )


def proto_name(expression: Any) -> str:
    """The output name Spark gives ``expression`` (a ``spark.connect.Expression``) for the
    common shapes: an alias, a column reference, a literal, a function call over those
    (``count(*)`` is ``count(1)``, as Spark names it); other shapes get a readable name that
    may differ from Spark's."""
    kind = expression.WhichOneof("expr_type")
    if kind == "alias":
        return ".".join(expression.alias.name)
    if kind == "unresolved_attribute":
        return str(expression.unresolved_attribute.unparsed_identifier)
    if kind == "literal":
        literal = expression.literal
        field = literal.WhichOneof("literal_type")
        return "NULL" if field in (None, "null") else str(getattr(literal, field))
    if kind == "unresolved_star":
        return "1"
    if kind == "unresolved_function":
        function = expression.unresolved_function
        arguments = ", ".join(proto_name(a) for a in function.arguments)
        distinct = "DISTINCT " if function.is_distinct else ""
        return f"{function.function_name}({distinct}{arguments})"
    return str(kind)


def _expression_base() -> type:
    from pyspark.sql.connect.expressions import Expression

    return Expression


class ShippedExpression(_expression_base()):  # type: ignore[misc]
    """A Connect expression received as its message: sent as it came.

    Args:
        expression: The ``spark.connect.Expression`` message.
    """

    def __init__(self, expression: Any) -> None:
        super().__init__()
        self.expression = expression

    def to_plan(self, session: Any) -> Any:
        from pyspark.sql.connect import proto

        plan = proto.Expression()
        plan.CopyFrom(self.expression)
        return plan

    def __repr__(self) -> str:
        return proto_name(self.expression)
