"""Absolute-form request targets (``GET http://host/path HTTP/1.1``) served as their origin form.

RFC 9112 §3.2.2: a server must accept the absolute form in requests (clients send it to proxies; a client may send
it to any server). uvicorn's h11 protocol passes the target through as the path, so the app would answer 404 for
``http://host/healthz``: this pure ASGI middleware takes the path (and its raw bytes) from the target's path part,
before routing or any limit reads it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

_SCHEMES = ("http://", "https://")


class AbsoluteFormTarget:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].lower().startswith(_SCHEMES):
            path = urlsplit(scope["path"]).path or "/"
            raw = scope.get("raw_path") or scope["path"].encode("latin-1")
            raw_path = urlsplit(raw).path or b"/"
            scope = {**scope, "path": path, "raw_path": raw_path}
        await self.app(scope, receive, send)
