"""Throughput of the lab's routes relative to its own floor, measured side by side.

    .venv/bin/python tests/bench/throughput.py [--rounds 5] [--seconds 3] [--connections 8]

Starts ``zero3-lab serve`` (one worker, access log off, pinned to CPU 0) and drives it with
wrk (pinned to CPU 1) through ``scenarios.lua``, which sends a different random scenario on
every request. Each round measures, in a shuffled order, the floor (a 404 for an unrouted path
with the same query string: middleware, router and not-found handler), the JSON API, the htmx
fragment and the full page. Each route's figure is its requests/s divided by the floor's in
the same round; the script prints every round and the medians. It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import _server, _wrk

TARGETS: dict[str, tuple[str, bool]] = {
    "floor (404)": ("/no-such-route", False),
    "GET /api/estimate": ("/api/estimate", False),
    "htmx fragment": ("/", True),
    "full page": ("/", False),
}


def wrk(base: str, path: str, hx: bool, seconds: int, connections: int, seed: int) -> tuple[float, int]:
    cmd, env = _wrk.command(base, path, hx, seconds, connections, seed)
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "1", *cmd]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return _wrk.requests_per_second(out), _wrk.non_2xx(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=8)
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is missing: apt-get install wrk")
    port = _server.free_port()
    proc = _server.start(port, cpu=0)
    base = f"http://127.0.0.1:{port}"
    ratios: dict[str, list[float]] = {name: [] for name in TARGETS if not name.startswith("floor")}
    rates: dict[str, list[float]] = {name: [] for name in TARGETS}
    floors: list[float] = []
    try:
        for path, hx in TARGETS.values():  # warm-up
            wrk(base, path, hx, 1, args.connections, 0)
        for r in range(args.rounds):
            order = list(TARGETS)
            random.Random(r).shuffle(order)  # noqa: S311 - an order, not a secret
            rps: dict[str, float] = {}
            for name in order:
                path, hx = TARGETS[name]
                rps[name], bad = wrk(base, path, hx, args.seconds, args.connections, r + 1)
                if bad and not name.startswith("floor"):
                    print(f"  warning: {bad} non-2xx responses from {name}")
            for name, value in rps.items():
                rates[name].append(value)
            floor = rps["floor (404)"]
            floors.append(floor)
            cells = "  ".join(f"{n}: {rps[n]:7.0f}/s ({rps[n] / floor:.2f})" for n in TARGETS)
            print(f"round {r + 1}: {cells}")
            for name in ratios:
                ratios[name].append(rps[name] / floor)
    finally:
        _server.stop(proc)
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    print(f"\nmachine: {os.cpu_count()} cores, {cpu}; Python {platform.python_version()}")
    print(f"command: {' '.join(sys.argv)}  (wrk -t1 -c{args.connections} -d{args.seconds}s per cell)")
    print(f"floor (404): median {statistics.median(floors):.0f} requests/s ({1e6 / statistics.median(floors):.0f} µs)")
    for name, values in ratios.items():
        rate = statistics.median(rates[name])
        print(
            f"{name:>18}: median {statistics.median(values):.2f} of the floor "
            f"(min {min(values):.2f}, max {max(values):.2f}); {rate:.0f} requests/s ({1e6 / rate:.0f} µs)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
