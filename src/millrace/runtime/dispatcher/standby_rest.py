"""The REST API of a standby JobManager (high availability): every request is redirected to the
leader's REST API, whose URL the leader publishes in ZooKeeper (``rest_server``); while no
JobManager leads, 503 with ``Retry-After``. A client pointed at any JobManager of the cluster
therefore reaches the leader (Flink's standby web frontends redirect the same way)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

__all__ = ["create_standby_rest_app"]

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def create_standby_rest_app(leader_url: Callable[[], str | None]) -> FastAPI:
    """The standby's app.

    Args:
        leader_url: The leader's REST URL (``http(s)://host:port``), or None while none leads;
            read at each request (any thread).

    Returns:
        An app answering every path and method with 307 to the same path and query at the
        leader (307 keeps the method and the body), or 503 while no JobManager leads.
    """
    app = FastAPI(title="Millrace REST API (standby JobManager)", openapi_url=None, docs_url=None)

    @app.api_route("/{path:path}", methods=_METHODS)
    async def to_the_leader(path: str, request: Request) -> Response:
        leader = leader_url()
        if leader is None:
            return JSONResponse(
                {"errors": ["no JobManager leads now (standby); retry shortly"]},
                status_code=503,
                headers={"Retry-After": "1"},
            )
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"{leader}/{path}{query}", status_code=307)

    return app
