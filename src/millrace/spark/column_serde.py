"""Spark's classic Column across processes: its Java-serialized expression tree.

A classic ``pyspark.sql.Column`` wraps a JVM ``ColumnNode``. To ship one, the node is written with
Java serialization in this process's JVM, and read back into a Column in the receiving
process's JVM. Unlike the SQL text (``node.sql()``, which does not parse back for names with
spaces or operators), this keeps the exact expression, node types included, so aggregate
decomposition (``millrace.spark.aggregation``) reads a shipped column as it read the original.
Both sides must run the same Spark version, which travels along and is checked.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_column", "reduce_column"]


def _jvm() -> Any:
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None:
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
    jvm = context._jvm
    stream = jvm.java.io.ObjectInputStream(jvm.java.io.ByteArrayInputStream(node))
    try:
        return Column(jvm.org.apache.spark.sql.Column(stream.readObject()))
    finally:
        stream.close()
