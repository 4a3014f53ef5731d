"""Decomposition of Spark aggregate columns into partial and final aggregates (local-global).

``count``, ``sum``, ``min``, ``max`` and ``avg`` over one argument, without DISTINCT, decompose:
each bundle computes partial aggregates before the exchange, and the keyed side merges partials
when the window fires (Flink's local-global aggregation). Any other aggregate makes the plan
non-decomposable: records are buffered in keyed state and aggregated by Spark on firing.

Introspection reads the column's expression tree through Spark's classic Column API
(``ColumnNode``), or a Spark Connect column's Expression message; a column that cannot be read
is treated as non-decomposable, which is always correct, only slower.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["AggregateCall", "AggregatePlan"]

_DECOMPOSABLE = {"count", "sum", "min", "max", "avg", "mean"}


@dataclass(frozen=True)
class AggregateCall:
    """One decomposable aggregate: ``function(argument) AS name``.

    Args:
        name: Output column name.
        function: One of count, sum, min, max, avg.
        argument: The argument column; None for ``count(*)``.
    """

    name: str
    function: str
    argument: Column | None

    def argument_column(self) -> Column:
        """The argument, or ``lit(1)`` for ``count(*)``."""
        return self.argument if self.argument is not None else F.lit(1)


@dataclass(frozen=True)
class AggregatePlan:
    """How a window's aggregates are computed.

    Args:
        columns: The user's aggregate columns, as given to ``agg``.
        names: Output column names, in order.
        calls: The decomposed calls when every aggregate decomposes, else None.
    """

    columns: tuple[Any, ...]
    names: tuple[str, ...]
    calls: tuple[AggregateCall, ...] | None

    @classmethod
    def of(cls, columns: tuple[Any, ...]) -> AggregatePlan:
        """Analyse ``columns``.

        Raises:
            TypeError: If an element is not a pyspark Column.
        """
        for c in columns:
            if not isinstance(c, Column):
                raise TypeError(f"agg() takes pyspark Columns such as F.count('*'), got {c!r}")
        calls = [_decompose(c) for c in columns]
        names = tuple(
            call.name if call else _output_name(c) for call, c in zip(calls, columns, strict=True)
        )
        decomposed = tuple(call for call in calls if call is not None)
        return cls(tuple(columns), names, decomposed if len(decomposed) == len(calls) else None)

    @property
    def decomposable(self) -> bool:
        return self.calls is not None

    def partial_columns(self) -> list[Column]:
        """Partial aggregates computed per bundle before the exchange.

        Schema:
            One or two columns per call named ``__p{i}_{c|s|m}``.
        """
        out: list[Column] = []
        for i, call in enumerate(self._calls()):
            arg = call.argument_column()
            if call.function == "count":
                out.append(F.count(arg).alias(f"__p{i}_c"))
            elif call.function == "sum":
                out.append(F.sum(arg).alias(f"__p{i}_s"))
            elif call.function in ("min", "max"):
                out.append(getattr(F, call.function)(arg).alias(f"__p{i}_m"))
            else:  # avg
                out += [F.sum(arg).alias(f"__p{i}_s"), F.count(arg).alias(f"__p{i}_c")]
        return out

    def merge_columns(self) -> list[Column]:
        """Aggregates that merge partials into partials of the same schema (compaction)."""
        out: list[Column] = []
        for i, call in enumerate(self._calls()):
            if call.function == "count":
                out.append(F.sum(f"__p{i}_c").alias(f"__p{i}_c"))
            elif call.function == "sum":
                out.append(F.sum(f"__p{i}_s").alias(f"__p{i}_s"))
            elif call.function in ("min", "max"):
                out.append(getattr(F, call.function)(f"__p{i}_m").alias(f"__p{i}_m"))
            else:
                out += [
                    F.sum(f"__p{i}_s").alias(f"__p{i}_s"),
                    F.sum(f"__p{i}_c").alias(f"__p{i}_c"),
                ]
        return out

    def final_columns(self) -> list[Column]:
        """Aggregates that merge partials into the user's outputs, named as the user named them."""
        out: list[Column] = []
        for i, call in enumerate(self._calls()):
            if call.function == "count":
                out.append(F.coalesce(F.sum(f"__p{i}_c"), F.lit(0)).cast("long").alias(call.name))
            elif call.function == "sum":
                out.append(F.sum(f"__p{i}_s").alias(call.name))
            elif call.function in ("min", "max"):
                out.append(getattr(F, call.function)(f"__p{i}_m").alias(call.name))
            else:
                out.append(
                    F.try_divide(F.sum(f"__p{i}_s").cast("double"), F.sum(f"__p{i}_c")).alias(
                        call.name
                    )
                )
        return out

    def _calls(self) -> tuple[AggregateCall, ...]:
        if self.calls is None:
            raise ValueError("the aggregates do not decompose into partial aggregates")
        return self.calls


def _decompose(column: Column) -> AggregateCall | None:
    if _is_connect(column):
        return _decompose_connect(column)
    try:
        node = _java_column(column).node()
        name = None
        if node.getClass().getSimpleName() == "Alias":
            names = node.name()
            if names.size() != 1:
                return None
            name = names.apply(0)
            node = node.child()
        if node.getClass().getSimpleName() != "UnresolvedFunction":
            return None
        function = str(node.functionName()).lower()
        args = node.arguments()
        if (
            function not in _DECOMPOSABLE
            or node.isDistinct()
            or node.isUserDefinedFunction()
            or args.size() != 1
        ):
            return None
        arg_node = args.apply(0)
        argument: Column | None
        if arg_node.getClass().getSimpleName() == "UnresolvedStar":
            if function != "count":
                return None
            argument = None
        else:
            argument = _column_of(arg_node)
        function = "avg" if function == "mean" else function
        return AggregateCall(name or str(node.sql()), function, argument)
    except Exception:  # any introspection failure: buffer instead (always correct)
        return None


def _is_connect(column: Column) -> bool:
    return type(column).__module__.startswith("pyspark.sql.connect")


def _decompose_connect(column: Column) -> AggregateCall | None:
    """:func:`_decompose` of a Spark Connect column, read from its Expression message."""
    from pyspark.sql.connect.column import Column as ConnectColumn

    from millrace.spark.connect_columns import (
        ShippedExpression,
        expression_of,
        is_simple,
        proto_name,
    )

    try:
        expression = expression_of(column)
        name = None
        if expression.WhichOneof("expr_type") == "alias":
            if len(expression.alias.name) != 1:
                return None
            name = expression.alias.name[0]
            expression = expression.alias.expr
        if expression.WhichOneof("expr_type") != "unresolved_function":
            return None
        call = expression.unresolved_function
        function = call.function_name.lower()
        if (
            function not in _DECOMPOSABLE
            or call.is_distinct
            or call.is_user_defined_function
            or len(call.arguments) != 1
        ):
            return None
        [argument_message] = call.arguments
        if name is None and not is_simple(argument_message):
            return None  # its output name is Spark's to give: buffer instead
        argument: Column | None
        if argument_message.WhichOneof("expr_type") == "unresolved_star":
            if function != "count":
                return None
            argument = None
        else:
            argument = ConnectColumn(ShippedExpression(argument_message))
        function = "avg" if function == "mean" else function
        return AggregateCall(name or proto_name(expression), function, argument)
    except Exception:  # any introspection failure: buffer instead (always correct)
        return None


def _column_of(node: Any) -> Column:
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    jvm = None if context is None else context._jvm
    if jvm is None:
        raise RuntimeError("no active SparkContext to build a Column")
    return Column(jvm.org.apache.spark.sql.Column(node))


def _java_column(column: Column) -> Any:
    """The JVM column behind a classic Column (Spark Connect's have none: AttributeError)."""
    return column._jc


def _output_name(column: Column) -> str:
    if _is_connect(column):
        from millrace.spark.connect_columns import expression_of, proto_name

        try:
            return proto_name(expression_of(column))
        except Exception:
            return str(column)
    try:
        node = _java_column(column).node()
        if node.getClass().getSimpleName() == "Alias":
            return str(node.name().apply(0))
        return str(node.sql())
    except Exception:
        return str(column)
