"""The app factory: ``create_app(settings)`` builds everything; nothing happens at import time."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from app import __version__
from app.web import api, pages
from app.web.limits import RequestLimits
from app.web.security import SecurityHeaders
from app.web.settings import Settings

ROUTERS = (pages.router, api.router)


def allowed_methods(path: str) -> list[str]:
    """Every method any of our routes accepts on ``path`` (for a 405's ``Allow`` header)."""
    methods: set[str] = set()
    for router in ROUTERS:
        for route in router.routes:
            if isinstance(route, APIRoute) and route.path == path:
                methods |= route.methods or set()
    return sorted(methods)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    app = FastAPI(
        title="zero3-lab",
        version=__version__,
        summary="Budget every byte of a ZeRO-3 / FSDP training run: an exact per-rank memory ledger.",
        docs_url=None,  # FastAPI's docs load assets from a CDN; /docs serves installed ones
        redoc_url=None,
    )
    app.state.settings = settings
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=settings.static_dir), name="static")
    app.add_middleware(RequestLimits, max_query_chars=settings.max_query_chars, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(SecurityHeaders)  # added last, so outermost: limit responses carry the headers too

    @app.exception_handler(api.BadInput)
    async def bad_input(_: Request, exc: api.BadInput) -> JSONResponse:
        return api.bad_input_response(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(
            {
                "detail": [
                    {"loc": list(e.get("loc", [])), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                    for e in exc.errors()
                ]
            },
            status_code=422,
        )

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names only the first matching route's methods; a path may have several routes.
            headers["Allow"] = ", ".join(allowed_methods(request.url.path))
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)
        return PlainTextResponse(f"{exc.status_code}: {exc.detail}", status_code=exc.status_code, headers=headers)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> PlainTextResponse:
        # Never a stack trace to the client; the server log keeps it.
        return PlainTextResponse("500: internal error, logged on the server", status_code=500)

    return app
