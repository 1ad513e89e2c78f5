"""Request limits, enforced before any routing: long query strings and large bodies never reach a route.

A pure ASGI middleware (not ``BaseHTTPMiddleware``) so the check costs a length comparison.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def _error(status: int, message: str) -> tuple[dict[str, object], dict[str, object]]:
    body = json.dumps({"detail": [{"loc": ["request"], "msg": message, "type": "limit"}]}).encode()
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    return start, {"type": "http.response.body", "body": body}


class RequestLimits:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_query_chars: int,
        max_body_bytes: int,
        query_chars_by_path: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.max_query = max_query_chars
        self.max_body = max_body_bytes
        # A few paths carry longer queries (``/compare`` holds two scenario links): their own cap.
        self.query_by_path = dict(query_chars_by_path or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_query = self.query_by_path.get(scope["path"], self.max_query)
        if len(scope["query_string"]) > max_query:
            await self._reject(send, 414, f"the query string is longer than {max_query:,} characters")
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit() or int(value) > self.max_body:
                    await self._reject(send, 413, f"the request body is larger than {self.max_body:,} bytes")
                    return
                break
        if scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        await self._guarded(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Count streamed (chunked) body bytes and answer 413 once they pass the limit."""
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise _TooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._reject(send, 413, f"the request body is larger than {self.max_body:,} bytes")
        except ClientDisconnect:
            # The client left before its body was complete: nobody is waiting for an answer, and a
            # 52-line traceback for an ordinary event would bury real errors in the log.
            pass

    @staticmethod
    async def _reject(send: Send, status: int, message: str) -> None:
        start, body = _error(status, message)
        await send(start)
        await send(body)


class _TooLarge(Exception):
    pass
