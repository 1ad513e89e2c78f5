"""QLoRA's 4-bit base (``base_quant``): its bounds, named refusals, and what it changes in the ledger. What
bitsandbytes itself stores is held in tests/trace/test_qlora_traced.py."""

from __future__ import annotations

import pytest

from app.ledger.estimate import estimate
from app.ledger.ledger import compute_ledger
from app.ledger.models.quant import packed_elements, state_bytes
from app.ledger.scenario import ScenarioError, parse_scenario

QLORA = {"model": "llama-3.1-8b", "lora_rank": 16, "stack": "hf-fsdp2", "dp": 8, "seq_len": 2048}


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ({"model": "llama-3.1-8b", "base_quant": "nf4"}, "quantizes the frozen base of a LoRA run"),
        ({"base_quant": "nf4"}, "needs a model"),
        ({"model": "gpt2", "lora_rank": 8, "base_quant": "nf4"}, "modelled for llama"),
        ({**QLORA, "base_quant": "nf4", "frozen_bytes": 4}, "needs frozen_bytes 2"),
        ({**QLORA, "base_quant": "nf4", "gather_bytes": 4}, "needs gather_bytes 2"),
        ({**QLORA, "base_quant": "nf8"}, "base_quant"),
    ],
)
def test_a_4_bit_base_the_run_cannot_have_is_refused_naming_base_quant(raw: dict[str, object], why: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        parse_scenario(raw)
    assert [e.field for e in refused.value.errors] == ["base_quant"]
    assert why in str(refused.value)


def test_the_packed_codes_and_scales_of_one_weight() -> None:
    """Llama 3.1 8B's gate_proj, 14,336 × 4,096 values: 4 bits each in 2-byte elements, one FP32 absmax per 64 values
    and the 16-entry table; with double quantisation one byte per 64, its mean, an absmax per 256 blocks and a
    256-entry table."""
    values = 14_336 * 4_096
    assert packed_elements(values) == values // 4 == 14_680_064
    assert state_bytes(values, nested=False) == values // 64 * 4 + 64 == 3_670_080
    assert state_bytes(values, nested=True) == values // 64 + 64 + 4 + values // 16_384 * 4 + 1_024 == 932_932


def test_the_frozen_base_shards_as_its_packed_elements_and_the_oracle_agrees() -> None:
    lora, qlora = (parse_scenario({**QLORA, "base_quant": q}) for q in ("none", "nf4"))
    md = qlora.model_defaults()
    assert md is not None and md.quant is not None
    assert md.quant.values == 32 * (2 * 4_096 * 4_096 + 2 * 4_096 * 1_024 + 3 * 4_096 * 14_336)
    params = {s.base_quant: compute_ledger(s, schedule=False).stages[3].lines[0] for s in (lora, qlora)}
    frozen_cut = (md.quant.values - md.quant.storage) // 8 * 2  # D 8, BF16: everything divides
    assert params["none"].bytes - params["nf4"].bytes == frozen_cut
    e = estimate(qlora)
    assert all(c.passed for c in e.checks), [c.message for c in e.checks if not c.passed]


def test_the_walk_holds_the_quant_states_whole_and_a_dequantized_weight() -> None:
    s = parse_scenario({**QLORA, "base_quant": "nf4-dq", "act_policy": "full"})
    md = s.model_defaults()
    assert md is not None and md.quant is not None
    schedule = estimate(s, with_kill_lists=False).ledger.stages[3].peak.schedule
    assert schedule is not None
    layer = next(i for i in schedule.instants if i.key == "backward-layer-0")
    whats = {e.what: e.bytes for e in layer.entries}
    assert any(v == md.quant.state_bytes for w, v in whats.items() if "quant states" in w)
    assert whats["the largest 4-bit weight dequantized for its matmul"] == 14_336 * 4_096 * 2
