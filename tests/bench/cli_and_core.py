"""Cold start of the CLI and the in-process cost of one receipt, as medians.

    .venv/bin/python tests/bench/cli_and_core.py [--runs 30]

Cold start: wall time of ``zero3-lab estimate --format json`` (the installed console script) in a
fresh process, beside ``python -c pass`` on the same interpreter, run alternately. In-process:
``estimate()`` (ledger, oracle, the five checks, both kill lists) plus the JSON receipt, on random
scenarios (a different one each call), and the same for the seed scenario. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qsl

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.ledger.estimate import estimate
from app.ledger.scenario import DEFAULT_SCENARIO, Scenario, parse_scenario
from app.receipts.receipt import receipt
from tests.bench._scenarios import random_query

CLI = Path(sys.executable).with_name("zero3-lab")


def _wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def random_scenarios(count: int) -> list[Scenario]:
    rng = random.Random(7)  # noqa: S311 - benchmark inputs, not secrets
    return [parse_scenario(dict(parse_qsl(random_query(rng)))) for _ in range(count)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    bare, cli = [], []
    for _ in range(args.runs):
        bare.append(_wall([sys.executable, "-c", "pass"]))
        cli.append(_wall([str(CLI), "estimate", "--format", "json"]))
    b, c = statistics.median(bare), statistics.median(cli)
    print(f"cold start, median of {args.runs}: python -c pass {b * 1000:.1f} ms; "
          f"zero3-lab estimate --format json {c * 1000:.1f} ms ({c / b:.2f}x; +{(c - b) * 1000:.1f} ms)")  # fmt: skip

    scenarios = random_scenarios(2000)
    for label, items in (("random scenarios", scenarios), ("the seed scenario", [DEFAULT_SCENARIO] * 2000)):
        times = []
        for s in items:
            start = time.perf_counter()
            receipt(estimate(s))
            times.append(time.perf_counter() - start)
        print(f"one receipt in process ({label}): median {statistics.median(times) * 1e6:.0f} µs, "
              f"p99 {sorted(times)[int(len(times) * 0.99)] * 1e6:.0f} µs")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
