"""Page metrics for the lab in real Chromium (a script, not a test).

    .venv/bin/python tests/bench/page_metrics.py [--edits 15]

Starts ``zero3-lab serve`` on a free port as tests/browser/conftest.py does, then prints:

(a) a cold first load of ``/`` in a fresh browser context (empty cache; Chromium sends
    ``Accept-Encoding: gzip, deflate, br, zstd``): every request, its status, bytes on the wire
    (CDP ``Network.loadingFinished.encodedDataLength``: headers plus the body as encoded for
    transfer) and the decoded body size, the total, and which transfer dominates; then a warm
    reload for contrast (the versioned assets come from the cache);
(b) edit-to-ledger latency: for each of N edits of the ``dp`` field (each to a different value),
    ``performance.now()`` in the page from dispatching the ``input`` event to the
    ``htmx:afterSettle`` event of the new ``#results``; the time includes the form's
    ``delay:300ms`` debounce and htmx's default 20 ms settle delay, and the value less the
    debounce is printed too. Every edit is checked: the stage-3 persistent total in the DOM must
    equal ⌈7e9 ÷ dp⌉ × 16 B.

Goals (docs/performance.md): first load ≤ 60 KB (60,000 B) on the wire; edit → updated ledger
median ≤ the debounce + 100 ms (400 ms). Prints PASS/FAIL for each; exits 1 if one fails.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from playwright.sync_api import Browser, CDPSession, Page, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import _server
from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[2]
DEBOUNCE_MS = 300  # templates/partials/_form.html: hx-trigger="input delay:300ms, ..."
FIRST_LOAD_LIMIT = 60_000  # bytes on the wire (60 KB, SI)
EDIT_LIMIT_MS = DEBOUNCE_MS + 100
SEED_PARAMS = 7_000_000_000
SEED_BYTES_PER_PARAM = 2 + 2 + 4 + 2 * 4

EDIT_JS = """
async ([value, expected]) => {
    const input = document.querySelector('#f-dp');
    const settled = new Promise((resolve) => {
        const onSettle = (event) => {
            if (event.target && event.target.id === 'results') {
                document.removeEventListener('htmx:afterSettle', onSettle);
                resolve(performance.now());
            }
        };
        document.addEventListener('htmx:afterSettle', onSettle);
    });
    const before = performance.getEntriesByType('resource').length;
    input.value = String(value);
    const t0 = performance.now();
    input.dispatchEvent(new Event('input', { bubbles: true }));
    const t1 = await settled;
    const cell = document.querySelector('table.stages tfoot td[data-stage="3"][data-class="total"]');
    const got = cell ? cell.dataset.bytes : null;
    if (got !== expected) throw new Error(`dp=${value}: stage-3 total ${got}, expected ${expected}`);
    const xhrs = performance.getEntriesByType('resource').slice(before)
        .filter((e) => e.initiatorType === 'xmlhttprequest');
    const xhr = xhrs[xhrs.length - 1];
    return {
        total: t1 - t0,
        sent: xhr ? xhr.startTime - t0 : null,
        request: xhr ? xhr.responseEnd - xhr.startTime : null,
        swap: xhr ? t1 - xhr.responseEnd : null,
        requests: xhrs.length,
    };
}
"""


@contextmanager
def live_server() -> Iterator[str]:
    """``zero3-lab serve`` on a free port (tests/bench/_server.py); yields the base URL."""
    port = _server.free_port()
    proc = _server.start(port, access_log=True)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        _server.stop(proc)


@dataclass
class Transfer:
    url: str
    kind: str = ""
    status: int = 0
    wire: int = 0
    body: int = 0
    cached: bool = False
    failed: str = ""


@dataclass
class NetworkLog:
    by_id: dict[str, Transfer] = field(default_factory=dict)

    def attach(self, cdp: CDPSession) -> None:
        cdp.on("Network.requestWillBeSent", self._sent)
        cdp.on("Network.responseReceived", self._response)
        cdp.on("Network.dataReceived", self._data)
        cdp.on("Network.loadingFinished", self._finished)
        cdp.on("Network.loadingFailed", self._failed)
        cdp.on("Network.requestServedFromCache", self._from_cache)
        cdp.send("Network.enable")

    def _get(self, event: dict[str, Any]) -> Transfer:
        rid = str(event["requestId"])
        return self.by_id.setdefault(rid, Transfer(url=""))

    def _sent(self, event: dict[str, Any]) -> None:
        # A redirect reuses the request id: keep each hop as its own row.
        rid = str(event["requestId"])
        if "redirectResponse" in event and rid in self.by_id:
            self.by_id[f"{rid}/{len(self.by_id)}"] = self.by_id.pop(rid)
        t = self._get(event)
        t.url = str(event["request"]["url"])
        t.kind = str(event.get("type", ""))

    def _response(self, event: dict[str, Any]) -> None:
        t = self._get(event)
        t.status = int(event["response"]["status"])
        t.cached = t.cached or bool(event["response"].get("fromDiskCache"))

    def _data(self, event: dict[str, Any]) -> None:
        self._get(event).body += int(event["dataLength"])

    def _finished(self, event: dict[str, Any]) -> None:
        self._get(event).wire = int(event["encodedDataLength"])

    def _failed(self, event: dict[str, Any]) -> None:
        self._get(event).failed = str(event.get("errorText", "failed"))

    def _from_cache(self, event: dict[str, Any]) -> None:
        self._get(event).cached = True


def machine() -> list[str]:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"machine: nproc {usable} (os.cpu_count {os.cpu_count()}), CPU {model}",
        f"system: {platform.platform()}, Python {platform.python_version()}",
    ]


def print_load(title: str, log: NetworkLog, elapsed_ms: float) -> None:
    rows = list(log.by_id.values())
    print(
        f"{title}: {len(rows)} requests, {sum(t.wire for t in rows):,} B on the wire "
        f"({sum(t.body for t in rows):,} B of decoded bodies), load event after {elapsed_ms:.0f} ms"
    )
    print(f"  {'status':>6} {'type':<11} {'wire B':>9} {'body B':>9}  url")
    for t in rows:
        path = urlsplit(t.url)
        shown = path.path + (f"?{path.query}" if path.query else "") if path.scheme in ("http", "https") else t.url[:60]
        note = " (cache)" if t.cached else ""
        note += f" FAILED {t.failed}" if t.failed else ""
        print(f"  {t.status:>6} {t.kind:<11} {t.wire:>9,} {t.body:>9,}  {shown}{note}")


def load(page: Page, cdp: CDPSession, url: str, *, reload: bool = False) -> tuple[NetworkLog, float]:
    log = NetworkLog()
    log.attach(cdp)
    start = time.perf_counter()
    if reload:
        page.reload(wait_until="load")
    else:
        page.goto(url, wait_until="load")
    elapsed = (time.perf_counter() - start) * 1000
    page.wait_for_load_state("networkidle")
    cdp.send("Network.disable")
    return log, elapsed


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def measure_edits(page: Page, edits: int) -> list[dict[str, Any]]:
    # One warm-up edit (first fragment request, first swap), then `edits` edits to distinct values.
    values = [9, *range(10, 10 + edits)]
    results = []
    for value in values:
        expected = str(-(-SEED_PARAMS // value) * SEED_BYTES_PER_PARAM)
        sample = cast(dict[str, Any], page.evaluate(EDIT_JS, [value, expected]))
        sample["value"] = value
        results.append(sample)
        page.wait_for_timeout(50)
    return results[1:]


def summary(name: str, values: list[float]) -> str:
    return (
        f"{name:<34} median {statistics.median(values):7.1f} ms   p90 {percentile(values, 90):7.1f} ms   "
        f"min {min(values):7.1f}   max {max(values):7.1f}"
    )


@dataclass(frozen=True)
class Figures:
    first_load_bytes: int
    edit_median_ms: float


def dominant(log: NetworkLog) -> str:
    """The transfers of a load, largest first, with their share of its bytes on the wire."""
    rows = sorted(log.by_id.values(), key=lambda t: -t.wire)
    total = sum(t.wire for t in rows) or 1
    return ", ".join(f"{urlsplit(t.url).path} {t.wire:,} B ({t.wire / total:.0%})" for t in rows if t.wire)


def run(browser: Browser, base: str, edits: int) -> Figures:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cold, cold_ms = load(page, cdp, base + "/")
        print_load("(a) cold first load of /", cold, cold_ms)
        first_load = sum(t.wire for t in cold.by_id.values())
        print(f"    largest first: {dominant(cold)}")
        warm, warm_ms = load(page, cdp, base + "/", reload=True)
        print_load("    warm reload, same context", warm, warm_ms)

        samples = measure_edits(page, edits)
        totals = [float(s["total"]) for s in samples]
        print()
        print(
            f"(b) edit → updated ledger in the DOM, {len(samples)} edits of #f-dp "
            f"(values {samples[0]['value']}…{samples[-1]['value']}, each checked against ⌈7e9 ÷ dp⌉ × 16 B)"
        )
        print("    " + summary("input → htmx:afterSettle", totals))
        print("    " + summary(f"  less the {DEBOUNCE_MS} ms debounce", [t - DEBOUNCE_MS for t in totals]))
        parts = [s for s in samples if s["request"] is not None]
        if parts:
            print("    " + summary("  input → request sent", [float(s["sent"]) for s in parts]))
            print("    " + summary("  request (send → last byte)", [float(s["request"]) for s in parts]))
            print("    " + summary("  last byte → settled (swap, settle)", [float(s["swap"]) for s in parts]))
        extra = [s["value"] for s in samples if s["requests"] != 1]
        if extra:
            print(f"    note: edits {extra} made other than one request")
        print("    per edit (ms): " + ", ".join(f"dp={s['value']}: {float(s['total']):.0f}" for s in samples))
    finally:
        context.close()
    return Figures(first_load, statistics.median(totals))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--edits", type=int, default=15, help="measured edits (default 15)")
    args = parser.parse_args(argv)
    if args.edits < 2:
        parser.error("--edits must be at least 2")
    print("command: " + shlex.join(sys.orig_argv))
    for line in machine():
        print(line)
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: run scripts/setup (it installs Debian's chromium)", file=sys.stderr)
        return 1
    with live_server() as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            print(f"browser: Chromium {browser.version} (headless), server: {base} (zero3-lab serve, 1 worker)")
            print()
            figures = run(browser, base, args.edits)
        finally:
            browser.close()
    goals = [
        (figures.first_load_bytes <= FIRST_LOAD_LIMIT,
         f"first load ≤ {FIRST_LOAD_LIMIT:,} B on the wire: {figures.first_load_bytes:,} B"),
        (figures.edit_median_ms <= EDIT_LIMIT_MS,
         f"edit → updated ledger median ≤ {EDIT_LIMIT_MS} ms (debounce + 100): {figures.edit_median_ms:.0f} ms"),
    ]  # fmt: skip
    print()
    print("goals:")
    for ok, text in goals:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    return 0 if all(ok for ok, _ in goals) else 1


if __name__ == "__main__":
    raise SystemExit(main())
