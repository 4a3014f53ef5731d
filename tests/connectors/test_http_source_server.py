"""The HttpSource's endpoint on a real uvicorn server: 202 only with the records in the log, 503
(nothing stored, offsets unused) when the log cannot be written, the token checked, bodies
capped, and the answers for a body without records or an unknown source.
"""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from millrace.connectors.http_source_log import list_segments
from millrace.connectors.http_source_server import HttpIngestServer
from tests.waiting import WAIT, result_within, wait_until

TOKEN = "a-token-of-the-http-source-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpIngestServer]:
    started = HttpIngestServer("127.0.0.1", 0, TOKEN, max_body_bytes=1024)
    started.log_for("orders", str(tmp_path / "log"))
    yield started
    started.close()


def _post(server: HttpIngestServer, body: bytes, headers: dict[str, str] = AUTH) -> httpx.Response:
    url = f"{server.url}/sources/orders/records"
    return httpx.post(url, content=body, headers=headers, timeout=10)


def test_accepted_records_are_in_the_log_when_answered(server, tmp_path) -> None:
    """Durable before answered, without a race: the log's append is held on its writer thread;
    meanwhile the server answers a later request (``GET /sources``, still at offset 0) but not
    the POST. Released, the 202 comes only after the append returned, and a second reader lists
    the segment with its bytes at once, with no wait."""
    log = server.logs["orders"]
    real_append = log.append
    entered, release = threading.Event(), threading.Event()
    returned: list[tuple[int, int]] = []  # appends that returned, in order

    def held_append(data: bytes, records: int) -> tuple[int, int]:
        entered.set()
        if not release.wait(WAIT):
            raise AssertionError("the append was never released")
        result = real_append(data, records)
        returned.append(result)
        return result

    log.append = held_append  # type: ignore[method-assign]  # the writer thread calls it
    with ThreadPoolExecutor(1, thread_name_prefix="client") as client:
        try:
            answer = client.submit(_post, server, b'{"id": 1}\n\n{"id": 2}\nnot json\n')
            wait_until(entered.is_set, what="the append on the writer thread", timeout=WAIT)
            later = httpx.get(f"{server.url}/sources", headers=AUTH, timeout=10)
            assert later.json() == {"sources": [{"name": "orders", "next_offset": 0}]}
            # the server answered a request sent after the POST: the POST was not answered
            assert not answer.done(), "answered while the append had not returned"
            assert returned == []
        finally:
            release.set()
        first = result_within(answer, WAIT, what="the answer to the POST")
        segments = list_segments(str(tmp_path / "log"))  # another reader, right away
        assert returned == [(0, 3)]  # the append had returned when the answer came
    assert first.status_code == 202
    assert first.json() == {"first_offset": 0, "next_offset": 3, "records": 3}
    assert [(s.first, s.end) for s in segments] == [(0, 3)]
    assert Path(segments[0].url).read_bytes() == b'{"id": 1}\n{"id": 2}\nnot json\n'
    assert _post(server, b'{"id": 3}').json()["first_offset"] == 3
    assert [(s.first, s.end) for s in list_segments(str(tmp_path / "log"))] == [(0, 3), (3, 4)]


def _stored(log_dir: Path) -> list[tuple[int, int, bytes]]:
    """The log's listed segments as (first, end, bytes), read by another reader."""
    return [(s.first, s.end, Path(s.url).read_bytes()) for s in list_segments(str(log_dir))]


def _assert_503(answer: httpx.Response, cause: str) -> None:
    assert answer.status_code == 503, answer.text
    (reason,) = answer.json()["errors"]
    assert reason.startswith("the log could not be written: ") and cause in reason, reason


def test_a_log_that_cannot_be_written_answers_503_and_the_server_serves_on(
    server, tmp_path
) -> None:
    """The log's directory is gone (moved away): the append fails for real, the client gets
    503 with the reason, nothing is stored and the offsets are not used; with the directory
    back, the server accepts again from the same offset."""
    log_dir, aside = tmp_path / "log", tmp_path / "aside"
    assert _post(server, b'{"id": 1}').status_code == 202
    log_dir.rename(aside)
    _assert_503(_post(server, b'{"id": 2}\n{"id": 3}'), "No such file or directory")
    assert not log_dir.exists()  # nothing written anywhere for the refused request
    aside.rename(log_dir)
    assert _stored(log_dir) == [(0, 1, b'{"id": 1}\n')]
    again = _post(server, b'{"id": 4}')
    assert again.status_code == 202
    assert again.json() == {"first_offset": 1, "next_offset": 2, "records": 1}
    assert _stored(log_dir) == [(0, 1, b'{"id": 1}\n'), (1, 2, b'{"id": 4}\n')]


def test_a_write_cut_short_answers_503_and_leaves_no_segment(tmp_path) -> None:
    """Disk full, for real: the process's file-size limit (RLIMIT_FSIZE; Python ignores
    SIGXFSZ, so the write fails with EFBIG) cuts the segment's write short after 64 KiB. The
    client gets 503, no segment lists the part written, the offsets are not used, and the next
    request is stored whole."""
    server = HttpIngestServer("127.0.0.1", 0, TOKEN, max_body_bytes=1 << 20)
    log_dir = tmp_path / "log"
    server.log_for("orders", str(log_dir))
    try:
        assert _post(server, b'{"id": 1}').status_code == 202
        big = b"".join(b'{"id": %d, "pad": "%s"}\n' % (i, b"x" * 90) for i in range(2000))
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))
        try:
            cut = _post(server, big)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        _assert_503(cut, "File too large")
        assert _stored(log_dir) == [(0, 1, b'{"id": 1}\n')]
        visible = sorted(n for n in os.listdir(log_dir) if not n.startswith("_"))
        assert visible == ["00000000000000000000-00000000000000000001.jsonl"]  # no .tmp left
        again = _post(server, big)
        assert again.json() == {"first_offset": 1, "next_offset": 2001, "records": 2000}
        assert _stored(log_dir) == [(0, 1, b'{"id": 1}\n'), (1, 2001, big)]
    finally:
        server.close()


def test_refusals(server, tmp_path) -> None:
    assert _post(server, b'{"id": 1}\n', headers={}).status_code == 401
    assert (
        _post(server, b'{"id": 1}\n', headers={"Authorization": "Bearer nope"}).status_code == 401
    )
    assert _post(server, b"x" * 1025).status_code == 413
    assert _post(server, b"\n  \n").status_code == 400
    assert _post(server, b"\xff\xfe\n").status_code == 400
    missing = httpx.post(f"{server.url}/sources/other/records", content=b"{}", headers=AUTH)
    assert missing.status_code == 404
    assert list_segments(str(tmp_path / "log")) == []  # nothing refused was stored


def test_sources_on_one_port_share_its_token(tmp_path) -> None:
    from millrace.connectors.http_source_server import ensure_server, stop_servers
    from millrace.errors import PipelineError

    try:
        first = ensure_server("127.0.0.1", 0, TOKEN, 1024)
        assert ensure_server("127.0.0.1", first.port, TOKEN, 1024) is first
        with pytest.raises(PipelineError, match="another token"):
            ensure_server("127.0.0.1", first.port, "a-different-token-here", 1024)
    finally:
        stop_servers()
