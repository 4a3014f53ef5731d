"""User code as bytes: how a pipeline's operators travel from the client to the cluster.

The chained operators hold user objects: functions (``transform``), Spark aggregate columns,
source and sink connectors. They are serialized once, when the client builds the JobGraph, with
cloudpickle (functions of the job script travel by value, library code by reference), and
deserialized where they run: source and sink connectors in the JobMaster, the whole chain in a
task. Flink does the same with its user-code ``SerializedValue`` in each JobVertex.

Spark's classic ``Column`` is a handle on a JVM object; it travels as its Java-serialized
expression tree and is rebuilt in the receiving process's JVM (``millrace.spark.column_serde``),
so the expression is exact, not re-parsed. A SparkSession, SparkContext or DataFrame captured
in a closure cannot travel: serializing one raises :class:`UserCodeError` saying what to do.

User code is loaded only by processes that proved the cluster secret; the control-plane codec
never unpickles (``millrace.rpc.message_codec``).
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import sys
from typing import Any

import cloudpickle

from millrace.errors import UserCodeError

__all__ = [
    "add_user_code_root",
    "deserialize_user_code",
    "serialize_user_code",
]

_user_code_roots: list[str] = []  # directories whose modules travel by value

_NOT_SHIPPABLE = {
    "SparkSession": "use the DataFrame's own session inside the function (df.sparkSession)",
    "SparkContext": "use df.sparkSession.sparkContext inside the function",
    "DataFrame": "read the data inside the function (df.sparkSession.read...) instead of "
    "capturing a DataFrame built by the script",
}


class _UserCodePickler(cloudpickle.Pickler):
    """cloudpickle with Spark's JVM-backed objects handled (see the module docstring)."""

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        module = cls.__module__
        if module.startswith("pyspark."):
            if cls.__name__ == "Column" and module.startswith("pyspark.sql.classic"):
                from millrace.spark.column_serde import reduce_column

                return reduce_column(obj)
            advice = _NOT_SHIPPABLE.get(cls.__name__)
            if advice is not None and module.startswith(
                ("pyspark.sql", "pyspark.core", "pyspark.context")
            ):
                raise UserCodeError(
                    f"a {cls.__name__} is captured by user code and cannot be "
                    f"shipped to the TaskManagers; {advice}"
                )
        return super().reducer_override(obj)


def add_user_code_root(directory: str) -> None:
    """Make modules loaded from ``directory`` (the job script's helpers) travel by value.

    Functions of the job script itself (``__main__``) always travel by value; library modules
    (installed packages) travel by reference and must be installed on the TaskManagers.

    Threading:
        Before the job graph is built, from the thread that builds it.
    """
    root = os.path.abspath(directory)
    if root not in _user_code_roots:
        _user_code_roots.append(root)


def _register_user_modules_by_value() -> None:
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if (
            path is None
            or name.split(".")[0] in ("millrace", "pyspark")
            or "site-packages" in path
            or not any(os.path.abspath(path).startswith(root + os.sep) for root in _user_code_roots)
        ):
            continue
        with contextlib.suppress(ValueError):  # not importable by name: by value anyway
            cloudpickle.register_pickle_by_value(module)


def serialize_user_code(value: Any, what: str) -> bytes:
    """Pickle ``value`` (an operator with its user functions, columns and connectors).

    Args:
        value: The object to serialize.
        what: Names the object in errors, e.g. ``"transform 'departed'"``.

    Returns:
        The pickled bytes.

    Raises:
        UserCodeError: If something ``value`` references cannot be serialized; the message
            names ``what`` and the cause.

    Threading:
        Any thread; Spark columns need the process's SparkContext to be running.
    """
    _register_user_modules_by_value()
    buffer = io.BytesIO()
    try:
        _UserCodePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except UserCodeError as error:
        raise UserCodeError(f"{what}: {error}") from error
    except Exception as error:
        raise UserCodeError(
            f"{what} cannot be serialized for the cluster: {type(error).__name__}: {error}"
        ) from error
    return buffer.getvalue()


def deserialize_user_code(data: bytes, what: str) -> Any:
    """Unpickle user code made by :func:`serialize_user_code`.

    Args:
        data: The pickled bytes.
        what: Names the object in errors.

    Raises:
        UserCodeError: If the bytes cannot be loaded here (a module the code needs is missing,
            Spark versions differ, no SparkContext for a column...), naming ``what``.

    Threading:
        Any thread; operators holding Spark columns must be loaded where a SparkContext runs.
    """
    try:
        return pickle.loads(data)
    except UserCodeError:
        raise
    except Exception as error:
        raise UserCodeError(
            f"{what} cannot be loaded in this process: {type(error).__name__}: {error}"
        ) from error
