"""Downloads made in one trip to the thread pool and streamed from the event loop.

Starlette iterates a plain iterator given to ``StreamingResponse`` in the thread pool, one trip per item, and
each trip waits in the pool's queue (anyio's limiter, first come first served) behind every request queued
before it. A receipt sent row by row took ~130 trips, sent in 16 KB chunks 5; under a mixed load of 64 clients
each trip waited hundreds of milliseconds, and a download took seconds (docs/performance.md, "A mixed room").

So a download route is ``async def``: it computes its whole answer in one trip (``run_in_threadpool`` of a
function that returns the chunks, the estimate behind it shared through :mod:`app.receipts.answers`), and
answers a ``StreamingResponse`` over :func:`sent`, an async iterator that Starlette iterates in the event loop.
The body still goes out chunk by chunk as the client reads it (chunked transfer encoding); a receipt is at most
a few hundred KB.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence

CHUNK_CHARS = 16 * 1024


def chunked(pieces: Iterable[str], size: int = CHUNK_CHARS) -> list[str]:
    """All of ``pieces`` joined into chunks of about ``size`` characters, made now (in the thread that calls it)."""
    chunks: list[str] = []
    batch: list[str] = []
    length = 0
    for piece in pieces:
        batch.append(piece)
        length += len(piece)
        if length >= size:
            chunks.append("".join(batch))
            batch, length = [], 0
    if batch:
        chunks.append("".join(batch))
    return chunks


async def sent(chunks: Sequence[str]) -> AsyncIterator[str]:
    """The chunks as an async iterator, for ``StreamingResponse`` to send from the event loop: no trip to the
    thread pool per chunk."""
    for chunk in chunks:
        yield chunk
