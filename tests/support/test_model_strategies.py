"""The model-config strategies (``tests/support/model_strategies.py``) reach every family."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.ledger.models.architecture import FAMILIES
from tests.support.model_strategies import architectures


@given(st.data())
def test_the_strategy_reaches_every_family(data: st.DataObject) -> None:
    for family in FAMILIES:
        assert data.draw(architectures(st.just(family))).family == family
