"""A bounded load test: concurrent clients on the page, the htmx fragment and the JSON API at once.

    .venv/bin/python tests/bench/load.py [--seconds 10] [--connections 8]

Starts ``zero3-lab serve`` (one worker, access log off) on a free loopback port, runs three wrk
processes side by side (one per route, each with ``--connections`` clients and a different
random scenario on every request, see ``scenarios.lua``) for ``--seconds``, and reports
throughput, p50/p99 latency, errors (socket errors and non-2xx answers) and the server's
resident memory before and after. Every request goes to 127.0.0.1; the run is bounded in time
and in clients. The test suite runs a short version (tests/web/test_load.py).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import _server, _wrk

ROUTES: dict[str, tuple[str, bool]] = {
    "page": ("/", False),
    "fragment": ("/", True),
    "api": ("/api/estimate", False),
}
_UNITS = {"us": 1, "ms": 1_000, "s": 1_000_000}


@dataclass(frozen=True)
class RouteResult:
    route: str
    requests: int
    per_second: float
    p50_us: int
    p99_us: int
    errors: int


@dataclass(frozen=True)
class LoadReport:
    results: tuple[RouteResult, ...]
    rss_before_kib: int
    rss_after_kib: int

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.results)


def _latency_us(out: str, percentile: str) -> int:
    match = re.search(rf"^\s*{percentile}%\s+([\d.]+)(us|ms|s)\s*$", out, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no {percentile}% latency in wrk output:\n{out}")
    whole, _, frac = match.group(1).partition(".")
    scale: int = _UNITS[match.group(2)]
    fraction: int = (int(frac or "0") * scale) // (10 ** len(frac))
    return int(whole) * scale + fraction


def _parse(route: str, out: str) -> RouteResult:
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    errors = _wrk.non_2xx(out)
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if socket:
        errors += sum(int(g) for g in socket.groups())
    return RouteResult(route, requests, _wrk.requests_per_second(out), _latency_us(out, "50"), _latency_us(out, "99"),
                       errors)  # fmt: skip


def run_load(seconds: int = 10, connections: int = 8) -> LoadReport:
    if not shutil.which("wrk"):
        raise RuntimeError("wrk is missing: run scripts/setup (it installs Debian's wrk)")
    port = _server.free_port()
    proc = _server.start(port)
    base = f"http://127.0.0.1:{port}"
    try:
        before = _server.rss_kib(proc.pid)
        runs = {}
        for i, (name, (path, hx)) in enumerate(ROUTES.items()):
            cmd, env = _wrk.command(base, path, hx, seconds, connections, i + 1, "--timeout", "5s", "--latency")
            runs[name] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        results = []
        for name, run in runs.items():
            out, err = run.communicate(timeout=seconds + 60)
            if run.returncode != 0:
                raise RuntimeError(f"wrk failed on {name}: {err}")
            results.append(_parse(name, out))
        after = _server.rss_kib(proc.pid)
    finally:
        _server.stop(proc)
    return LoadReport(tuple(results), before, after)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connections", type=int, default=8)
    args = ap.parse_args()
    report = run_load(args.seconds, args.connections)
    print(f"{args.connections} clients per route, 3 routes at once, {args.seconds} s, one server worker")
    print(f"{'route':<10}{'requests':>10}{'req/s':>10}{'p50':>10}{'p99':>10}{'errors':>8}")
    for r in report.results:
        print(f"{r.route:<10}{r.requests:>10}{r.per_second:>10.0f}{r.p50_us / 1000:>8.1f}ms{r.p99_us / 1000:>8.1f}ms"
              f"{r.errors:>8}")  # fmt: skip
    growth = report.rss_after_kib - report.rss_before_kib
    print(f"server RSS: {report.rss_before_kib / 1024:.1f} MiB before, {report.rss_after_kib / 1024:.1f} MiB after "
          f"({growth / 1024:+.1f} MiB)")  # fmt: skip
    return 1 if report.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
