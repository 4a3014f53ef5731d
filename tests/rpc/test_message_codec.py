"""MessageCodec: explicit schemas, no arbitrary objects, malformed bytes rejected."""

from __future__ import annotations

import enum
import pickle
from dataclasses import dataclass

import msgpack
import pytest

from millrace.errors import CodecError
from millrace.rpc.message_codec import MessageCodec


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Inner:
    name: str
    weight: float


@dataclass(frozen=True)
class Outer:
    count: int
    items: tuple[Inner, ...]
    color: Color
    note: str | None = None
    tags: dict[str, int] | None = None


@pytest.fixture
def codec() -> MessageCodec:
    c = MessageCodec()
    c.register(1, Inner)
    c.register(2, Outer)
    c.register(3, Color)
    return c


def test_nested_messages_round_trip(codec) -> None:
    message = Outer(3, (Inner("a", 1.5), Inner("b", 2)), Color.BLUE, None, {"x": 1})
    assert codec.decode(codec.encode(message)) == message


def test_plain_data_round_trips(codec) -> None:
    assert codec.decode(codec.encode({"a": [1, 2.5, "s", None, b"raw"]})) == {
        "a": [1, 2.5, "s", None, b"raw"]
    }


def test_unregistered_classes_do_not_encode(codec) -> None:
    @dataclass
    class Secret:
        x: int

    with pytest.raises(CodecError, match="not a registered message"):
        codec.encode(Secret(1))
    with pytest.raises(CodecError):
        codec.encode(lambda: None)


def test_unknown_type_id_is_rejected(codec) -> None:
    forged = msgpack.packb(msgpack.ExtType(1, msgpack.packb([99, "x"])))
    with pytest.raises(CodecError, match="unknown message type id 99"):
        codec.decode(forged)


def test_field_types_are_checked_on_decode(codec) -> None:
    forged = msgpack.packb(msgpack.ExtType(1, msgpack.packb([1, 42, 1.0])))  # name must be str
    with pytest.raises(CodecError, match=r"Inner\.name: expected str, got int"):
        codec.decode(forged)


def test_wrong_field_count_is_rejected(codec) -> None:
    forged = msgpack.packb(msgpack.ExtType(1, msgpack.packb([1, "only-one"])))
    with pytest.raises(CodecError, match="takes 2 fields"):
        codec.decode(forged)


def test_invalid_enum_member_is_rejected(codec) -> None:
    forged = msgpack.packb(msgpack.ExtType(2, msgpack.packb([3, "GREEN"])))
    with pytest.raises(CodecError, match="invalid Color member"):
        codec.decode(forged)


@pytest.mark.parametrize("data", [b"", b"\xc1", b"\x92\x01", pickle.dumps(Inner("a", 1.0))])
def test_garbage_and_pickles_are_rejected(codec, data) -> None:
    with pytest.raises(CodecError):
        codec.decode(data)


def test_registration_is_checked(codec) -> None:
    with pytest.raises(ValueError):
        codec.register(1, Color)
    with pytest.raises(TypeError):
        codec.register(10, int)


@dataclass(frozen=True)
class Pair:
    both: tuple[int, str]


def test_fixed_tuples_are_checked_per_position() -> None:
    codec = MessageCodec()
    codec.register(1, Pair)
    assert codec.decode(codec.encode(Pair((1, "a")))) == Pair((1, "a"))
    forged = msgpack.packb(msgpack.ExtType(1, msgpack.packb([1, ["a", 1]])))
    with pytest.raises(CodecError, match=r"Pair\.both"):
        codec.decode(forged)
