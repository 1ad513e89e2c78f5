"""Settings, read from the environment only when the app factory asks for them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from starlette.requests import Request

from app.receipts.url import DEFAULT_BASE_URL, check_base_url
from app.trace.queue import check_queue_url, queue_url
from app.trace.store import default_trace_cache, trace_cache_from_env
from app.web.http.assets import STATIC_DIR


@dataclass(frozen=True, slots=True)
class Settings:
    static_dir: Path = STATIC_DIR
    max_query_chars: int = 2048
    # /compare, /compare.json, /compare.csv carry two canonical queries (each up to 2,048 characters,
    # at most three times as long once percent-encoded inside a=…&b=…): their own, wider cap.
    max_compare_query_chars: int = 2 * 3 * 2048 + len("a=&b=")
    max_body_bytes: int = 64 * 1024
    # Where users reach the lab (``https://lab.example.org`` or ``…/prefix``), checked and without a
    # trailing "/": the base of the receipts' absolute ``url``. None: each request's own base URL.
    public_url: str | None = None
    # The page's trace jobs (app/web/routes/trace_jobs.py, docs/trace-jobs.md): the SQLite file the web workers
    # share (created on the first trace), the task queue (app/trace/queue.py; "": the SQLite file queue.sqlite3
    # beside the cache), each trace's time limit, and the traces the queue holds.
    trace_cache: Path = field(default_factory=default_trace_cache)
    trace_queue_url: str = ""
    trace_timeout_s: float = 300.0
    trace_queue: int = 8
    # Threads that run the (CPU-bound, plain ``def``) routes. Every one of them wants the GIL, so more
    # than a few only adds switching: the workshop benchmark served 54 live updates a second on 40
    # threads (anyio's default), 60 on 8, 67 on 4 and 64 on 1 (docs/performance.md).
    threads: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.threads <= 64:
            raise ValueError(f"threads = {self.threads} is out of bounds (1 … 64)")
        if self.public_url is not None:
            object.__setattr__(self, "public_url", check_base_url(self.public_url))
        if self.trace_queue_url:
            check_queue_url(self.trace_queue_url)
        else:
            object.__setattr__(
                self, "trace_queue_url", f"sqlite:///{(self.trace_cache.parent / 'queue.sqlite3').resolve()}"
            )

    @classmethod
    def from_env(cls) -> Settings:
        """``ZERO3_LAB_STATIC`` overrides the static assets folder; ``ZERO3_LAB_PUBLIC_URL`` sets
        :attr:`public_url` (a value that is not a plain http(s) base URL stops the app at start);
        ``ZERO3_LAB_TRACE_CACHE`` moves the traces' SQLite file; ``ZERO3_LAB_QUEUE`` names the trace queue
        (:func:`app.trace.queue.queue_url`: a value it does not take stops the app at start, naming it)."""
        static_dir = Path(os.environ.get("ZERO3_LAB_STATIC", cls().static_dir))
        public = os.environ.get("ZERO3_LAB_PUBLIC_URL", "").strip()
        trace_cache = trace_cache_from_env()
        queue = queue_url(trace_cache.parent)
        try:
            return cls(static_dir=static_dir, public_url=public or None, trace_cache=trace_cache, trace_queue_url=queue)
        except ValueError as exc:
            raise ValueError(f"ZERO3_LAB_PUBLIC_URL: {exc}") from None


def public_base_url(request: Request) -> str:
    """Where the lab is served, for the receipts' absolute ``url``.

    ``ZERO3_LAB_PUBLIC_URL`` when set: behind a proxy, and wherever the Host header is not to be
    trusted, set it. Otherwise the request's base URL (scheme, Host header, root path): Starlette
    already replaces a malformed Host header with the server's address, and anything that is still
    not a plain ``host[:port]`` base (:func:`check_base_url`) gives ``http://127.0.0.1:8000``.
    """
    settings = getattr(request.app.state, "settings", None)
    if isinstance(settings, Settings) and settings.public_url:
        return settings.public_url
    try:
        return check_base_url(str(request.base_url))
    except ValueError:
        return DEFAULT_BASE_URL
