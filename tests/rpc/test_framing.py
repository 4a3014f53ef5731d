"""Length-prefixed framing: size limits on both sides, truncated and oversized frames."""

from __future__ import annotations

import pytest

from millrace.errors import ConnectionClosedError, FrameSizeError
from millrace.rpc.tcp.framing import FrameDecoder, encode_frame


def feed_in_chunks(data: bytes, chunk: int, limit: int = 1024) -> tuple[list[bytes], FrameDecoder]:
    decoder = FrameDecoder(limit)
    frames: list[bytes] = []
    for start in range(0, len(data), chunk):
        frames.extend(decoder.feed(data[start : start + chunk]))
    return frames, decoder


def test_frames_round_trip_in_order() -> None:
    data = encode_frame(b"one", 1024) + encode_frame(b"", 1024) + encode_frame(b"three", 1024)
    assert FrameDecoder(1024).feed(data) == [b"one", b"", b"three"]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64])
def test_frames_split_anywhere_across_reads_come_out_whole(chunk: int) -> None:
    payloads = [b"one", b"", b"x" * 300, b"three"]
    data = b"".join(encode_frame(p, 1024) for p in payloads)
    frames, decoder = feed_in_chunks(data, chunk)
    assert frames == payloads
    assert decoder.buffered_bytes == 0


def test_oversized_payload_is_refused_before_sending_naming_size_and_limit() -> None:
    with pytest.raises(FrameSizeError) as info:
        encode_frame(b"x" * 2048, 1024)
    assert (info.value.size_bytes, info.value.limit_bytes) == (2048, 1024)
    assert "2048 bytes exceeds rpc.framesize=1024" in str(info.value)


def test_oversized_incoming_frame_is_refused_from_its_header_alone() -> None:
    decoder = FrameDecoder(1024)
    assert decoder.feed(b"\x00\x00") == []
    with pytest.raises(FrameSizeError, match="incoming frame of 10000 bytes"):
        decoder.feed((10_000).to_bytes(4, "big")[2:])  # no payload ever comes


def test_frames_before_an_oversized_one_are_not_lost_by_the_check() -> None:
    decoder = FrameDecoder(1024)
    assert decoder.feed(encode_frame(b"fine", 1024)) == [b"fine"]
    with pytest.raises(FrameSizeError):
        decoder.feed((2048).to_bytes(4, "big"))


def test_raised_limit_applies_to_later_frames() -> None:
    decoder = FrameDecoder(16)
    decoder.limit_bytes = 4096
    assert decoder.feed(encode_frame(b"y" * 1000, 4096)) == [b"y" * 1000]


@pytest.mark.parametrize(
    ("data", "match"),
    [(b"", r"^connection closed$"), (b"\x00\x00", "inside"), (b"\x00\x00\x00\x05abc", "after")],
)
def test_end_of_stream_is_clean_only_between_frames(data: bytes, match: str) -> None:
    decoder = FrameDecoder(1024)
    assert decoder.feed(data) == []
    with pytest.raises(ConnectionClosedError, match=match):
        decoder.check_end()
