"""The REST API's OpenAPI document with every error it can answer (``/openapi.json``).

FastAPI documents what each route returns; the errors come from three places it does not see:
the :class:`~millrace.runtime.dispatcher.rest_guard.RestGuard` (401 without the token, 413 for
a body over its cap), the routes' ``HTTPException`` (400 for a request it refuses, 404 for an
unknown job, vertex, checkpoint, TaskManager or log, 429 for too many savepoint requests), and
FastAPI's own 422. :func:`document_errors` adds each to the operations that can answer it, as
``{"errors": [message]}`` (:class:`~millrace.runtime.dispatcher.rest_job_models.ErrorResponse`),
so a client generated from the document, and schemathesis' status-code check, know them all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["document_errors"]

_ERROR_SCHEMA = {
    "title": "ErrorResponse",
    "type": "object",
    "properties": {"errors": {"type": "array", "items": {"type": "string"}}},
    "required": ["errors"],
}
_WITH_BODY = frozenset({"post", "put", "patch"})
_THROTTLED = ("/savepoints", "/stop")  # POSTs answered 429 when too many requests are pending


def document_errors(schema: dict[str, Any], needs_token: Callable[[str, str], bool]) -> None:
    """Add the error responses of every operation to ``schema`` (in place).

    Args:
        schema: The OpenAPI document FastAPI generated (``paths`` -> method -> operation).
        needs_token: ``needs_token(METHOD, path)`` of the RestGuard: operations that answer 401.

    Every operation may answer 400 (a refused request); those with path parameters 404; those
    behind the token 401; those with a body 413; a savepoint or stop trigger 429. Responses
    a route documents itself are kept.
    """
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault("ErrorResponse", _ERROR_SCHEMA)
    reference = {"$ref": "#/components/schemas/ErrorResponse"}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            errors = {"400": "the request is refused (the message says why)"}
            if "{" in path:
                errors["404"] = "no such job, vertex, checkpoint, TaskManager or file"
            if needs_token(method.upper(), path):
                errors["401"] = "no valid 'Authorization: Bearer <token>'"
            if method in _WITH_BODY:
                errors["413"] = "the body exceeds its cap"
            if method == "post" and path.endswith(_THROTTLED):
                errors["429"] = "too many savepoint requests in progress"
            responses = operation.setdefault("responses", {})
            content = {"application/json": {"schema": reference}}
            for status, description in errors.items():
                responses.setdefault(status, {"description": description, "content": content})
