"""Property-based fuzzing of the codec, the framing and the channel MAC (issue 9): decoding
any input never crashes the process and raises only Millrace errors (CodecError,
FrameSizeError, FrameMacError); what is encoded decodes to itself."""

from __future__ import annotations

import contextlib
import hashlib

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.errors import CodecError, FrameMacError, FrameSizeError, MillraceError
from millrace.rpc.tcp.channel_mac import ChannelMac
from millrace.rpc.tcp.framing import FrameDecoder, encode_frame
from millrace.rpc.tcp.handshake import ChannelKeys
from millrace.runtime.control_messages import control_message_codec

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

plain_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes_decode_or_fail_with_codec_error(data: bytes) -> None:
    codec = control_message_codec()
    with contextlib.suppress(CodecError):
        codec.decode(data)


@FUZZ
@given(
    st.recursive(
        st.binary(max_size=16).map(lambda b: msgpack.packb(b)),
        lambda inner: (
            st.tuples(st.integers(0, 127), inner).map(
                lambda pair: msgpack.packb(msgpack.ExtType(pair[0], pair[1]))
            )
            | st.lists(inner, max_size=3).map(
                lambda items: msgpack.packb([msgpack.ExtType(1, i) for i in items])
            )
        ),
        max_leaves=60,
    )
)
def test_nested_extension_values_decode_or_fail_with_codec_error(data: bytes) -> None:
    codec = control_message_codec()
    with contextlib.suppress(CodecError):
        codec.decode(data)


@FUZZ
@given(st.binary(min_size=1, max_size=512), st.integers(min_value=0, max_value=511))
def test_mutated_control_messages_decode_or_fail_with_codec_error(
    data: bytes, position: int
) -> None:
    from millrace.runtime.registration import RegisterTaskManager

    codec = control_message_codec()
    message = codec.encode(
        [0, 3, 1, "register_task_manager", [RegisterTaskManager("tm", "tcp://h:1/te", 2, 1)]]
    )
    mutated = bytearray(message)
    index = position % len(mutated)
    mutated[index] ^= data[0] or 0xFF
    mutated[index:index] = data[1:8]
    with contextlib.suppress(CodecError):
        codec.decode(bytes(mutated))


@FUZZ
@given(plain_values)
def test_plain_values_round_trip(value: object) -> None:
    codec = control_message_codec()
    assert codec.decode(codec.encode(value)) == value


@FUZZ
@given(
    st.lists(st.binary(max_size=300), max_size=8),
    st.lists(st.integers(min_value=1, max_value=97), min_size=1, max_size=20),
)
def test_frames_come_out_whole_whatever_the_read_boundaries(
    payloads: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(encode_frame(p, 300) for p in payloads)
    decoder, frames, position, turn = FrameDecoder(300), [], 0, 0
    while position < len(stream):
        step = cuts[turn % len(cuts)]
        frames += decoder.feed(stream[position : position + step])
        position, turn = position + step, turn + 1
    assert frames == payloads and decoder.buffered_bytes == 0


@FUZZ
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_random_streams_frame_or_fail_with_frame_size_error(chunks: list[bytes]) -> None:
    decoder = FrameDecoder(256)
    try:
        for chunk in chunks:
            for payload in decoder.feed(chunk):
                assert len(payload) <= 256
    except FrameSizeError:
        pass


KEYS = ChannelKeys(send=b"k" * 32, receive=b"k" * 32)  # one key both ways: a loop-back pair
LIMIT = 1024


def records(wire: bytes) -> list[bytes]:
    return FrameDecoder(ChannelMac(KEYS, LIMIT).record_limit_bytes).feed(wire)


@FUZZ
@given(st.lists(st.binary(max_size=400), min_size=1, max_size=12), st.data())
def test_channel_mac_accepts_its_records_and_refuses_any_change(
    payloads: list[bytes], data: st.DataObject
) -> None:
    sender, receiver = ChannelMac(KEYS, LIMIT), ChannelMac(KEYS, LIMIT)
    wire = sender.seal([encode_frame(p, LIMIT) for p in payloads])
    opened = [bytes(p) for record in records(wire) for p in receiver.open(record)]
    assert opened == payloads
    # One flipped bit anywhere in a sealed record: refused.
    sealed = bytearray(records(ChannelMac(KEYS, LIMIT).seal([encode_frame(b"x", LIMIT)]))[0])
    bit = data.draw(st.integers(min_value=0, max_value=len(sealed) * 8 - 1))
    sealed[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(FrameMacError):
        ChannelMac(KEYS, LIMIT).open(bytes(sealed))


def test_channel_mac_groups_a_burst_into_records_within_the_limit() -> None:
    frames = [encode_frame(bytes([i]) * 300, LIMIT) for i in range(10)]  # 3,040 bytes
    sealed = records(ChannelMac(KEYS, LIMIT).seal(frames))
    assert len(sealed) == 4  # 3 frames of 304 bytes fit 1,028, the 10th goes alone
    receiver = ChannelMac(KEYS, LIMIT)
    assert [bytes(p) for r in sealed for p in receiver.open(r)] == [f[4:] for f in frames]
    big = encode_frame(b"y" * LIMIT, LIMIT)  # a frame of the whole limit fits one record
    assert [
        bytes(p)
        for p in ChannelMac(KEYS, LIMIT).open(records(ChannelMac(KEYS, LIMIT).seal([big]))[0])
    ] == [big[4:]]


def test_channel_mac_refuses_a_replayed_or_reordered_record() -> None:
    sender, receiver = ChannelMac(KEYS, LIMIT), ChannelMac(KEYS, LIMIT)
    first = records(sender.seal([encode_frame(b"one", 32)]))[0]
    second = records(sender.seal([encode_frame(b"two", 32)]))[0]
    with pytest.raises(FrameMacError):
        receiver.open(second)  # out of order
    assert [bytes(p) for p in receiver.open(first)] == [b"one"]
    with pytest.raises(FrameMacError):
        receiver.open(first)  # replayed


def test_an_authentic_record_with_a_cut_frame_is_refused() -> None:
    body = encode_frame(b"abc", 32)[:-1]  # announces 3 bytes, carries 2
    mac = hashlib.blake2s(key=KEYS.send, digest_size=16)
    mac.update((0).to_bytes(8, "big") + body)
    with pytest.raises(FrameMacError, match="does not fit"):
        ChannelMac(KEYS, LIMIT).open(body + mac.digest())


def test_decode_errors_are_millrace_errors() -> None:
    assert issubclass(CodecError, MillraceError) and issubclass(FrameSizeError, MillraceError)
    assert issubclass(FrameMacError, MillraceError)
