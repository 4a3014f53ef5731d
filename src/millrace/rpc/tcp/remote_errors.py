"""Errors across the wire: an exception travels as its class name, args and plain attributes.

The receiver rebuilds it only when the class is a builtin exception or a Millrace error (never
by running a constructor or unpickling); anything else becomes ``RemoteRpcError`` carrying the
remote class name and message.
"""

from __future__ import annotations

import builtins
from typing import Any

from millrace import errors

__all__ = ["error_from_wire", "error_to_wire"]

_PLAIN = (str, int, float, bool, bytes, type(None))


def error_to_wire(error: BaseException) -> list[Any]:
    """``[module, qualname, args, attributes]`` with only plain values."""
    cls = type(error)
    args = [a if isinstance(a, _PLAIN) else str(a) for a in error.args]
    attrs = {k: v for k, v in vars(error).items() if isinstance(v, _PLAIN)}
    return [cls.__module__, cls.__qualname__, args, attrs]


def error_from_wire(wire: Any) -> BaseException:
    """The exception described by ``wire`` (see ``error_to_wire``)."""
    try:
        module, qualname, args, attrs = wire
    except (TypeError, ValueError):
        return errors.RemoteRpcError("unknown", repr(wire)[:200])
    cls = _allowed_class(module, qualname)
    if cls is None:
        message = str(args[0]) if isinstance(args, list) and args else ""
        return errors.RemoteRpcError(f"{module}.{qualname}", message)
    error = cls.__new__(cls)
    error.args = tuple(args) if isinstance(args, list) else ()
    if isinstance(attrs, dict):
        for key, value in attrs.items():
            if isinstance(key, str) and isinstance(value, _PLAIN):
                setattr(error, key, value)
    return error


def _allowed_class(module: Any, qualname: Any) -> type[BaseException] | None:
    if module == "builtins":
        cls = getattr(builtins, str(qualname), None)
    elif module in ("millrace.errors", "millrace.rpc.message_codec", "millrace.rpc.tcp.framing"):
        import importlib

        cls = getattr(importlib.import_module(module), str(qualname), None)
    else:
        return None
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls
    return None
