"""The web dashboard: static pages served by the REST endpoint at ``/`` (Flink's web UI).

The dashboard is plain HTML, CSS and JavaScript ES modules shipped in the package
(``millrace/runtime/dispatcher/web/``, no build step); the browser reads the REST API itself
(``/overview``, ``/jobs/...``, ``/taskmanagers``, ``/jobmanager/...``) and refreshes by polling.

Paths: ``GET /`` (``index.html``) and ``GET /web/{asset}`` (the other files of that folder,
listed once at start: no other file can be named, so no path leaves the folder). Both are open
reads like every GET (the :class:`~millrace.runtime.dispatcher.rest_guard.RestGuard` lets them
through without the token); the dashboard's own writes (cancel, stop, savepoints) carry the
token the user types into the page. Neither path shadows an API path (the API has no ``/`` and
nothing under ``/web``) and neither is in the OpenAPI document. Every answer carries a
Content-Security-Policy that allows scripts, styles and requests to this origin only, so a job
name cannot bring in script even if the page had a bug.

Threading:
    Handlers run on uvicorn's event loop; the assets are read from the package once, at
    :func:`dashboard_router`.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

__all__ = ["ASSET_TYPES", "dashboard_assets", "dashboard_router"]

ASSET_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def dashboard_assets() -> dict[str, bytes]:
    """The dashboard's files by name (``index.html``, ``app.js``, ...), read from the package.

    Returns:
        File name -> content, for every file of the ``web`` folder whose suffix is in
        :data:`ASSET_TYPES`.

    Raises:
        FileNotFoundError: If the package was installed without its ``web`` folder.
    """
    folder = files("millrace.runtime.dispatcher").joinpath("web")
    assets = {
        entry.name: entry.read_bytes()
        for entry in folder.iterdir()
        if entry.is_file() and _suffix(entry.name) in ASSET_TYPES
    }
    if "index.html" not in assets:
        raise FileNotFoundError("millrace/runtime/dispatcher/web/index.html is not installed")
    return assets


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:] if dot > 0 else ""


def dashboard_router() -> APIRouter:
    """The routes of the dashboard: ``GET /`` and ``GET /web/{asset}``.

    Returns:
        A router to include in the REST app (outside its OpenAPI document).

    Raises:
        FileNotFoundError: If the assets are missing (see :func:`dashboard_assets`).
    """
    assets = dashboard_assets()
    router = APIRouter(include_in_schema=False)

    def answer(name: str) -> Response:
        return Response(assets[name], media_type=ASSET_TYPES[_suffix(name)], headers=dict(_HEADERS))

    @router.get("/")
    async def index() -> Response:
        return answer("index.html")

    @router.get("/web/{asset}")
    async def asset(asset: str) -> Response:
        if asset not in assets:
            raise HTTPException(404, f"no dashboard file {asset!r}")
        return answer(asset)

    return router
