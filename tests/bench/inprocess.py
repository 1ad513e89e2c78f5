"""What one request costs inside the app (no sockets, no server), and where the time goes.

    .venv/bin/python tests/bench/inprocess.py [--requests 1500] [--rounds 3]
    .venv/bin/python tests/bench/inprocess.py --profile fragment
    .venv/bin/python tests/bench/inprocess.py --breakdown
    .venv/bin/python tests/bench/inprocess.py --gc

Drives the ASGI app directly, gzip accepted as a browser does, with the workshop's scenarios
(``_scenarios.edit``: the form as the page serves it, one field changed per request, as htmx sends
it): the htmx fragment (``GET /?…`` with ``HX-Request``), the same with the sections below the peak on
screen (``lower``: ``X-In-View: lower``), the full page (``GET /?…``) and the JSON receipt
(``GET /api/estimate?…``). Prints each route's median and p99 per request (the best of ``--rounds``
interleaved rounds); with ``--breakdown`` a live update's two halves (building the answer,
``app.web.views.page.view``; rendering ``partials/_results.html``) outside the app; with ``--profile`` a
cProfile of one route (its sync handler then runs in the event loop's thread, so that the profile sees
it); with ``--gc`` what the garbage collector does over a room's live updates (a quarter with the lower
sections): the objects it tracks after them, which every full collection traverses (the caches' mostly),
its full collections and their pauses. This is the floor under the workshop benchmark's solo median
(which adds HTTP, uvicorn and the client). It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import gzip
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import fastapi.routing

from app.web.app import create_app
from tests.bench import _scenarios

T = TypeVar("T")
ROUTES: dict[str, tuple[str, bool]] = {
    "fragment": ("/", True),
    "lower": ("/", True),  # a live update of a page whose lower sections are on screen (X-In-View: lower)
    "page": ("/", False),
    "api": ("/api/estimate", False),
}


async def call(app: Any, path: str, hx: bool, query: str, lower: bool = False) -> tuple[int, bytes]:
    """One GET through the ASGI app (gzip accepted); its status and body as sent. ``lower``: the page says
    its sections below the peak are on screen, so a live update carries them."""
    headers = [(b"host", b"bench"), (b"accept-encoding", b"gzip")] + ([(b"hx-request", b"true")] if hx else [])
    headers += [(b"x-in-view", b"lower")] if lower else []
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": query.encode(), "headers": headers,
        "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "root_path": "",
    }  # fmt: skip
    status, body, received = 0, bytearray(), False

    async def receive() -> dict[str, Any]:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    await app(scope, receive, send)
    return status, bytes(body)


async def run(app: Any, route: str, queries: list[str]) -> list[float]:
    path, hx = ROUTES[route]
    if route == "api":  # the API takes scenario fields only, and an empty one is an error there
        queries = [urlencode([(k, v) for k, v in parse_qsl(q) if k not in _scenarios.NOT_SCENARIO]) for q in queries]
    times = []
    for q in queries:
        t = time.perf_counter()
        status, _ = await call(app, path, hx, q, lower=route == "lower")
        times.append(time.perf_counter() - t)
        if status != 200:
            raise SystemExit(f"{route}: {status} for ?{q}")
    return times


async def _inline(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return func(*args, **kwargs)


def workshop_queries(app: Any, count: int) -> list[str]:
    """``count`` queries as the workshop's attendees send them, from the form the page serves."""
    loop = asyncio.new_event_loop()
    try:
        _, page = loop.run_until_complete(call(app, "/", False, ""))
    finally:
        loop.close()
    form = _scenarios.form_state(gzip.decompress(page).decode())
    rng = random.Random(1)  # noqa: S311 - benchmark inputs, not secrets
    queries = []
    for _ in range(count):
        _scenarios.edit(rng, form)
        queries.append(urlencode(form))
    return queries


def breakdown(app: Any, count: int) -> None:
    """Mean and median of building a live update's answer and of rendering it, over workshop queries
    (the first 200 warm the caches, as a room that has been editing for a while has)."""
    from app.web.http.query import form_fields, read_scenario
    from app.web.http.templating import templates
    from app.web.views.page import results_context, view
    from app.web.views.results import DEFERRABLE

    template = templates.get_template("partials/_results.html")
    build, render = [], []
    for i, q in enumerate(workshop_queries(app, count + 200)):
        raw = form_fields(dict(parse_qsl(q, keep_blank_values=True)))
        scenario, error = read_scenario(raw, strict=False)
        t0 = time.perf_counter()
        v = view(raw, scenario, error, None, deferred=DEFERRABLE)  # as a live update builds it
        t1 = time.perf_counter()
        template.render(results_context(v, oob=True))
        t2 = time.perf_counter()
        if i >= 200:
            build.append(t1 - t0)
            render.append(t2 - t1)
    for name, samples in (("answer (view)", build), ("render", render)):
        mean, median = statistics.mean(samples) * 1e3, statistics.median(samples) * 1e3
        print(f"{name:14s} mean {mean:6.2f} ms   median {median:6.2f} ms   ({len(samples)} live updates)")


def collector(app: Any, count: int) -> None:
    """The garbage collector over ``count`` live updates as a room sends them, a quarter with the lower
    sections, after start-up's objects are frozen as ``serve`` freezes them."""
    queries = workshop_queries(app, count)
    pauses: list[float] = []
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                pauses.append(time.perf_counter() - started[0])

    rng = random.Random(3)  # noqa: S311 - which updates carry the lower sections, not a secret

    async def room() -> None:
        for q in queries:
            await call(app, "/", True, q, lower=rng.random() < 0.25)

    loop = asyncio.new_event_loop()
    gc.collect()
    gc.freeze()
    gc.callbacks.append(timed)
    try:
        loop.run_until_complete(room())
    finally:
        gc.callbacks.remove(timed)
    mean = statistics.mean(pauses) * 1e3 if pauses else 0.0
    worst = max(pauses, default=0.0) * 1e3
    print(f"{count} live updates: {len(gc.get_objects()):,} objects tracked after them, {len(pauses)} full "
          f"collections, pause mean {mean:.2f} ms, max {worst:.2f} ms")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", choices=sorted(ROUTES), help="print a cProfile of this route instead")
    ap.add_argument("--sort", default="cumulative", choices=("cumulative", "tottime"), help="the profile's order")
    ap.add_argument("--breakdown", action="store_true", help="time building and rendering a live update apart")
    ap.add_argument("--gc", action="store_true", help="the garbage collector over a room's live updates")
    args = ap.parse_args()
    app = create_app()
    if args.breakdown:
        breakdown(app, args.requests)
        return 0
    if args.gc:
        collector(app, args.requests)
        return 0
    queries = workshop_queries(app, args.requests)
    loop = asyncio.new_event_loop()
    for route in ROUTES:
        loop.run_until_complete(run(app, route, queries[:200]))  # warm-up: imports, templates, models
    if args.profile:
        # cProfile sees one thread: run sync routes in the loop's thread instead of the threadpool.
        fastapi.routing.run_in_threadpool = _inline  # type: ignore[attr-defined]
        prof = cProfile.Profile()
        prof.enable()
        loop.run_until_complete(run(app, args.profile, queries))
        prof.disable()
        pstats.Stats(prof).sort_stats(args.sort).print_stats(40)
        return 0
    rounds: dict[str, list[list[float]]] = {route: [] for route in ROUTES}
    for r in range(args.rounds):  # interleaved rounds in a shuffled order
        order = list(ROUTES)
        random.Random(r).shuffle(order)  # noqa: S311 - an order, not a secret
        for route in order:
            rounds[route].append(loop.run_until_complete(run(app, route, queries)))
    print(f"{args.requests} workshop scenarios per round, best of {args.rounds} rounds, gzip accepted, in process")
    for route, samples in rounds.items():
        best = min(samples, key=statistics.median)
        p99 = sorted(best)[int(len(best) * 0.99)]
        print(f"{route:9s} median {statistics.median(best) * 1e3:6.2f} ms   p99 {p99 * 1e3:6.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
