"""Per-request cost of each route inside the app (no sockets), and a cProfile of one of them.

    .venv/bin/python tests/bench/inprocess.py [--requests 3000] [--profile fragment]

Drives the ASGI app directly with the same kind of random scenarios as ``scenarios.lua`` (a
different one per request), so the figures isolate the app's own work from uvicorn and the
network. The floor is a 404 for an unrouted path with the same query string. Each round runs
every route over the same requests in a shuffled order; the best round's median is reported.
It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.web.app import create_app
from tests.bench._scenarios import random_query

ROUTES: dict[str, tuple[str, bool]] = {
    "floor": ("/no-such-route", False),
    "estimate": ("/api/estimate", False),
    "fragment": ("/", True),
    "page": ("/", False),
}


async def call(app: Any, path: str, hx: bool, query: str) -> int:
    """One GET through the ASGI app; its status."""
    headers = [(b"host", b"bench")] + ([(b"hx-request", b"true")] if hx else [])
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": query.encode(), "headers": headers,
        "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "root_path": "",
    }  # fmt: skip
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def run(app: Any, route: str, queries: list[str]) -> list[float]:
    path, hx = ROUTES[route]
    times = []
    for q in queries:
        t = time.perf_counter()
        status = await call(app, path, hx, q)
        times.append(time.perf_counter() - t)
        if status >= 500:
            raise SystemExit(f"{route}: {status}")
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", choices=sorted(ROUTES), help="print a cProfile of this route instead")
    args = ap.parse_args()
    app = create_app()
    rng = random.Random(1)  # noqa: S311 - benchmark inputs, not secrets
    queries = [random_query(rng) for _ in range(args.requests)]
    loop = asyncio.new_event_loop()
    for route in ROUTES:
        loop.run_until_complete(run(app, route, queries[:200]))  # warm-up
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        loop.run_until_complete(run(app, args.profile, queries))
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(35)
        return 0
    medians: dict[str, list[float]] = {route: [] for route in ROUTES}
    for r in range(args.rounds):  # interleaved rounds in a shuffled order, as the HTTP benchmark
        order = list(ROUTES)
        random.Random(r).shuffle(order)  # noqa: S311 - an order, not a secret
        for route in order:
            medians[route].append(statistics.median(loop.run_until_complete(run(app, route, queries))) * 1e6)
    floor = min(medians["floor"])
    for route, values in medians.items():
        best = min(values)
        print(
            f"{route:10s} best median {best:7.1f} µs  (rounds {min(values):.1f}–{max(values):.1f})"
            f"  work above the floor {best - floor:6.1f} µs"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
