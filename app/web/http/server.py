"""``zero3-lab serve``: uvicorn on the app factory (no app is built at import time)."""

from __future__ import annotations

import asyncio
import functools
import os
import socket
from typing import Annotated

import h11
import uvicorn
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.web.http.security import SECURITY_HEADERS

# An idle keep-alive connection is closed after this long (uvicorn's default, stated here).
KEEP_ALIVE_S = 5


_SECONDS = Field(ge=1, le=600, description="whole seconds, as uvicorn's graceful-shutdown timeout takes them")


class Deadlines(BaseModel):
    """The server's two deadlines, each from its environment variable or its default. The environment
    reaches every worker process, so every worker keeps the same deadlines.

    * ``graceful_shutdown_s`` (``ZERO3_LAB_GRACEFUL_SHUTDOWN_S``, default 5): on SIGTERM, in-flight requests
      get this long to finish; then they are cancelled and the process exits. Without it uvicorn waits
      forever for a client that stalls mid-body or stops reading.
    * ``request_receive_s`` (``ZERO3_LAB_REQUEST_RECEIVE_S``, default 10): a whole request (line, headers
      and body, at most 64 KiB) must arrive within this long of the connection opening or of the previous
      response ending; uvicorn has no such setting.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    graceful_shutdown_s: Annotated[int, _SECONDS] = 5
    request_receive_s: Annotated[int, _SECONDS] = 10

    @classmethod
    def from_env(cls) -> Deadlines:
        """The deadlines the environment sets; ``ValueError`` naming the variable and its range otherwise."""
        raw = {name: os.environ.get(f"ZERO3_LAB_{name.upper()}", "").strip() for name in cls.model_fields}
        try:
            return cls.model_validate({name: value for name, value in raw.items() if value})
        except ValidationError as exc:
            name = str(exc.errors()[0]["loc"][0])
            raise ValueError(f"ZERO3_LAB_{name.upper()} = {raw[name][:32]!r}: whole seconds from 1 to 600") from None


@functools.cache
def deadlines() -> Deadlines:
    """This process's deadlines, read once (``serve`` has already refused a bad value before any worker starts)."""
    return Deadlines.from_env()


class LabH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the two things it has no setting for.

    * A deadline for receiving each request. uvicorn times out only a keep-alive connection idle after a
      response, and any byte resets that timer: a client that connects and sends nothing, trickles a
      header byte every few seconds (slowloris) or stalls mid-body would hold its connection forever.
    * The security headers on uvicorn's own 400 (a malformed request line or header): uvicorn writes it
      itself, below the ASGI app, so ``SecurityHeaders`` never sees it.
    """

    _receive_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # uvicorn sets TCP_NODELAY only in its single-process mode: with --workers N, Nagle's algorithm
        # held every response after a connection's first for ~44 ms (uvicorn issue #3149).
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
        self._arm_receive_timer()

    def on_response_complete(self) -> None:
        self._arm_receive_timer()  # before super(): it may start a pipelined request, which needs a deadline
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._receive_timer is not None:
            self._receive_timer.cancel()
        super().connection_lost(exc)

    def _arm_receive_timer(self) -> None:
        if self._receive_timer is not None:
            self._receive_timer.cancel()
        self._receive_timer = self.loop.call_later(deadlines().request_receive_s, self._receive_timeout)

    def _receive_timeout(self) -> None:
        # IDLE: no whole request line and headers yet; SEND_BODY: the body is not all here. Closing
        # makes the app's next receive() an http.disconnect, which RequestLimits ends quietly.
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own send_400_response, plus SECURITY_HEADERS and a content-length.
        body = msg.encode("ascii")
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *SECURITY_HEADERS,
        ]
        events = (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        )
        self.transport.write(b"".join(self.conn.send(event) or b"" for event in events))
        self.transport.close()


def serve(
    host: str = "127.0.0.1", port: int = 8000, workers: int = 1, reload: bool = False, access_log: bool = True
) -> int:
    """Run the lab; raises ``ValueError`` (before anything starts) when a deadline's variable is out of bounds."""
    graceful = deadlines().graceful_shutdown_s
    uvicorn.run(
        "app.web.app:create_app",
        factory=True,  # each worker process builds its own app
        host=host,
        port=port,
        workers=workers,
        reload=reload,
        http=LabH11Protocol,
        timeout_graceful_shutdown=graceful,
        timeout_keep_alive=KEEP_ALIVE_S,
        proxy_headers=False,
        server_header=False,
        log_level="info",
        access_log=access_log,
    )
    return 0
