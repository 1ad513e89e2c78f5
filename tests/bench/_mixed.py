"""``workshop.py --profile mixed``: a room that reads, edits and downloads at once (issue 32, item 5).

Each of ``--users`` visitors (64 by default) loads the page once, then every ``--wait`` seconds (1–3 by default)
does one of: a live update (an edit, the htmx fragment ``GET /?…``; weight 3), a page load of the scenario it is
on (``GET /?<canonical query>``, as a shared link or a reload; 1), the CSV receipt of that scenario (the page's
own ``/receipt.csv?…`` link; 1), the CSV comparison of the scenario before its last edit with the one after
(``/compare.csv?a=…&b=…``; 1) and the JSON receipt (``GET /api/estimate?…``, the page's API link; 1). Every
request sends what a browser does (gzip accepted). Each answer is checked: a 200 with the page's results, a CSV
that starts with its byte order mark and header row, a receipt with its stages.

The solo baseline first: one visitor alone, the same mix without the pauses, one request at a time
(``--solo-seconds``). Then the room. Printed per route: requests, failures, p50/p95/p99/max and the room's p50
against the solo p50; goals: 0 failures, every route's p99 ≤ 1 s, no route's p50 above 5 × its solo p50.

Importing this module imports locust (through :mod:`tests.bench._attendees`): ``workshop.py`` imports it only
after checking that locust is installed.
"""

from __future__ import annotations

import argparse
import html
import itertools
import random
import re
import time
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import urlencode

from locust import FastHttpUser, between, constant  # the bench extra; typed as Any (pyproject's mypy override)

from tests.bench import _attendees, _scenarios
from tests.bench._report import Cpu, measured, percentile, print_failures, print_goals

P99_LIMIT_MS = 1000.0
SOLO_FACTOR = 5
# route → what the table calls it
ROUTES = {
    "page": "page      GET /?…",
    "fragment": "live update GET /?… (HX-Request)",
    "receipt.csv": "receipt   GET /receipt.csv?…",
    "compare.csv": "compare   GET /compare.csv?a=…&b=…",
    "api": "API       GET /api/estimate?…",
}
# The page's own link to the receipt, whose query is the scenario's canonical one.
RECEIPT_LINK = re.compile(r'href="/receipt\.csv(?:\?([^"]*))?"')  # the default scenario's query is empty
_seeds = itertools.count(1_000)


def canonical_query(body: str) -> str | None:
    """The canonical query of the scenario a page or live update shows (its receipt link's)."""
    found = RECEIPT_LINK.search(body)
    return html.unescape(found.group(1) or "") if found else None


class Visitor(FastHttpUser):  # type: ignore[misc]  # locust's classes are Any to mypy
    """One person in the mixed room: the page loaded once, then a live update, a page load, a download or an
    API call every ``wait_time`` (see the module's docstring for the mix)."""

    wait_time = between(1, 3)  # set by workshop.py --wait
    scrolled: ClassVar[float] = 0.25  # set by workshop.py --scrolled, as for the attendees

    def on_start(self) -> None:
        self.rng = random.Random(next(_seeds))  # noqa: S311 - scenarios, not secrets
        self.watching_lower = self.rng.random() < self.scrolled
        self.form: dict[str, str] = {}
        self.query = self.before = ""
        with self.client.get("/", name="page", headers=_attendees.BROWSER, catch_response=True) as response:
            body = response.text or ""
            query = canonical_query(body)
            if response.status_code != 200 or query is None:
                response.failure(f"page: status {response.status_code}, {'a' if query else 'no'} receipt link")
                return
            try:
                self.form = _scenarios.form_state(body)
            except ValueError as exc:
                response.failure(str(exc))
                return
            self.query = self.before = query
        self.reading()

    def reading(self) -> None:
        """A pause before the first request, as after every one."""
        time.sleep(self.wait_time())

    def live_update(self) -> None:
        if not self.form:
            return  # the page failed to load: already counted
        _scenarios.edit(self.rng, self.form)
        query = "/?" + urlencode(self.form)
        headers = {**_attendees.HTMX, "HX-Current-URL": f"{self.host}/?{self.query}"}
        lower = self.lower_in_view()
        if lower:
            headers["X-In-View"] = "lower"
        with self.client.get(query, name="fragment", headers=headers, catch_response=True) as response:
            body = response.text or ""
            failure = _attendees.fragment_failure(response.status_code, body, query, lower)
            canonical = canonical_query(body)
            if failure or canonical is None:
                response.failure(failure or "fragment: no receipt link")
                return
        self.before, self.query = self.query, canonical

    def lower_in_view(self) -> bool:
        return self.watching_lower

    def page(self) -> None:
        if self.form:
            self._get("page", f"/?{self.query}", lambda body: 'id="results"' in body and 'role="alert"' not in body)

    def receipt_csv(self) -> None:
        if self.form:
            self._get("receipt.csv", f"/receipt.csv?{self.query}", lambda body: body.startswith("\ufeffstage,ledger,"))

    def compare_csv(self) -> None:
        if self.form:
            url = "/compare.csv?" + urlencode({"a": self.before, "b": self.query})
            self._get("compare.csv", url, lambda body: body.startswith("\ufeffside,stage,ledger,"))

    def api(self) -> None:
        if self.form:
            self._get("api", f"/api/estimate?{self.query}", lambda body: '"stages":[' in body)

    def _get(self, name: str, url: str, good: Callable[[str], bool]) -> None:
        with self.client.get(url, name=name, headers=_attendees.BROWSER, catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"{name}: status {response.status_code}: {url}")
            elif not good(response.text or ""):
                response.failure(f"{name}: not the expected answer: {url}")

    tasks: ClassVar[dict[Callable[[Visitor], None], int]] = {
        live_update: 3, page: 1, receipt_csv: 1, compare_csv: 1, api: 1,
    }  # fmt: skip


class SoloVisitor(Visitor):
    """The solo baseline: one visitor alone, making the room's requests in the room's proportions, without a pause
    (one request at a time). The same mix matters: a download of the scenario another route has just computed
    finds it cached (app/receipts/answers.py), as often alone as in the room."""

    wait_time = constant(0)

    def reading(self) -> None:
        pass

    def lower_in_view(self) -> bool:
        return self.rng.random() < self.scrolled  # the room's share, request by request


def _row(label: str, times: list[float], failures: int, extra: str = "") -> str:
    cells = "".join(f"{percentile(times, q):>9.1f}" if times else f"{'—':>9}" for q in (50, 95, 99, 100))
    return f"  {label:<36}{len(times):>9,}{failures:>9,}{cells}{extra}"


def run(args: argparse.Namespace, base: str, pid: int | None, stop: Callable[[], None]) -> int:
    """The solo baseline and the mixed room against ``base``; prints the report, returns the exit status."""
    low, high = args.wait
    Visitor.wait_time = between(low, high)
    Visitor.scrolled = args.scrolled
    try:
        _attendees.run_users(SoloVisitor, base, 1, 1, 3)  # warm-up: imports, templates, models
        solo, solo_cpu = measured(pid, lambda: _attendees.run_users(SoloVisitor, base, 1, 1, args.solo_seconds))
        room, room_cpu = measured(pid, lambda: _attendees.run_users(Visitor, base, args.users, args.spawn_rate,
                                                                    args.seconds))  # fmt: skip
    finally:
        stop()
    return report(args, solo, solo_cpu, room, room_cpu)


def report(args: argparse.Namespace, solo: Any, solo_cpu: Cpu, room: Any, room_cpu: Cpu) -> int:
    header = f"  {'route':<36}{'requests':>9}{'failures':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}"
    print(f"solo: one client, the room's mix without pauses, one request at a time, for {args.solo_seconds:g} s:")
    print(header)
    solo_p50: dict[str, float] = {}
    for name, label in ROUTES.items():
        times = solo.times.get(name, [])
        if times:
            solo_p50[name] = percentile(times, 50)
        print(_row(label, times, solo.failures.get(name, 0)))
    print("  " + solo_cpu.line())
    print()
    low, high = args.wait
    print(f"mixed room: {args.users} clients (spawned {args.spawn_rate:g}/s), {args.seconds:g} s, each loading the "
          f"page once, then every {low:g}–{high:g} s a live update (×3), a page load, /receipt.csv, "
          f"/compare.csv or /api/estimate (×1 each);")  # fmt: skip
    print(f"  {args.scrolled:.0%} of them with the fit finder's sections on screen (their updates bring them inline)")
    print(header + f"{'× solo p50':>12}")
    ratios: dict[str, float] = {}
    for name, label in ROUTES.items():
        times = room.times.get(name, [])
        extra = ""
        if times and name in solo_p50:
            ratios[name] = percentile(times, 50) / solo_p50[name]
            extra = f"{ratios[name]:>11.1f}×"
        print(_row(label, times, room.failures.get(name, 0), extra))
    total = sum(len(room.times.get(name, [])) for name in ROUTES)
    print(f"  {total / args.seconds:.0f} requests/s; " + room_cpu.line())
    print_failures({**solo.errors, **room.errors})
    print()

    failures = sum(room.failures.values()) + sum(solo.failures.values())
    p99s = {name: percentile(room.times[name], 99) for name in ROUTES if room.times.get(name)}
    missing = [name for name in ROUTES if name not in p99s or name not in ratios]
    worst_p99 = max(p99s, key=lambda name: p99s[name], default="")
    worst_ratio = max(ratios, key=lambda name: ratios[name], default="")
    unmeasured = f"; no requests for {', '.join(missing)}" if missing else ""
    goals = [
        (failures == 0 and not missing, f"0 failures: {failures}{unmeasured}"),
        (bool(p99s) and p99s[worst_p99] <= P99_LIMIT_MS,
         f"every route's p99 ≤ {P99_LIMIT_MS:.0f} ms: the highest {p99s.get(worst_p99, 0):.1f} ms ({worst_p99})"),
        (bool(ratios) and ratios[worst_ratio] <= SOLO_FACTOR,
         f"no route's p50 above {SOLO_FACTOR}× its solo p50: the highest {ratios.get(worst_ratio, 0):.1f}× "
         f"({worst_ratio}: {percentile(room.times[worst_ratio], 50) if worst_ratio else 0:.1f} ms against "
         f"{solo_p50.get(worst_ratio, 0):.1f} ms)"),
    ]  # fmt: skip
    return print_goals(goals)
