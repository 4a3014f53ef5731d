"""MessageCodec: control messages as msgpack with explicit schemas, no pickle (issue 3).

Every message class is registered under a stable numeric type id. A registered dataclass is
encoded as a msgpack extension holding ``[type_id, field values in declaration order]``; a
registered Enum as ``[type_id, member name]``. Decoding checks the type id, the field count and
each value against the field's annotation (int, float, str, bool, bytes, None, list, tuple,
dict, unions, NewTypes and other registered classes), so a peer cannot make this process build
arbitrary objects. Anything unregistered fails to encode with CodecError; user code travels
only inside job artifacts, never through this codec.

Limits, so that no input can exhaust the decoding thread (issue 9):

* size: bounded by the frame (``rpc.framesize``; msgpack lengths cannot exceed the bytes given);
* nesting of registered messages: at most :data:`MAX_MESSAGE_DEPTH` (16) extension values inside
  one another (the control messages nest 4 deep). Each level is decoded by its own reusable
  ``msgpack.Unpacker``, whose parse stack lives on the heap, so decoding uses a few KiB of C
  stack whatever the input (``msgpack.unpackb`` puts a ~40 KiB parse stack on the C stack per
  call: a recursion through it is what crashed a thread of 1 MiB at ~25 levels). Deeper input
  fails with CodecError, and encoding refuses to produce it;
* nesting of lists and maps: at most 1024 (msgpack's own parse stack; not recursive in C).
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import types
import typing
from typing import Any

import msgpack

from millrace.errors import CodecError

__all__ = ["MAX_MESSAGE_DEPTH", "MessageCodec"]

_OBJECT = 1  # msgpack extension code of a registered dataclass
_ENUM = 2  # msgpack extension code of a registered enum member
MAX_MESSAGE_DEPTH = 16  # registered messages nested in one another, at most
_POOLED_BODY_BYTES = 64 * 1024  # larger bodies get a one-off Unpacker (no buffer kept)


class MessageCodec:
    """Registry of message classes and their msgpack encoding.

    Args:
        max_depth: Registered messages nested in one another, at most (see the module
            docstring); deeper input fails to decode and deeper values fail to encode.

    Threading:
        Register everything before use; encoding and decoding are then thread-safe (each
        thread encodes with its own ``msgpack.Packer`` and decodes nested messages with its own
        ``msgpack.Unpacker`` per level, reused: building one costs more than a small message).
    """

    def __init__(self, max_depth: int = MAX_MESSAGE_DEPTH) -> None:
        if max_depth < 1:
            raise ValueError(f"max_depth must be >= 1, got {max_depth}")
        self._max_depth = max_depth
        self._ids: dict[type, int] = {}
        self._classes: dict[int, type] = {}
        self._hints: dict[type, list[tuple[str, Any]]] = {}
        self._packers = threading.local()  # .idle: this thread's Packer when not in use
        # This thread's decoding state: .depth (extension levels being decoded), .unpackers
        # (one reusable Unpacker per level), .encode_depth.
        self._local = threading.local()

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
            packed: bytes = packer.pack(value)  # resets the packer's buffer on error too
            return packed
        except CodecError:
            raise
        except (TypeError, ValueError, OverflowError) as error:
            raise CodecError(f"cannot encode {type(value).__name__}: {error}") from error
        finally:
            packers.idle = packer

    def decode(self, data: bytes | memoryview) -> Any:
        """The value encoded in ``data``.

        Raises:
            CodecError: If ``data`` is not one msgpack value, names an unknown type id, nests
                registered messages deeper than ``max_depth``, or a field does not match its
                declared type. Nothing else: any input fails with CodecError alone.
        """
        try:  # the extension hook restores its depth counter whatever happens
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
        local = self._local
        depth = getattr(local, "encode_depth", 0)
        if depth >= self._max_depth:
            raise CodecError(
                f"{cls.__name__} is nested in {depth} registered messages; the codec accepts "
                f"{self._max_depth} levels"
            )
        local.encode_depth = depth + 1
        try:
            return msgpack.ExtType(_OBJECT, self.encode([type_id, *fields]))
        finally:
            local.encode_depth = depth

    def _unpack_body(self, data: bytes, depth: int) -> Any:
        """The msgpack value of an extension body at nesting level ``depth`` (0: outermost)."""
        if len(data) > _POOLED_BODY_BYTES:
            unpacker = self._new_unpacker(len(data))
            unpacker.feed(data)
            body = unpacker.unpack()
            if unpacker.tell() != len(data):
                raise CodecError(f"{len(data) - unpacker.tell()} bytes after an extension body")
            return body
        local = self._local
        unpackers: list[Any] | None = getattr(local, "unpackers", None)
        if unpackers is None:
            unpackers = local.unpackers = []
        while len(unpackers) <= depth:
            unpackers.append(self._new_unpacker(_POOLED_BODY_BYTES))
        unpacker = unpackers[depth]
        start = unpacker.tell()
        unpacker.feed(data)
        try:
            body = unpacker.unpack()
            used = unpacker.tell() - start
            if used != len(data):
                raise CodecError(f"{len(data) - used} bytes after an extension body")
        except BaseException:
            unpackers[depth] = self._new_unpacker(_POOLED_BODY_BYTES)  # may hold leftovers
            raise
        return body

    def _new_unpacker(self, max_buffer_bytes: int) -> Any:
        return msgpack.Unpacker(
            ext_hook=self._ext_hook,
            raw=False,
            strict_map_key=False,
            max_buffer_size=max(max_buffer_bytes, 1),
        )

    def _ext_hook(self, code: int, data: bytes) -> Any:
        local = self._local
        depth = getattr(local, "depth", 0)  # 0 on a thread's first extension
        if depth >= self._max_depth:
            raise CodecError(
                f"registered messages nested deeper than {self._max_depth} levels "
                "(MessageCodec max_depth)"
            )
        local.depth = depth + 1
        try:
            body = self._unpack_body(data, depth)
        finally:
            local.depth = depth
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
