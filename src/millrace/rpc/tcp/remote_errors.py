"""Errors across the wire: an exception travels as its class name, args and plain attributes.

The receiver rebuilds it only when the class is a builtin exception or a Millrace error, one of
``millrace.errors`` (never by running a constructor or unpickling); anything else becomes
``RemoteRpcError`` carrying the remote class name and message. Every class of that module
therefore arrives as itself, with its message and plain attributes. Decoding an error never
raises: whatever a peer sends as an error becomes an exception of the call it answers (issue 9).
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
    """The exception described by ``wire`` (see ``error_to_wire``).

    Returns:
        The rebuilt exception, or ``RemoteRpcError`` for a class that may not be rebuilt here
        and for anything malformed. Never raises.
    """
    if not (isinstance(wire, list) and len(wire) == 4):
        return errors.RemoteRpcError("unknown", f"malformed error ({type(wire).__name__})")
    module, qualname, args, attrs = wire
    if not (isinstance(module, str) and isinstance(qualname, str)):
        return errors.RemoteRpcError("unknown", "malformed error (class name)")
    plain_args = tuple(a for a in args if isinstance(a, _PLAIN)) if isinstance(args, list) else ()
    cls = _allowed_class(module, qualname)
    if cls is None:
        message = str(plain_args[0]) if plain_args else ""
        return errors.RemoteRpcError(f"{module}.{qualname}", message)
    try:
        error = cls.__new__(cls)
        error.args = plain_args
        if isinstance(attrs, dict):
            for key, value in attrs.items():
                if isinstance(key, str) and not key.startswith("_") and isinstance(value, _PLAIN):
                    setattr(error, key, value)
    except Exception as failure:  # e.g. a read-only attribute: keep what the peer meant
        message = str(plain_args[0]) if plain_args else ""
        return errors.RemoteRpcError(
            f"{module}.{qualname}", f"{message} (not rebuilt: {type(failure).__name__})"
        )
    return error


def _allowed_class(module: str, qualname: str) -> type[BaseException] | None:
    if module == "builtins":
        cls = getattr(builtins, qualname, None)
    elif module == errors.__name__:  # the whole Millrace tree lives there
        cls = getattr(errors, qualname, None)
    else:
        return None
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls
    return None
