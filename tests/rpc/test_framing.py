"""Length-prefixed framing: size limits on both sides, truncated and oversized frames."""

from __future__ import annotations

import asyncio

import pytest

from millrace.errors import FrameSizeError
from millrace.rpc.tcp.framing import ConnectionClosedError, encode_frame, read_frame


def reader_of(data: bytes, eof: bool = True) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    if eof:
        reader.feed_eof()
    return reader


def read(data: bytes, limit: int = 1024):
    return asyncio.run(_read_all(data, limit))


async def _read_all(data: bytes, limit: int) -> list[bytes]:
    reader = reader_of(data)
    frames = []
    while True:
        try:
            frames.append(await read_frame(reader, limit))
        except ConnectionClosedError:
            return frames


def test_frames_round_trip_in_order() -> None:
    data = encode_frame(b"one", 1024) + encode_frame(b"", 1024) + encode_frame(b"three", 1024)
    assert read(data) == [b"one", b"", b"three"]


def test_oversized_payload_is_refused_before_sending_naming_size_and_limit() -> None:
    with pytest.raises(FrameSizeError) as info:
        encode_frame(b"x" * 2048, 1024)
    assert (info.value.size_bytes, info.value.limit_bytes) == (2048, 1024)
    assert "2048 bytes exceeds rpc.framesize=1024" in str(info.value)


def test_oversized_incoming_frame_is_refused_without_reading_it() -> None:
    async def scenario() -> None:
        reader = reader_of((10_000).to_bytes(4, "big"), eof=False)  # no payload ever comes
        with pytest.raises(FrameSizeError, match="incoming frame of 10000 bytes"):
            await asyncio.wait_for(read_frame(reader, 1024), timeout=5)

    asyncio.run(scenario())


@pytest.mark.parametrize("data", [b"\x00\x00", b"\x00\x00\x00\x05abc"])
def test_truncated_frame_is_a_closed_connection(data: bytes) -> None:
    async def scenario() -> None:
        with pytest.raises(ConnectionClosedError, match=r"inside|after"):
            await read_frame(reader_of(data), 1024)

    asyncio.run(scenario())
