"""Hypothesis strategies for valid scenarios across the full bounds of every input."""

from __future__ import annotations

from hypothesis import strategies as st

from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.scenario.fields import FIELD_BY_NAME, TEN_13


def bounded(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Any integer in [lo, hi], with the edges and their neighbours drawn often."""
    edges = sorted({v for v in (lo, lo + 1, hi - 1, hi) if lo <= v <= hi})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


def choice(name: str) -> st.SearchStrategy[int]:
    choices = FIELD_BY_NAME[name].choices
    assert choices is not None
    return st.sampled_from(choices)


names: st.SearchStrategy[str] = (
    st.text(st.characters(min_codepoint=32, max_codepoint=0x24FF), max_size=80).map(str.strip).filter(str.isprintable)
)


@st.composite
def scenarios(draw: st.DrawFn, name: st.SearchStrategy[str] = names) -> Scenario:
    """A valid scenario: every field drawn from its whole allowed range, degenerate cases included."""
    params = draw(st.one_of(st.integers(1, 20), st.integers(1, 10**10), bounded(1, TEN_13)))
    unit_edges = [0, 1, params, min(400_000_000, params)]
    raw: dict[str, object] = {
        "params": params,
        "dp": draw(st.one_of(st.sampled_from([1, 2, 3, 7, 8, 64, 131_072]), bounded(1, 131_072))),
        "param_bytes": draw(choice("param_bytes")),
        "grad_bytes": draw(choice("grad_bytes")),
        "master_bytes": draw(choice("master_bytes")),
        "opt_states": draw(bounded(0, 4)),
        "opt_bytes": draw(choice("opt_bytes")),
        "unit_params": draw(st.one_of(st.sampled_from([u for u in unit_edges if u <= params]), bounded(0, params))),
        "gather_bytes": draw(choice("gather_bytes")),
        "prefetch": draw(bounded(0, 8)),
        "stage": draw(choice("stage")),
        "offload_optimizer": draw(st.sampled_from(["none", "none", "cpu", "nvme"])),
        "offload_param": draw(st.sampled_from(["none", "none", "cpu", "nvme"])),
        "bucket_bytes": draw(st.one_of(st.just(0), bounded(0, 2**40))),
        "activation_bytes": draw(st.one_of(st.just(0), bounded(0, 2**46))),
        "overhead_bytes": draw(st.one_of(st.just(0), bounded(0, 2**46))),
        "contingency_pct": draw(bounded(0, 100)),
        "capacity_bytes": draw(bounded(1, 2**46)),
        "name": draw(name),
    }
    return parse_scenario(raw, allow_unknown=False)
