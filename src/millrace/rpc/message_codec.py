"""MessageCodec: control messages as msgpack with explicit schemas, no pickle (issue 3).

Every message class is registered under a stable numeric type id. A registered dataclass is
encoded as a msgpack extension holding ``[type_id, field values in declaration order]``; a
registered Enum as ``[type_id, member name]``. Decoding checks the type id, the field count and
each value against the field's annotation (int, float, str, bool, bytes, None, list, tuple,
dict, unions, NewTypes and other registered classes), so a peer cannot make this process build
arbitrary objects. Anything unregistered fails to encode with CodecError; user code travels
only inside job artifacts, never through this codec.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import types
import typing
from typing import Any

import msgpack

from millrace.errors import RpcError

__all__ = ["CodecError", "MessageCodec"]

_OBJECT = 1  # msgpack extension code of a registered dataclass
_ENUM = 2  # msgpack extension code of a registered enum member


class CodecError(RpcError):
    """A value cannot be encoded, or bytes do not decode to a valid registered message."""


class MessageCodec:
    """Registry of message classes and their msgpack encoding.

    Threading:
        Register everything before use; encoding and decoding are then thread-safe (each
        thread encodes with its own ``msgpack.Packer``, reused: building one costs more than
        packing a small message).
    """

    def __init__(self) -> None:
        self._ids: dict[type, int] = {}
        self._classes: dict[int, type] = {}
        self._hints: dict[type, list[tuple[str, Any]]] = {}
        self._packers = threading.local()  # .idle: this thread's Packer when not in use

    def register(self, type_id: int, cls: type) -> None:
        """Register dataclass or Enum ``cls`` under ``type_id``.

        Raises:
            ValueError: If the id or the class is registered already, or ``type_id`` < 0.
            TypeError: If ``cls`` is neither a dataclass nor an Enum.
        """
        if type_id < 0:
            raise ValueError(f"type ids are >= 0, got {type_id}")
        if type_id in self._classes or cls in self._ids:
            raise ValueError(f"{cls.__name__} or type id {type_id} is registered already")
        if dataclasses.is_dataclass(cls):
            hints = typing.get_type_hints(cls)
            self._hints[cls] = [(f.name, hints[f.name]) for f in dataclasses.fields(cls) if f.init]
        elif not issubclass(cls, enum.Enum):
            raise TypeError(f"{cls.__name__} is neither a dataclass nor an Enum")
        self._ids[cls] = type_id
        self._classes[type_id] = cls

    def encode(self, value: Any) -> bytes:
        """msgpack bytes of ``value``.

        Raises:
            CodecError: If ``value`` holds an object of an unregistered class.
        """
        packers = self._packers
        packer = getattr(packers, "idle", None)
        if packer is None:  # first use on this thread, or nested (the body of an extension)
            packer = msgpack.Packer(default=self._default, use_bin_type=True, strict_types=True)
        packers.idle = None
        try:
            return packer.pack(value)  # resets the packer's buffer on error too
        except CodecError:
            raise
        except (TypeError, ValueError, OverflowError) as error:
            raise CodecError(f"cannot encode {type(value).__name__}: {error}") from error
        finally:
            packers.idle = packer

    def decode(self, data: bytes) -> Any:
        """The value encoded in ``data``.

        Raises:
            CodecError: If ``data`` is not msgpack, names an unknown type id, or a field does
                not match its declared type.
        """
        try:
            return msgpack.unpackb(data, ext_hook=self._ext_hook, raw=False, strict_map_key=False)
        except CodecError:
            raise
        except Exception as error:
            raise CodecError(f"malformed message: {type(error).__name__}: {error}") from error

    # msgpack hooks -----------------------------------------------------------------------------

    def _default(self, value: Any) -> Any:
        cls = type(value)
        type_id = self._ids.get(cls)
        if type_id is None:
            if isinstance(value, tuple):
                return list(value)
            raise CodecError(
                f"{cls.__module__}.{cls.__qualname__} is not a registered message "
                "type; register it with the codec or send plain data"
            )
        if isinstance(value, enum.Enum):
            body = [type_id, value.name]
            return msgpack.ExtType(_ENUM, self.encode(body))
        fields = [getattr(value, name) for name, _ in self._hints[cls]]
        return msgpack.ExtType(_OBJECT, self.encode([type_id, *fields]))

    def _ext_hook(self, code: int, data: bytes) -> Any:
        body = self.decode(data)
        if code not in (_OBJECT, _ENUM) or not isinstance(body, list) or not body:
            raise CodecError(f"unknown msgpack extension {code}")
        type_id, *values = body
        cls = self._classes.get(type_id) if isinstance(type_id, int) else None
        if cls is None:
            raise CodecError(f"unknown message type id {type_id!r}")
        if code == _ENUM:
            if not (
                issubclass(cls, enum.Enum) and len(values) == 1 and values[0] in cls.__members__
            ):
                raise CodecError(f"invalid {cls.__name__} member {values!r}")
            return cls[values[0]]
        fields = self._hints.get(cls)
        if fields is None or len(values) != len(fields):
            raise CodecError(f"{cls.__name__} takes {len(fields or [])} fields, got {len(values)}")
        converted = [
            _check(value, hint, f"{cls.__name__}.{name}", self._classes)
            for (name, hint), value in zip(fields, values, strict=True)
        ]
        return cls(*converted)


def _check(value: Any, hint: Any, where: str, registered: dict[int, type]) -> Any:
    """``value`` if it matches ``hint`` (lists become tuples where a tuple is declared)."""
    if hint is Any:
        return value
    supertype = getattr(hint, "__supertype__", None)  # NewType
    if supertype is not None:
        return _check(value, supertype, where, registered)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(hint):
            try:
                return _check(value, option, where, registered)
            except CodecError:
                continue
        raise CodecError(f"{where}: {value!r} matches none of {hint}")
    if hint is None or hint is type(None):
        if value is not None:
            raise CodecError(f"{where}: expected None, got {type(value).__name__}")
        return None
    if origin in (list, tuple) or hint in (list, tuple):
        if not isinstance(value, list | tuple):
            raise CodecError(f"{where}: expected a sequence, got {type(value).__name__}")
        args = typing.get_args(hint)
        if (origin or hint) is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise CodecError(f"{where}: expected {len(args)} items, got {len(value)}")
            return tuple(_check(v, a, where, registered) for v, a in zip(value, args, strict=True))
        item = args[0] if args else Any
        items = [_check(v, item, where, registered) for v in value]
        return tuple(items) if (origin or hint) is tuple else items
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise CodecError(f"{where}: expected a map, got {type(value).__name__}")
        key_hint, value_hint = typing.get_args(hint) or (Any, Any)
        return {
            _check(k, key_hint, where, registered): _check(v, value_hint, where, registered)
            for k, v in value.items()
        }
    if isinstance(hint, type):
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if hint is int and isinstance(value, bool):
            raise CodecError(f"{where}: expected int, got bool")
        if not isinstance(value, hint):
            raise CodecError(f"{where}: expected {hint.__name__}, got {type(value).__name__}")
        return value
    raise CodecError(f"{where}: unsupported field type {hint}")
