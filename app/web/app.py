"""The app factory: ``create_app(settings)`` builds everything; nothing happens at import time."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.routing import Match

from app import __version__
from app.trace.queue import release
from app.web.http.errors import validation_error_response
from app.web.http.limits import RequestLimits
from app.web.http.security import SecurityHeaders
from app.web.http.settings import Settings
from app.web.http.shutdown import QuietShutdownCancel
from app.web.http.static import VersionedStaticFiles
from app.web.http.target import AbsoluteFormTarget
from app.web.routes import api, compare, downloads, layouts, pages, reconcile, trace_jobs

ROUTERS = (
    pages.router,
    api.router,
    downloads.router,
    compare.router,
    layouts.router,
    reconcile.router,
    trace_jobs.router,
)


def allowed_methods(request: Request) -> list[str]:
    """Every method the app answers on this path. Starlette's 405 names only the first route that
    matched the path, and ``/api/estimate`` is two routes (GET reads the query, POST the body)."""
    methods: set[str] = set()
    for router in ROUTERS:
        for route in router.routes:
            if route.matches(request.scope)[0] is Match.PARTIAL:
                methods |= getattr(route, "methods", None) or set()
    return sorted(methods)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Everything built by start-up (modules, templates, tables) lives as long as the process: moved
    # out of the collector's reach, it no longer lengthens each full collection, which paused every
    # request for ~65 ms under a workshop's load (docs/performance.md).
    gc.collect()
    gc.freeze()
    # FastAPI runs the plain ``def`` routes on anyio's thread pool: size it for CPU-bound work (Settings).
    anyio.to_thread.current_default_thread_limiter().total_tokens = app.state.settings.threads
    yield
    queue = getattr(app.state, "trace_queue", None)
    if queue is not None:  # made on first use (routes/trace_jobs.queue_for): its storage's connections close with us
        release(queue.huey)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    app = FastAPI(
        title="zero3-lab",
        version=__version__,
        summary="Budget every byte of a ZeRO-3 / FSDP training run: an exact per-rank memory ledger.",
        docs_url=None,  # FastAPI's docs load assets from a CDN; /docs serves installed ones
        redoc_url=None,
        lifespan=_lifespan,
    )
    app.state.settings = settings
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", VersionedStaticFiles(directory=settings.static_dir), name="static")
    # Middleware added last runs first: a request cut off at shutdown logged in one line, an absolute-form
    # target read as its path, then security headers (every
    # answer carries them, the limits' 413/414 included), then the request limits, then compression of what
    # the app wrote.
    # Level 3: a 53 KB fragment compresses to 12.7 KB in 0.22 ms, against 11.2 KB in 0.79 ms at level 6
    # (9, Starlette's default: 1.07 ms). The CPU is what a busy worker runs short of; 1.5 KB is not.
    app.add_middleware(GZipMiddleware, minimum_size=500, compresslevel=3)
    app.add_middleware(
        RequestLimits,
        max_query_chars=settings.max_query_chars,
        max_body_bytes=settings.max_body_bytes,
        query_chars_by_path=dict.fromkeys(compare.PATHS, settings.max_compare_query_chars),
    )
    app.add_middleware(SecurityHeaders)
    app.add_middleware(AbsoluteFormTarget)
    app.add_middleware(QuietShutdownCancel)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_error_response(exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        if request.url.path.startswith("/api/") or isinstance(exc.detail, list):  # a list: the lab's 422 detail
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)
        return PlainTextResponse(f"{exc.status_code}: {exc.detail}", status_code=exc.status_code, headers=headers)

    return app
