"""Clients survive any reply (issue 9, case 7): a malformed reply fails the call it answers, at
once, and nothing else; a malformed lookup answer fails the connect at once."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any, Protocol

import pytest

from millrace.config import Configuration
from millrace.errors import RecipientUnreachableError
from millrace.rpc import RpcEndpoint, RpcGateway
from millrace.rpc.tcp.connection import FOUND, LOOKUP
from millrace.rpc.tcp.tcp_rpc_service import TcpRpcService
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.control_messages import control_message_codec

WAIT = 10.0
SECRET = b"client-replies-test-secret-01234"
# Long lookups and asks: a client that waits them out instead of failing at once is caught by
# the tests' shorter waits.
CONF = Configuration({"rpc.lookup-timeout": "30 s", "rpc.ask-timeout": "60 s"})


class PoisonedError(Exception):
    """Claims to be a builtin ValueError and carries an attribute no exception can take."""


PoisonedError.__module__ = "builtins"
PoisonedError.__qualname__ = "ValueError"


class LaterGateway(RpcGateway, Protocol):
    def poisoned(self) -> Future[int]: ...

    def fine(self) -> Future[int]: ...

    def release(self) -> None: ...


class Later(RpcEndpoint, LaterGateway):
    """Answers both calls only on ``release``, one right after the other (one read, mostly)."""

    def __init__(self, service: TcpRpcService) -> None:
        super().__init__(service, "later")
        self.waiting: list[tuple[Future[int], BaseException | int]] = []

    def poisoned(self) -> Future[int]:
        error = PoisonedError("bad reply")
        error.__dict__["__class__"] = "not a class"  # travels as a plain attribute
        reply: Future[int] = Future()
        self.waiting.append((reply, error))
        return reply

    def fine(self) -> Future[int]:
        reply: Future[int] = Future()
        self.waiting.append((reply, 42))
        return reply

    def release(self) -> None:
        for reply, outcome in self.waiting:
            if isinstance(outcome, BaseException):
                reply.set_exception(outcome)
            else:
                reply.set_result(outcome)


class ShortLookupAnswers(TcpRpcService):
    """A service of another version: its lookup answers lack a field."""

    def _on_message(self, connection: Any, message: list[Any]) -> None:
        if message[0] == LOOKUP:
            connection.send([FOUND, message[1], 1])
            return
        super()._on_message(connection, message)


def make(name: str, kind: type[TcpRpcService] = TcpRpcService) -> TcpRpcService:
    return kind(
        name, security=TransportSecurity(SECRET), codec=control_message_codec(), configuration=CONF
    )


@pytest.fixture
def services() -> Iterator[list[TcpRpcService]]:
    started: list[TcpRpcService] = []
    yield started
    for service in started:
        service.close_async().exception(timeout=WAIT)


@pytest.mark.parametrize("run", range(3))  # the replies share a read most times, not always
def test_a_malformed_error_reply_fails_its_call_and_spares_the_others(services, run) -> None:
    server, client = make("server"), make("client")
    services += [client, server]
    endpoint = Later(server)
    endpoint.start()
    gateway = client.connect(endpoint.address, LaterGateway).result(WAIT)
    poisoned, fine = gateway.poisoned(), gateway.fine()
    endpoint.call_async(lambda: None).result(WAIT)  # both asks are waiting now
    gateway.release()
    assert fine.result(WAIT) == 42  # the valid reply right behind the malformed one
    with pytest.raises(Exception, match="bad reply"):
        poisoned.result(WAIT)


def test_a_short_lookup_answer_fails_the_connect_at_once(services) -> None:
    server, client = make("odd-server", ShortLookupAnswers), make("client")
    services += [client, server]
    with pytest.raises(RecipientUnreachableError, match="malformed lookup answer"):
        client.connect(f"tcp://{server.authority}/anything", LaterGateway).result(WAIT)
