"""Is a change faster? Two versions of the app in one process, their requests interleaved.

    .venv/bin/python tests/bench/paired.py [--base HEAD] [--routes estimate,fragment] [--rounds 12]

Checks out ``--base`` in a temporary git worktree, imports its ``app`` package and this tree's
side by side (each version keeps its own modules), and times each route of ``inprocess.py`` over
the same random scenarios, alternating base and work within every round. Prints each side's best
and median per-request median and the median of the paired differences (work − base). Separate
runs of ``inprocess.py`` drift by several microseconds; the paired difference tells a 2 µs change
from none. Uncommitted changes count as work. The scenarios name no model: the model code, which
the lab imports lazily, would come from the working tree for both. It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench._scenarios import random_query  # noqa: E402 - after the path
from tests.bench.inprocess import ROUTES, run  # noqa: E402


def load_app(root: Path) -> Any:
    """``create_app()`` from the ``app`` package under ``root``, imported afresh."""
    for name in [m for m in sys.modules if m == "app" or m.startswith("app.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module("app.web.app")
    finally:
        sys.path.remove(str(root))
    if not str(module.__file__).startswith(str(root)):
        raise SystemExit(f"imported {module.__file__}, not the tree under {root}")
    return module.create_app()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="HEAD", help="the git revision to compare against (default HEAD)")
    ap.add_argument("--routes", default=",".join(ROUTES), help=f"comma-separated, of {', '.join(ROUTES)}")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--requests", type=int, default=1500)
    args = ap.parse_args()
    routes = args.routes.split(",")
    unknown = [r for r in routes if r not in ROUTES]
    if unknown:
        ap.error(f"unknown routes: {', '.join(unknown)}")
    with tempfile.TemporaryDirectory() as scratch:
        base_root = Path(scratch) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base_root), args.base],
                       check=True)  # fmt: skip
        try:
            apps = {"base": load_app(base_root), "work": load_app(ROOT)}
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_root)], check=True)
    rng = random.Random(1)  # noqa: S311 - benchmark inputs, not secrets
    queries = [random_query(rng) for _ in range(args.requests)]
    loop = asyncio.new_event_loop()
    for app in apps.values():
        for route in routes:
            loop.run_until_complete(run(app, route, queries[:300]))  # warm-up
    medians: dict[tuple[str, str], list[float]] = {(side, r): [] for side in apps for r in routes}
    for i in range(args.rounds):
        for route in routes:
            for side in ("base", "work") if i % 2 else ("work", "base"):
                times = loop.run_until_complete(run(apps[side], route, queries))
                medians[side, route].append(statistics.median(times) * 1e6)
    print(f"base {args.base} against the working tree; {args.rounds} rounds of {args.requests} requests")
    for route in routes:
        base, work = medians["base", route], medians["work", route]
        diff = statistics.median(w - b for w, b in zip(work, base, strict=True))
        print(
            f"{route:9s} base best {min(base):6.1f} µs, median {statistics.median(base):6.1f} | work best "
            f"{min(work):6.1f} µs, median {statistics.median(work):6.1f} | paired difference {diff:+5.1f} µs"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
