"""The layout search: which (D, tp, pp, stage, recomputation, micro batch × accumulation) of a model on a GPU count
fit the device, ranked by their traffic per step and its lower-bound time on the device's links.

- :mod:`app.ledger.layouts.query`: the search's own bounded inputs, and what a scenario needs to start one.
- :mod:`app.ledger.layouts.traffic`: one layout's bytes per rank per step and the links they cross.
- :mod:`app.ledger.layouts.search`: the candidates, their pruning and the ranked rows.
"""

from app.ledger.layouts.query import LayoutSearchIn, read_search
from app.ledger.layouts.search import MAX_PROBES, LayoutSearch, Row, search_layouts
from app.ledger.layouts.traffic import StepTraffic, step_traffic

__all__ = [
    "MAX_PROBES",
    "LayoutSearch",
    "LayoutSearchIn",
    "Row",
    "StepTraffic",
    "read_search",
    "search_layouts",
    "step_traffic",
]
