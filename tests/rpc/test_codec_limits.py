"""The codec's nesting limit against hostile bytes (issue 9, case 1): nested extension values
fail to decode with CodecError instead of exhausting the C stack of the decoding thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass

import msgpack
import pytest

from millrace.errors import CodecError
from millrace.rpc.message_codec import MessageCodec
from tests.integration.helpers import ROOT

WAIT = 120.0  # seconds a child Python gets to import and decode
MAX_MESSAGE_DEPTH = 16  # millrace.rpc.message_codec.MAX_MESSAGE_DEPTH, as documented


@dataclass(frozen=True)
class Node:
    label: str
    child: Node | None = None


def node_codec() -> MessageCodec:
    codec = MessageCodec()
    codec.register(1, Node)
    return codec


def chain(depth: int) -> Node:
    node = Node("leaf")
    for i in range(depth - 1):
        node = Node(str(i), node)
    return node


def nested_extensions(depth: int, code: int = 1) -> bytes:
    """``depth`` msgpack extension values, each the whole body of the next: ~3 bytes a level."""
    data = msgpack.packb([1])
    for _ in range(depth):
        data = msgpack.packb(msgpack.ExtType(code, data))
    return data


def decode_in_small_thread(payload: bytes, stack_kib: int) -> subprocess.CompletedProcess[str]:
    """Decode ``payload`` with the control codec on a thread of ``stack_kib`` KiB, in a child
    Python (a crash there is a signal, not the end of this test run)."""
    script = textwrap.dedent(
        f"""
        import threading
        from millrace.runtime.control_messages import control_message_codec
        codec = control_message_codec()
        threading.stack_size({stack_kib} * 1024)
        def run():
            try:
                codec.decode({payload!r})
                print("decoded")
            except Exception as error:
                print(type(error).__name__, error)
        thread = threading.Thread(target=run)
        thread.start()
        thread.join(60)
        """
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT, cwd=ROOT
    )


@pytest.mark.parametrize("depth", [30, 233])
def test_nested_extensions_fail_to_decode_instead_of_crashing_a_small_thread(depth: int) -> None:
    payload = nested_extensions(depth)  # 233 levels: the ~700-byte frame of the issue
    outcome = decode_in_small_thread(payload, stack_kib=256)
    assert outcome.returncode == 0, (
        f"the decoding process died with {outcome.returncode} on {len(payload)} bytes of "
        f"{depth} nested extensions; stderr: {outcome.stderr[-500:]}"
    )
    assert outcome.stdout.startswith("CodecError"), outcome.stdout
    assert "nested deeper than 16 levels" in outcome.stdout


def test_messages_at_the_depth_limit_round_trip_and_deeper_ones_do_not_encode() -> None:
    codec = node_codec()
    deepest = chain(MAX_MESSAGE_DEPTH)
    assert codec.decode(codec.encode(deepest)) == deepest
    with pytest.raises(CodecError, match="16 levels"):
        codec.encode(chain(MAX_MESSAGE_DEPTH + 1))


def test_the_control_messages_nest_well_within_the_limit() -> None:
    from tests.rpc.message_depth import deepest_control_message

    name, depth = deepest_control_message()
    assert depth <= MAX_MESSAGE_DEPTH // 2, f"{name} nests {depth} registered messages"


def test_a_failed_decode_leaves_the_codec_usable_at_every_depth() -> None:
    codec = node_codec()
    good = codec.encode(chain(5))
    bad = nested_extensions(40)
    truncated = good[:-3]
    for payload in (bad, truncated, good + b"\x00", bad):
        with pytest.raises(CodecError):
            codec.decode(payload)
        assert codec.decode(good) == chain(5)


def test_the_documented_depth_limit_is_the_codecs() -> None:
    from millrace.rpc import message_codec

    assert message_codec.MAX_MESSAGE_DEPTH == MAX_MESSAGE_DEPTH
