"""The layout search's cost for the issue's case, a 70B model on 512 GPUs (issue 33, item 5: "answer within 1 s").

    PYTHONPATH=. .venv/bin/python tests/bench/layouts.py [--runs 7] [--model llama-3.1-70b] [--gpus 512]

Prints, as medians of ``--runs``:

- the search alone, first call in a fresh process (every cache empty: what a CLI run or a new server pays) and
  again in the same process (the model's inventory and defaults cached);
- ``python -m app.cli layouts`` wall time in a fresh process (start-up, imports, search, table), beside
  ``python -c pass``;
- ``GET /layouts`` (the page) and ``GET /api/layouts`` through the real app in process (Starlette's TestClient),
  each for a scenario not seen before in that process and once more for the same one.

A benchmark, not a test: it prints figures and asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

_FIRST = """
import sys, time
from app.ledger.layouts import read_search, search_layouts
from app.ledger.scenario import parse_scenario
s = parse_scenario({"model": sys.argv[1]})
q = read_search({"gpus": sys.argv[2]})
start = time.perf_counter(); r = search_layouts(s, q); first = time.perf_counter() - start
start = time.perf_counter(); search_layouts(s, q); again = time.perf_counter() - start
print(first, again, len(r.rows), r.probes, r.searched, r.candidates)
"""


def _wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--gpus", default="512")
    args = ap.parse_args()

    runs = [subprocess.run([sys.executable, "-c", _FIRST, args.model, args.gpus], check=True, capture_output=True,
                           text=True, cwd=ROOT).stdout.split() for _ in range(args.runs)]  # fmt: skip
    first = statistics.median(float(r[0]) for r in runs)
    again = statistics.median(float(r[1]) for r in runs)
    rows, probes, searched, candidates = runs[0][2:]
    print(f"search, {args.model} on {args.gpus} GPUs: first call in a fresh process {_ms(first)}, again {_ms(again)} "
          f"({rows} rows; {searched} of {candidates} candidates searched, {probes} peaks evaluated)")  # fmt: skip

    bare, cli = [], []
    for _ in range(args.runs):
        bare.append(_wall([sys.executable, "-c", "pass"]))
        cli.append(_wall([sys.executable, "-m", "app.cli", "layouts", "--model", args.model, "--gpus", args.gpus]))
    print(
        f"cold CLI, median of {args.runs}: python -c pass {_ms(statistics.median(bare))}; "
        f"python -m app.cli layouts --model {args.model} --gpus {args.gpus} {_ms(statistics.median(cli))}"
    )

    from fastapi.testclient import TestClient

    from app.web.app import create_app

    with TestClient(create_app()) as client:
        for path in ("/layouts", "/api/layouts"):
            new, seen = [], []
            for i in range(args.runs):
                # a sequence length not asked before: nothing of the scenario cached yet
                url = f"{path}?model={args.model}&gpus={args.gpus}&seq_len={4096 + 8 * (i + 1) + (path == '/layouts')}"
                start = time.perf_counter()
                assert client.get(url).status_code == 200
                new.append(time.perf_counter() - start)
                start = time.perf_counter()
                client.get(url)
                seen.append(time.perf_counter() - start)
            print(f"GET {path}, median of {args.runs}: a new scenario {_ms(statistics.median(new))}, "
                  f"the same again {_ms(statistics.median(seen))}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
