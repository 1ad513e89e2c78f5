"""Fixtures the trace-job tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.trace_queue import Jobs, jobs_in


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    """``jobs(modes, **options)``: a trace queue of fake traces with huey's consumer running; stopped after the test,
    so that no fake trace outlives it."""
    with jobs_in(tmp_path) as made:
        yield made
