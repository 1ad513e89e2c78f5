"""Security headers on every response, as a plain ASGI middleware (cheap on the hot path)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from starlette.datastructures import URL
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
)
# Swagger UI sets inline styles on its own elements; scripts stay 'self' only.
DOCS_CSP = CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
_COMMON: list[tuple[bytes, bytes]] = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), *_COMMON]
_DOCS_HEADERS = [(b"content-security-policy", DOCS_CSP.encode()), *_COMMON]
_ERROR_BODY = b"500: internal error, logged on the server"  # the app's own 500 text
_ERROR_HEADERS = [
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"content-length", str(len(_ERROR_BODY)).encode()),
    *SECURITY_HEADERS,
]


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = _DOCS_HEADERS if scope["path"] == "/docs" else SECURITY_HEADERS
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = message.get("headers", [])
                if 300 <= message["status"] < 400:
                    headers = _relative_location(scope, headers)
                message["headers"] = [*headers, *extra]
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            # Starlette answers an unhandled error in ServerErrorMiddleware, which sits outside every user
            # middleware, so its 500 would go out without these headers. Answer it here instead, then
            # re-raise: ServerErrorMiddleware sees a response already started and only passes the error
            # on for uvicorn to log.
            if not started:
                await send({"type": "http.response.start", "status": 500, "headers": _ERROR_HEADERS})
                await send({"type": "http.response.body", "body": _ERROR_BODY})
            raise


def _relative_location(scope: Scope, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """An absolute ``Location`` naming the request's own host, cut to its path (and query).

    Starlette's slash redirects (``/static`` → ``/static/``) build an absolute URL from the request's
    ``Host`` header, so ``Host: evil.example`` would redirect to ``http://evil.example/static/`` (a
    poisoned cache or a phishing link). Our own redirects are path-only; a path-only one is correct
    whatever name the lab is reached by.
    """
    own_host = URL(scope=scope).netloc
    out = []
    for name, value in headers:
        if name.lower() == b"location":
            target = urlsplit(value.decode("latin-1"))
            if target.scheme in ("http", "https") and target.netloc == own_host:
                # One leading slash: "//x" would be a protocol-relative link to host x.
                path = "/" + target.path.lstrip("/")
                value = urlunsplit(("", "", path, target.query, target.fragment)).encode("latin-1")
        out.append((name, value))
    return out
