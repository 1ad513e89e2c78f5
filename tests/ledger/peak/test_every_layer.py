"""Checkpointing every N-th layer (``ac_every``, with ``act_policy = full``): layers 0, N, 2N, … keep only their
input and rebuild their set in backward; the others keep their whole saved set, as transformers 5.23.0's
``activation_checkpointing_enable(every_n_layers=N)`` leaves them (``layer_index % every_n_layers == 0``).
tests/trace/test_stacks_traced.py holds the same to a trace of transformers' class."""

from __future__ import annotations

import pytest

from app.ledger.ledger import compute_ledger
from app.ledger.scenario import ScenarioError, parse_scenario

RUN = {"model": "llama-2-7b", "act_policy": "full"}


def _activations(**raw: object) -> tuple[int, int, int]:
    defaults = parse_scenario({**RUN, **raw}).model_defaults()
    assert defaults is not None
    a = defaults.activations
    return a.per_layer_bytes, a.full_layer_bytes, a.total_bytes


def test_every_third_layer_of_32_checkpoints_11_and_keeps_21_whole() -> None:
    """⌈32 ÷ 3⌉ = 11 checkpointed layers (0, 3, …, 30) and 21 others; the rest of the total is every=1's."""
    one, whole, total_1 = _activations(ac_every=1)
    ckpt, whole_3, total_3 = _activations(ac_every=3)
    assert (ckpt, whole_3) == (one, whole) and ckpt == 4096 * 4096 * 2  # s·b·h × 2 B
    assert total_3 - total_1 == 21 * (whole - ckpt)


def test_every_layer_equals_the_plain_full_policy() -> None:
    assert compute_ledger(parse_scenario({**RUN, "ac_every": 1})).stages[3].peak.total == compute_ledger(
        parse_scenario(RUN)).stages[3].peak.total  # fmt: skip


def test_the_peak_grows_as_fewer_layers_are_checkpointed() -> None:
    peaks = [compute_ledger(parse_scenario({**RUN, "ac_every": n})).stages[3].peak.total for n in (1, 2, 4, 32)]
    assert peaks == sorted(peaks) and len(set(peaks)) == 4


@pytest.mark.parametrize(("raw", "says"), [
    ({"ac_every": 2, "act_policy": "none"}, "act_policy full's"),
    ({"ac_every": 33}, "above the model's 32 layers"),
])  # fmt: skip
def test_an_every_the_run_cannot_have_names_the_field(raw: dict[str, object], says: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({**RUN, **raw})
    (error,) = caught.value.errors
    assert error.field == "ac_every" and says in error.message
