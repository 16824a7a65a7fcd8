"""How the HTTP face says no: the CLI's and MCP's error codes, as HTTP statuses.

Every refusal has the body the CLI prints with ``--json``: ``{"error": {"code", "message",
"hint"}}``, with the same code and words, so a script handles the three faces alike. The
status follows the class, as the CLI's exit code does: bad input 400 (an unknown task or
agent 404, a payload or body past the fleet's caps 413), a conflict with the fleet's state
409, a store that cannot be used right now 503. Anything unexpected is a 500 with no detail
(the traceback goes to the server's log, never to the client).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from shoal._log import get_logger
from shoal.errors import (
    AddressUnavailable,
    BadInput,
    Conflict,
    ShoalError,
    StoreDamaged,
    StoreError,
    StoreUnavailable,
    TooLarge,
    UnknownAgent,
    UnknownSchedule,
    UnknownTask,
)

__all__ = ["STATUS", "error_body", "install", "status_for"]

log = get_logger("shoal.web")

#: The HTTP status of each error class; the nearest listed class wins.
STATUS: dict[type[ShoalError], int] = {
    TooLarge: 413,
    UnknownTask: 404,
    UnknownAgent: 404,
    UnknownSchedule: 404,
    BadInput: 400,
    Conflict: 409,
    StoreUnavailable: 503,
    StoreDamaged: 503,
    StoreError: 500,
    AddressUnavailable: 500,
    ShoalError: 500,
}


#: Codes for the refusals the web library makes itself (no route, wrong method, bad body).
_HTTP_CODES = {
    400: "bad_input",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
}


def status_for(error: ShoalError) -> int:
    for cls in type(error).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def error_body(code: str, message: str, hint: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "hint": hint}}


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for problem in exc.errors()[:5]:
        where = ".".join(str(p) for p in problem.get("loc", ()) if p != "body") or "request"
        parts.append(f"{where}: {problem.get('msg', 'is not valid')}")
    return "; ".join(parts)


def install(app: FastAPI) -> None:
    """Add the handlers that turn shoal's errors (and FastAPI's) into the shared shape."""

    @app.exception_handler(ShoalError)
    async def shoal_error(request: Request, exc: ShoalError) -> JSONResponse:
        return JSONResponse({"error": exc.to_dict()}, status_code=status_for(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        detail: object = exc.detail
        if isinstance(detail, dict):
            body = {"error": detail}
        else:
            body = error_body(_HTTP_CODES.get(exc.status_code, "bad_request"), str(detail))
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(
            error_body(
                "bad_input",
                _validation_message(exc),
                "see the request's schema in the OpenAPI document: /api/v1/openapi.json",
            ),
            status_code=400,
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error serving %s %s", request.method, request.url.path)
        return JSONResponse(
            error_body("internal", "shoal failed unexpectedly; the server's log has the cause"),
            status_code=500,
        )
