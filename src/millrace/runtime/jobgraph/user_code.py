"""User code as bytes: how a pipeline's operators travel from the client to the cluster.

The chained operators hold user objects: functions (``transform``), Spark aggregate columns,
source and sink connectors. They are serialized once, when the client builds the JobGraph, with
cloudpickle (functions of the job script travel by value, library code by reference), and
deserialized where they run: source and sink connectors in the JobMaster, the whole chain in a
task. Flink does the same with its user-code ``SerializedValue`` in each JobVertex.

Objects that plain pickling cannot ship are handled by reducers that the data plane registers
(:func:`register_reducer`; the runtime knows no data plane): ``millrace.spark.column_serde``
ships Spark's classic ``Column`` as its Java-serialized expression tree, rebuilt in the
receiving process's JVM, so the expression is exact, not re-parsed, and refuses a SparkSession,
SparkContext or DataFrame captured in a closure with a :class:`UserCodeError` saying what to do.

User code is loaded only by processes that proved the cluster secret; the control-plane codec
never unpickles (``millrace.rpc.message_codec``).
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import sys
from collections.abc import Callable
from typing import Any

import cloudpickle

from millrace.errors import UserCodeError

__all__ = [
    "Reducer",
    "add_user_code_root",
    "deserialize_user_code",
    "register_reducer",
    "serialize_user_code",
]

_user_code_roots: list[str] = []  # directories whose modules travel by value

Reducer = Callable[[Any], Any]
"""``obj -> reduce tuple`` for the objects it ships, ``NotImplemented`` for the others; it may
raise UserCodeError for an object that must not travel."""

_reducers: list[Reducer] = []


def register_reducer(reducer: Reducer) -> None:
    """Let ``reducer`` ship (or refuse) objects plain pickling cannot (idempotent).

    Threading:
        At import time of the module that defines it.
    """
    if reducer not in _reducers:
        _reducers.append(reducer)


class _UserCodePickler(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle: untyped
    """cloudpickle with the registered reducers consulted first (see the module docstring)."""

    def reducer_override(self, obj: Any) -> Any:
        for reducer in _reducers:
            reduced = reducer(obj)
            if reduced is not NotImplemented:
                return reduced
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
