"""Shared fixtures and the Hypothesis profiles.

``dev`` (the default) keeps a local run quick; ``ci`` (selected whenever the ``CI`` environment
variable is set) runs five times as many examples, derandomized so a CI failure reproduces.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from app.ledger.estimate import Estimate, estimate
from app.ledger.scenario import DEFAULT_SCENARIO, Scenario

settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile("ci", max_examples=300, derandomize=True, deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def seed() -> Scenario:
    """The seed's example: 7B params, D = 8, BF16 + FP32 master + two FP32 Adam moments."""
    return DEFAULT_SCENARIO


@pytest.fixture(scope="session")
def seed_estimate(seed: Scenario) -> Estimate:
    return estimate(seed)
