"""A scenario's whole estimate, computed once for every download and answer that asks for it.

A room asks for the same scenario more than once and by more than one route: the page's receipt link, its CSV, its
JSON in the API, one side of a comparison (the scenario before an edit, then after it). Each of those used to
compute the estimate afresh (the kill lists and the fit finder: 5–15 ms of one core a scenario with a model), and
under a mixed load that recomputation was most of the queue in front of the downloads (docs/performance.md, "A
mixed room"). :func:`whole_estimate` keeps the last :data:`SIZE` scenarios' estimates (~50 KB each).

The estimate's lazily searched parts (the fit finder, the cheapest offload) are searched here, in the caller's
thread, before the estimate is shared: every receipt and CSV reads them, and an estimate handed to many requests
never computes anything more. The lab's pure functions make a cached estimate the same answer as a fresh one.
"""

from __future__ import annotations

from functools import lru_cache

from app.ledger.estimate import Estimate, estimate
from app.ledger.scenario import Scenario

SIZE = 64


@lru_cache(maxsize=SIZE)
def whole_estimate(s: Scenario) -> Estimate:
    """:func:`app.ledger.estimate.estimate` of ``s`` with the kill lists, its fit finder and cheapest offload
    already searched; shared by every caller (it is frozen, and nothing in it is computed later)."""
    e = estimate(s)
    _ = e.fit, e.offload_fit  # searched now, once, rather than by each receipt that reads them
    return e
