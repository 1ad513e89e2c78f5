"""The app factory: ``create_app(settings)`` builds everything; nothing happens at import time."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from app import __version__
from app.web import api, pages
from app.web.rendering import Renderer
from app.web.security import SecurityHeaders
from app.web.settings import Settings


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
    app.state.renderer = Renderer(settings.templates_dir)
    app.include_router(pages.router)
    app.include_router(api.router)
    app.mount("/static", StaticFiles(directory=settings.static_dir), name="static")
    app.add_middleware(SecurityHeaders)

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
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        return PlainTextResponse(f"{exc.status_code}: {exc.detail}", status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> PlainTextResponse:
        # Never a stack trace to the client; the server log keeps it.
        return PlainTextResponse("500: internal error, logged on the server", status_code=500)

    return app
