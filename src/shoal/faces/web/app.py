"""The ASGI app of ``shoal serve`` and how it is served.

One FastAPI app holds every route: the JSON API under ``/api/v1`` (its OpenAPI document at
``/api/v1/openapi.json``, the browsable docs at ``/api/v1/docs``), the dashboard, the live
stream, ``/metrics`` and the static files. ``HostCheck`` wraps the whole app, so no route
-- static files and the live stream included -- answers a host name it was not started for.
Fleet calls block (a store transaction), so routes are plain ``def`` functions that FastAPI
runs on its thread pool, never on the event loop.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
from collections.abc import Callable
from pathlib import Path

import anyio
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from shoal import __version__
from shoal.faces.exposure import Exposure
from shoal.faces.web import actions, bulk, errors, live, pages
from shoal.faces.web.api import router as api_router
from shoal.faces.web.guard import BodyLimit, Guard, HostCheck
from shoal.faces.web.metrics import Metrics
from shoal.faces.web.metrics import router as metrics_router
from shoal.faces.web.schedules_api import router as schedules_router
from shoal.faces.web.views import PAGE_HEADERS
from shoal.fleet import Fleet

__all__ = ["MAX_HEADERS", "create_app", "serve"]

#: Every route module's router, in the order the app matches them. ``create_app`` adds
#: their routes themselves, made once at import, rather than ``include_router``: FastAPI
#: builds an included route's state again for each app (its dependencies, parameters and
#: response models, as pydantic types) at the app's first request -- 0.13 s of CPU for
#: these 49 routes, in every test that makes an app and in every hub's first answer. The
#: routers set their prefix, tags and route class themselves; nothing is added at
#: inclusion, so the routes, and the OpenAPI document, are the same either way.
_ROUTERS = (
    api_router,
    schedules_router,
    pages.router,
    actions.router,
    bulk.router,
    live.router,
    metrics_router,
)

#: The most bytes of request line and headers the server reads; past it the request is
#: refused (400) and the connection closed. A bearer token is under a hundred bytes.
MAX_HEADERS = 64 * 1024


def create_app(fleet: Fleet, exposure: Exposure, *, local_secret: str | None = None) -> FastAPI:
    """The whole web face over ``fleet``, answering the host names ``exposure`` allows.
    ``local_secret``: what proves the owner while the fleet is open (no token made; see
    ``guard``); without it, one nobody holds (``app.state.guard`` keeps it)."""
    app = FastAPI(
        title="shoal",
        version=__version__,
        summary="A work-stealing task coordinator for fleets of agents: the HTTP API.",
        openapi_url="/api/v1/openapi.json",
        docs_url=None,  # served below from vendored files, not a CDN
        redoc_url=None,
        lifespan=live.lifespan,
    )
    app.state.fleet = fleet
    app.state.exposure = exposure
    app.state.guard = Guard(fleet, exposure, local_secret)
    errors.install(app)
    for router in _ROUTERS:
        app.router.routes.extend(router.routes)
    app.state.metrics = Metrics(fleet)  # its counters start at the log's end
    app.mount("/static", StaticFiles(packages=[("shoal.faces.web", "static")]), name="static")
    app.add_api_route("/api/v1/docs", _docs, include_in_schema=False)
    app.add_middleware(BodyLimit)
    app.add_middleware(HostCheck, exposure=exposure)  # added last: runs first
    return app


def _docs() -> HTMLResponse:
    """The browsable API docs, from the vendored Swagger UI: FastAPI's default page loads
    it from a CDN, and a script fetched from elsewhere would run on the dashboard's origin
    (where it could read pages and their CSRF tokens with a signed-in admin's cookie)."""
    page = get_swagger_ui_html(
        openapi_url="/api/v1/openapi.json",
        title="shoal API",
        swagger_js_url="/static/swagger-ui-bundle.js",
        swagger_css_url="/static/swagger-ui.css",
        swagger_favicon_url="data:,",
    )
    page.headers.update(PAGE_HEADERS)
    return page


_TOKEN_IN_QUERY = re.compile(r"([?&]token=)[^&#\s]*")


class HideSecrets(logging.Filter):
    """Takes the secret out of a sign-in link's request line (``/login?token=…``) before
    uvicorn's access log writes it: the link is printed once, to its owner, and nowhere
    else."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN_IN_QUERY.sub(r"\1***", a) if isinstance(a, str) else a for a in record.args
            )
        return True


def serve(
    fleet: Fleet,
    exposure: Exposure,
    sock: socket.socket,
    *,
    log_level: str = "warning",
    tls: tuple[Path, Path] | None = None,
    local_secret: str | None = None,
    on_stop: Callable[[], None] | None = None,
) -> None:
    """Serve the app on the bound ``sock`` until stopped (Ctrl-C or SIGTERM); over HTTPS
    with ``tls`` (the certificate chain's file, the private key's file). ``local_secret``:
    the owner's sign-in secret while the fleet is open (``create_app``). ``on_stop`` runs
    once the server has shut down, before a stopping signal ends the process."""
    import uvicorn

    class Server(uvicorn.Server):
        # uvicorn raises the signal it caught again once it has stopped, which ends the
        # process before any code after serve() could run: the last word is said here.
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            try:
                await super().shutdown(sockets)
            finally:
                if on_stop is not None:
                    on_stop()

    certfile, keyfile = tls if tls is not None else (None, None)
    config = uvicorn.Config(
        create_app(fleet, exposure, local_secret=local_secret),
        # h11, not httptools: httptools reads a header of any size into memory (one client
        # could make the server hold gigabytes before any check); h11 stops at the limit.
        http="h11",
        h11_max_incomplete_event_size=MAX_HEADERS,
        log_level=log_level,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=3,
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
    )
    logging.getLogger("uvicorn.access").addFilter(HideSecrets())  # after the Config's setup
    with contextlib.closing(sock):
        anyio.run(lambda: Server(config).serve(sockets=[sock]))
