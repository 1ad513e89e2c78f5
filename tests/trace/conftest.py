"""Fixtures the trace-job tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.trace.jobs import TraceQueue


@pytest.fixture
def queues() -> Iterator[list[TraceQueue]]:
    """Queues to close after the test, so that no fake trace outlives it."""
    made: list[TraceQueue] = []
    yield made
    for queue in made:
        queue.close()
