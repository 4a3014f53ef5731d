"""Spark's classic Column across processes: its Java-serialized expression tree.

A classic ``pyspark.sql.Column`` wraps a JVM ``ColumnNode``. To ship one, the node is written with
Java serialization in this process's JVM, and read back into a Column in the receiving
process's JVM. Unlike the SQL text (``node.sql()``, which does not parse back for names with
spaces or operators), this keeps the exact expression, node types included, so aggregate
decomposition (``millrace.spark.aggregation``) reads a shipped column as it read the original.
Both sides must run the same Spark version, which travels along and is checked. Every task
loads its chain's columns, so the JVM classes it needs are looked up once per SparkContext
(11 of the 17 py4j round trips a column took).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from millrace.errors import UserCodeError
from millrace.runtime.jobgraph.user_code import register_reducer

__all__ = ["load_column", "reduce_column", "reduce_spark_object"]

_NOT_SHIPPABLE = {
    "SparkSession": "use the DataFrame's own session inside the function (df.sparkSession)",
    "SparkContext": "use df.sparkSession.sparkContext inside the function",
    "DataFrame": "read the data inside the function (df.sparkSession.read...) instead of "
    "capturing a DataFrame built by the script",
}


class _Classes(NamedTuple):
    """The JVM classes a column load uses (py4j ``JavaClass`` handles of one context)."""

    context: Any  # the SparkContext whose JVM holds the handles
    object_input_stream: Any
    byte_array_input_stream: Any
    column: Any


_loaded: _Classes | None = None  # the running context's classes


def _classes_of(context: Any) -> _Classes:
    """The column-loading classes of ``context``'s JVM, looked up on first use (again after
    the SparkContext was replaced).

    Threading:
        Any thread: two threads looking up at once each store an equal entry.
    """
    global _loaded
    found = _loaded
    if found is None or found.context is not context:
        jvm = context._jvm
        found = _Classes(
            context,
            jvm.java.io.ObjectInputStream,
            jvm.java.io.ByteArrayInputStream,
            jvm.org.apache.spark.sql.Column,
        )
        _loaded = found
    return found


def _jvm() -> Any:
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None:
        from pyspark.sql.utils import is_remote

        if is_remote():
            raise RuntimeError(
                "the job's columns were built by a client with a local SparkSession but this "
                "process runs Spark Connect (spark.remote); set the same spark.remote on the "
                "client and the cluster"
            )
        raise RuntimeError(
            "no SparkContext runs in this process; Spark columns can only be "
            "serialized and loaded where a SparkSession runs"
        )
    return context


def reduce_column(column: Any) -> tuple[Any, tuple[str, bytes]]:
    """The pickle reduction of ``column``: ``(load_column, (spark_version, node_bytes))``.

    Raises:
        RuntimeError: If no SparkContext runs in this process.
        Py4JError: If the JVM cannot serialize the node.
    """
    context = _jvm()
    jvm = context._jvm
    out = jvm.java.io.ByteArrayOutputStream()
    stream = jvm.java.io.ObjectOutputStream(out)
    stream.writeObject(column._jc.node())
    stream.close()
    return load_column, (context.version, bytes(out.toByteArray()))


def load_column(spark_version: str, node: bytes) -> Any:
    """Rebuild a column serialized by :func:`reduce_column`.

    Args:
        spark_version: Spark version of the serializing process.
        node: The Java-serialized ``ColumnNode``.

    Returns:
        ``pyspark.sql.Column``.

    Raises:
        RuntimeError: If no SparkContext runs here, or its Spark version differs.
    """
    from pyspark.sql import Column

    context = _jvm()
    if context.version != spark_version:
        raise RuntimeError(
            f"the column was built with Spark {spark_version}, this process runs "
            f"Spark {context.version}; run the same Spark version everywhere"
        )
    classes = _classes_of(context)
    stream = classes.object_input_stream(classes.byte_array_input_stream(node))
    try:
        return Column(classes.column(stream.readObject()))
    finally:
        stream.close()


def reduce_spark_object(obj: Any) -> Any:
    """The user-code reducer of Spark's objects (``register_reducer``): a classic Column ships
    as its expression tree (:func:`reduce_column`), a Spark Connect Column as its Expression
    message (``millrace.spark.connect_columns``); a SparkSession, SparkContext or DataFrame
    must not travel; anything else is not Spark's (``NotImplemented``).

    Raises:
        UserCodeError: For a SparkSession, SparkContext or DataFrame, with what to do instead.
    """
    cls = type(obj)
    module = cls.__module__
    if not module.startswith("pyspark."):
        return NotImplemented
    if cls.__name__ == "Column" and module.startswith("pyspark.sql.classic"):
        return reduce_column(obj)
    if cls.__name__ == "Column" and module.startswith("pyspark.sql.connect"):
        from millrace.spark.connect_columns import reduce_connect_column

        return reduce_connect_column(obj)
    advice = _NOT_SHIPPABLE.get(cls.__name__)
    if advice is not None and module.startswith(("pyspark.sql", "pyspark.core", "pyspark.context")):
        raise UserCodeError(
            f"a {cls.__name__} is captured by user code and cannot be shipped to the "
            f"TaskManagers; {advice}"
        )
    return NotImplemented


register_reducer(reduce_spark_object)
