"""The fit finder's curve over D sums, at each degree, only the instants the degree before bounds above its largest
(``walk.largest_totals``). What that rests on: no instant grows with D at stages 1–2, nor at stage 3 from D = 2 on
where no tensor is padded; and the answer it gives is the full walk's at every point. Its searches stop a walk at
the first instant over the room (``walk.over``): it says what the whole walk says."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.ledger.ledger import compute_ledger
from app.ledger.peak.fit import CURVE_DPS, find_fit
from app.ledger.peak.schedule.layout import layout
from app.ledger.peak.schedule.walk import over, totals
from app.ledger.scenario import ScenarioError
from app.ledger.state.persistent import persistent_lines
from app.ledger.state.rules import PRODUCTION
from tests.ledger.peak.test_schedule import MODELS, _scenario


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.sampled_from(["none", "full", "selective"]),
    st.sampled_from(["plain-fsdp2", "hf-fsdp2", "torchtitan"]),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([{}, {"loss": "outside"}, {"loss": "inside"}]),
    st.integers(0, 17),
    st.integers(1, 17),
)
def test_no_instant_grows_with_d_where_the_curve_prunes(
    model: str, policy: str, stack: str, stage: int, loss: dict[str, str], i: int, j: int
) -> None:
    """The fit finder's curve sums, at each D, only the instants that the D before bounds above its largest
    (``largest_totals``): that rests on no instant growing with D at stages 1–2, nor at stage 3 from D = 2 on
    where no tensor is padded. Each instant, at two powers of two."""
    try:
        s = _scenario(model=model, act_policy=policy, stack=stack, **loss)
    except ScenarioError:
        assume(False)  # torchtitan's chunked loss on a tied model: refused, not walked
    dps = [2**k for k in range(18)]
    if stage == 3:
        dps = [d for d in dps[1:] if layout(s.model, d) == layout(s.model, d, False)]
        assume(len(dps) > 1)
    low, high = sorted((dps[i % len(dps)], dps[(i + j) % len(dps)]))

    def totals_at(dp: int) -> list[int]:
        at = s.with_(dp=dp)
        return totals(at, stage, persistent_lines(at, stage, PRODUCTION), PRODUCTION)

    before, after = totals_at(low), totals_at(high)
    assert len(before) == len(after)
    assert all(b >= a for b, a in zip(before, after, strict=True))


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(["none", "full"]), st.sampled_from(["plain-fsdp2", "hf-fsdp2"]),
       st.integers(1, 64))  # fmt: skip
def test_every_point_of_the_curve_is_the_full_walks_largest(model: str, policy: str, stack: str, mb: int) -> None:
    s = _scenario(model=model, act_policy=policy, stack=stack, micro_batch=mb)
    curve = dict(find_fit(s).curve)
    assert list(curve) == list(CURVE_DPS)
    for dp, peaks in curve.items():
        assert list(peaks) == [st_.peak.total for st_ in compute_ledger(s.with_(dp=dp)).stages]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(["none", "full"]), st.integers(1, 3), st.integers(1, 64),
       st.integers(0, 150), st.integers(0, 40))  # fmt: skip
def test_a_walk_stopped_at_the_first_instant_over_the_room_says_what_the_whole_walk_says(
    model: str, policy: str, stage: int, dp: int, pct: int, first: int
) -> None:
    s = _scenario(model=model, act_policy=policy, dp=dp)
    lines = persistent_lines(s, stage, PRODUCTION)
    whole = totals(s, stage, lines, PRODUCTION)
    room = max(whole) * pct // 100  # from nothing fitting to every instant fitting
    at = over(s, stage, lines, PRODUCTION, room, first)
    if at is None:
        assert max(whole) <= room
    else:
        assert whole[at] > room
        if first < len(whole) and whole[first] > room:
            assert at == first  # the instant tried first
