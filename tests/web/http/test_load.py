"""A short run of the load script: mixed concurrent load, zero errors, bounded memory growth.

It asserts no timing: how fast is for tests/bench/workshop.py and docs/performance.md.
"""

from __future__ import annotations

import pytest

from tests.bench.load import run_load

pytestmark = pytest.mark.server

MAX_GROWTH_KIB = 48 * 1024  # every cache in the app is bounded; a leak would grow with each request


def test_mixed_load_has_no_errors_and_bounded_memory() -> None:
    report = run_load(seconds=3, connections=4)
    assert all(r.requests > 0 for r in report.results), report
    assert report.errors == 0, report
    assert report.rss_after_kib - report.rss_before_kib < MAX_GROWTH_KIB, report
