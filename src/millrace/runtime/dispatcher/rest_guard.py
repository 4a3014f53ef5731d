"""RestGuard: the REST API's checks that run before any request body is read (issue 9, case 5).

A pure ASGI middleware in front of the FastAPI app:

1. **Token first.** Writes (any method but GET, HEAD and OPTIONS) and savepoint and rescaling
   status reads need ``Authorization: Bearer <token>``; the header's raw bytes are compared with
   the token in constant time (any byte sequence is just a wrong token). Without it the answer is
   401 before a byte of the body is read, so an unauthenticated client cannot make the server
   buffer or parse anything. So ``POST /jobs/{jobid}/stop`` needs it, as every write does,
   and every other read, ``GET /jobmanager/logs/{name}`` included, is open, as in Flink.
2. **Bodies capped while they stream.** A ``Content-Length`` above the route's cap is answered
   413 at once; a body that grows past it while being read (chunked) fails with 413 as soon as
   it does. ``POST /jobs`` takes up to ``rpc.framesize`` bytes, every other request 64 KiB.

Errors come as Flink's ``{"errors": [message]}``.

Threading:
    uvicorn's event loop.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import HTTPException

__all__ = ["JSON_BODY_LIMIT_BYTES", "RestGuard", "needs_token"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JSON_BODY_LIMIT_BYTES = 64 * 1024  # every body but a submitted JobGraph
_OPEN_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_PROTECTED_READS = re.compile(r"^/jobs/[^/]+/(savepoints|rescaling)/[^/]+/?$")


def _error(status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    body = json.dumps({"errors": [message]}).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return status, head + (headers or []), body


def needs_token(method: str, path: str) -> bool:
    """Whether a request (``METHOD``, path or path template) must carry the token: every write,
    and the savepoint status reads."""
    return method not in _OPEN_METHODS or bool(_PROTECTED_READS.match(path))


class RestGuard:
    """Token check and body caps ahead of ``app`` (see the module docstring).

    Args:
        app: The FastAPI application.
        token: The bearer token (``rest_token``).
        job_body_limit_bytes: Cap of ``POST /jobs`` (``rpc.framesize``).
    """

    def __init__(self, app: ASGIApp, token: str, job_body_limit_bytes: int) -> None:
        self.app = app
        self._token = token.encode()
        self._job_limit = job_body_limit_bytes

    def needs_token(self, method: str, path: str) -> bool:
        """Whether a request must carry the token (:func:`needs_token`)."""
        return needs_token(method, path)

    def body_limit(self, method: str, path: str) -> int:
        """The most body bytes a request may send."""
        if method == "POST" and path.rstrip("/") == "/jobs":
            return self._job_limit
        return JSON_BODY_LIMIT_BYTES

    def authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """Whether ``Authorization`` is ``Bearer <token>`` (bytes, constant time)."""
        for name, value in headers:
            if name.lower() == b"authorization":
                scheme, _, given = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(
                    given.strip(), self._token
                )
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        headers = scope.get("headers", [])
        if self.needs_token(method, path) and not self.authorized(headers):
            await self._respond(
                send,
                *_error(
                    401,
                    "this request needs 'Authorization: Bearer <token>' (rest_token of the "
                    "cluster secret)",
                    [(b"www-authenticate", b"Bearer")],
                ),
            )
            return
        limit = self.body_limit(method, path)
        declared = next((v for n, v in headers if n.lower() == b"content-length"), None)
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await self._respond(send, *_error(413, f"a body of at most {limit} bytes, here"))
            return
        received = 0

        async def capped() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, f"a body of at most {limit} bytes, here")
            return message

        await self.app(scope, capped, send)

    @staticmethod
    async def _respond(
        send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
