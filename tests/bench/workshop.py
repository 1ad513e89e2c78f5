"""The workshop benchmark: 200 attendees on one server, with locust (a benchmark, not a test).

    .venv/bin/pip install -e '.[bench]'        # once: locust 2.47.0 (not needed by the tests)
    .venv/bin/python tests/bench/workshop.py [--users 200] [--spawn-rate 50] [--seconds 60] [--workers 1]
                                             [--scrolled 0.25]
    .venv/bin/python tests/bench/workshop.py --url http://127.0.0.1:8000   # a lab you started yourself
    .venv/bin/python tests/bench/workshop.py --profile mixed [--users 64] [--seconds 30] [--wait 1-3]

``--profile mixed`` is issue 32's mixed room instead: page loads, live updates, both CSV downloads
and the API at once, each route against its own solo p50 (``_mixed.py`` says what it sends and checks).

Starts ``zero3-lab serve --no-access-log`` (one uvicorn worker unless ``--workers``) on a free
loopback port, warms it up, then:

1. solo baseline: one client sending htmx fragment requests one after another for
   ``--solo-seconds``; its median is the figure an attendee alone would see;
2. the workshop: ``--users`` attendees spawned ``--spawn-rate`` a second, for ``--seconds`` in
   all. Each loads the page once with an empty cache (``GET /`` and the versioned ``/static/…?v=``
   assets it links, gzip accepted), then every 1–3 s changes one field of the scenario form (dp
   as a power of two, a model preset, the recomputation policy, micro-batch, device capacity …,
   see ``_scenarios.py``) and sends what htmx sends: ``GET /?<every field>`` with
   ``HX-Request: true``. A fragment counts as failed unless it is a 200 holding ``#results`` and
   no refused field. A live update brings the sections below the peak inline only when
   the page has them on screen, and defers them otherwise: the attendees who keep them on screen
   (``--scrolled``, a quarter of the room by default) say so as the page does (``X-In-View``).

Prints requests, failures and p50/p95/p99/max per kind of request, the solo median, the ratio of
the workshop's fragment p99 to it, the server's CPU use, and PASS/FAIL for each goal (0 failures;
fragment p99 ≤ 150 ms; fragment p99 ≤ 10 × the solo median). Exits 1 if a goal fails, 2 if
locust is missing. Load generator and server share the machine, as in docs/performance.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import shlex
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench._report import machine, measured, percentile, print_failures, print_goals

P99_LIMIT_MS = 150.0
SETTLE_S = 5  # after the last arrival, the steady state is reported apart from the whole run
SOLO_FACTOR = 10
# profile → its defaults for --users, --spawn-rate, --seconds, --solo-seconds
PROFILES: dict[str, tuple[int, float, float, float]] = {"workshop": (200, 50, 60, 10), "mixed": (64, 32, 30, 20)}
INSTALL = "locust is missing: install the bench extra with  .venv/bin/pip install -e '.[bench]'  (locust 2.47.0)"
LABELS = {
    "page": "page   GET /",
    "asset": "assets GET /static/…?v=",
    "fragment": "fragment GET /?… (HX-Request)",
}


def wait_range(text: str) -> tuple[float, float]:
    """``--wait 1-3``: a client's pause between requests, drawn uniformly from MIN to MAX seconds."""
    low, _, high = text.partition("-")
    try:
        pause = (float(low), float(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not MIN-MAX seconds (e.g. 1-3)") from None
    if not 0 <= pause[0] <= pause[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: MIN-MAX with 0 ≤ MIN ≤ MAX")
    return pause


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=PROFILES, default="workshop",
                    help="workshop: issue 12's room of live updates (the default); mixed: issue 32's room of "
                         "page loads, live updates, both CSVs and the API (tests/bench/_mixed.py)")  # fmt: skip
    ap.add_argument("--users", type=int, help="attendees (default 200; mixed: 64)")
    ap.add_argument("--spawn-rate", type=float, help="attendees started per second (default 50; mixed: 32)")
    ap.add_argument("--seconds", type=float, help="the room's length, ramp included (default 60; mixed: 30)")
    ap.add_argument("--wait", type=wait_range, default=(1.0, 3.0),
                    help="mixed: a client's pause between requests, MIN-MAX seconds (default 1-3)")  # fmt: skip
    ap.add_argument("--solo-seconds", type=float, help="the solo baseline's length (default 10; mixed: 20)")
    ap.add_argument("--workers", type=int, default=1, help="uvicorn workers: zero3-lab serve --workers (default 1)")
    ap.add_argument("--scrolled", type=float, default=0.25,
                    help="the share of attendees with the fit finder's sections on screen, whose live "
                         "updates bring them inline (default 0.25)")  # fmt: skip
    ap.add_argument("--url", help="run against a lab already serving at this base URL instead of starting one "
                                  "(its CPU then counts as other processes)")  # fmt: skip
    args = ap.parse_args(argv)
    for name, value in zip(("users", "spawn_rate", "seconds", "solo_seconds"), PROFILES[args.profile], strict=True):
        if getattr(args, name) is None:
            setattr(args, name, value)
    if importlib.util.find_spec("locust") is None:
        print(INSTALL, file=sys.stderr)
        return 2

    from tests.bench import _attendees, _server  # locust first: it monkey-patches the process for gevent

    if not 0 <= args.scrolled <= 1:
        ap.error(f"--scrolled {args.scrolled:g} is out of bounds (0 … 1)")
    _attendees.Attendee.scrolled = args.scrolled

    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    print(machine())
    if args.url:
        proc, base = None, args.url.rstrip("/")
    else:
        port = _server.free_port()
        proc, base = _server.start(port, workers=args.workers), f"http://127.0.0.1:{port}"

    def finish() -> None:
        """Stop the server (when this run started it) and say which it was."""
        if proc:
            _server.stop(proc)
            served = "zero3-lab serve --no-access-log" + (f" --workers {args.workers}" if args.workers != 1 else "")
            print(f"server: {served} (uvicorn, {args.workers} worker{'s' if args.workers != 1 else ''}), {base}")
        else:
            print(f"server: the lab already serving at {base}")
        print()

    pid = proc.pid if proc else None
    if args.profile == "mixed":
        from tests.bench import _mixed

        return _mixed.run(args, base, pid, finish)
    return workshop(args, base, pid, finish)


def workshop(args: argparse.Namespace, base: str, pid: int | None, finish: Callable[[], None]) -> int:
    """Issue 12's workshop: the solo baseline, then the room; prints the report, returns the exit status."""
    from tests.bench import _attendees

    try:
        _attendees.run_users(_attendees.SoloClient, base, 1, 1, 3)  # warm-up: imports, templates, models
        solo, solo_cpu = measured(pid, lambda: _attendees.run_users(_attendees.SoloClient, base, 1, 1,
                                                                          args.solo_seconds))  # fmt: skip
        room, room_cpu = measured(pid, lambda: _attendees.run_users(_attendees.Attendee, base, args.users,
                                                                          args.spawn_rate, args.seconds))  # fmt: skip
    finally:
        finish()

    solo_times = solo.times["fragment"]
    if not solo_times:
        print("the solo baseline made no fragment request", file=sys.stderr)
        return 1
    solo_median = statistics.median(solo_times)
    print(f"solo: one client, {len(solo_times):,} sequential fragment requests in {args.solo_seconds:g} s: "
          f"median {solo_median:.1f} ms, p99 {percentile(solo_times, 99):.1f} ms")  # fmt: skip
    print("  " + solo_cpu.line())
    print()
    print(f"workshop: {args.users} attendees (spawned {args.spawn_rate:g}/s), {args.seconds:g} s, each loading the "
          "page once then editing a field every 1–3 s;")  # fmt: skip
    print(f"  {args.scrolled:.0%} of them with the fit finder's sections on screen (their updates bring them inline)")
    print(f"  {'request kind':<32}{'requests':>9}{'failures':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for kind, label in LABELS.items():
        times = room.times.get(kind, [])
        cells = "".join(f"{percentile(times, q):>9.1f}" if times else f"{'—':>9}" for q in (50, 95, 99, 100))
        print(f"  {label:<32}{len(times):>9,}{room.failures.get(kind, 0):>9,}{cells}")
    fragments = room.times["fragment"]
    settled = args.users / args.spawn_rate + SETTLE_S
    steady = room.since("fragment", settled)
    if steady:
        print(f"  {'fragment, from ' + format(settled, 'g') + ' s on':<32}{len(steady):>9,}{'':>9}"
              + "".join(f"{percentile(steady, q):>9.1f}" for q in (50, 95, 99, 100))
              + "   (after the arrivals: the steady state)")  # fmt: skip
    rate = len(fragments) / args.seconds
    print(f"  {rate:.0f} fragments/s; " + room_cpu.line())
    print_failures(room.errors)
    print()

    failures = sum(room.failures.values()) + sum(solo.failures.values())
    p99 = percentile(fragments, 99) if fragments else math.inf
    ratio = p99 / solo_median
    goals = [
        (failures == 0 and bool(fragments), f"0 failures: {failures}"),
        (p99 <= P99_LIMIT_MS, f"fragment p99 ≤ {P99_LIMIT_MS:.0f} ms: {p99:.1f} ms"),
        (ratio <= SOLO_FACTOR, f"fragment p99 ≤ {SOLO_FACTOR}× the solo median: {p99:.1f} ms = {ratio:.1f}× "
                               f"{solo_median:.1f} ms (limit {SOLO_FACTOR * solo_median:.0f} ms)"),
    ]  # fmt: skip
    return print_goals(goals)


if __name__ == "__main__":
    raise SystemExit(main())
