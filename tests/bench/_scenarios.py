"""The benchmarks' random scenario, as a query string (the same kind ``scenarios.lua`` sends):
a different one per request, so no cache keyed on the scenario can answer for the work."""

from __future__ import annotations

import random


def random_query(rng: random.Random) -> str:
    params = rng.randint(1, 200_000) * 1_000_000
    return (
        f"params={params}&dp={rng.randint(1, 4096)}&param_bytes={rng.choice((1, 2, 4))}"
        f"&master_bytes={rng.choice((0, 4, 8))}&opt_states={rng.randint(0, 4)}&unit_params={rng.randint(0, params)}"
        f"&prefetch={rng.randint(0, 8)}&activation_bytes={rng.randint(0, 60)}GB"
        f"&capacity_bytes={rng.randint(16, 192)}GiB&contingency_pct={rng.randint(0, 20)}"
    )
