"""A request cut off by the server's graceful-shutdown deadline costs one log line, not a traceback.

On SIGTERM uvicorn gives in-flight requests ``graceful_shutdown_s`` to finish, then cancels their tasks
(``Task cancelled, timeout graceful shutdown exceeded``); its own wrapper logs the ``CancelledError`` as
"Exception in ASGI application" with a whole traceback. A client that stalls mid-body or stops reading is the usual
reason and not a fault of the lab: this outermost middleware names the request in one warning line and lets the
task end. Any other cancellation or exception passes through as before.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger("zero3_lab.shutdown")
_SHUTDOWN = "graceful shutdown"  # uvicorn's cancel message: "Task cancelled, timeout graceful shutdown exceeded"


class QuietShutdownCancel:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        except asyncio.CancelledError as exc:
            if not any(_SHUTDOWN in str(arg) for arg in exc.args):
                raise
            path = scope.get("path", "")[:200]
            logger.warning("%s %s: cut off at shutdown (the client had not sent its whole request or had stopped "
                           "reading the answer)", scope.get("method", ""), path)  # fmt: skip
