"""QLoRA's 4-bit base against bitsandbytes 0.50.2 itself (its CPU backend quantizes and dequantizes): transformers'
own Llama loaded through ``BitsAndBytesConfig`` (NF4, with and without double quantisation, ``quant_storage``
bfloat16), PEFT LoRA, Accelerate 1.15.0's ``fsdp2_prepare_model`` on a fake process group, two AdamW steps under
torch's ``FSDPMemTracker``. Real tensors: the model is small.

Held: the packed codes' per-rank bytes and the quant states' bytes (read off bitsandbytes' own tensors, by storage)
equal the lab's to the byte; the quant states are whole on every rank; the walked peak is within 5 % of the traced
one plus the quant states (module attributes made at load, which the tracker does not see)."""

from __future__ import annotations

import importlib.util
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.trace.setup import trace_setup
from tests.support.hf_trace import MARKS

pytestmark = [
    *MARKS,
    pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None, reason="bitsandbytes is not installed"),
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning"),
]

LLAMA: dict[str, Any] = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 4096}  # fmt: skip
RUN: dict[str, Any] = {"model": compact(LLAMA), "stack": "hf-fsdp2", "dp": 4, "seq_len": 512, "lora_rank": 8}


def _scenario(kind: str) -> Any:
    return parse_scenario({**RUN, "base_quant": kind})


def _storages(tensors: Any) -> int:
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())


def _run(kind: str, checkpoint: Path) -> dict[str, int]:
    import torch
    from peft import LoraConfig, get_peft_model
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    from app.trace import step
    from app.trace.accelerate import prepare
    from app.trace.collectives import CollectiveBytes

    q = BitsAndBytesConfig(  # type: ignore[no-untyped-call]
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=kind == "nf4-dq",
        bnb_4bit_quant_storage=torch.bfloat16, bnb_4bit_compute_dtype=torch.bfloat16,
    )  # fmt: skip
    setup = trace_setup(parse_scenario({**RUN, "lora_rank": 0}))  # Accelerate's plugin as the stack sets it
    with step.fake_world(4) as mesh:
        model: Any = AutoModelForCausalLM.from_pretrained(checkpoint, quantization_config=q, dtype=torch.bfloat16,
                                                          device_map="cpu")  # fmt: skip
        model.train()
        model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        model, _ = prepare(model, setup, mesh, mp)
        frozen = [p.to_local() for p in model.parameters() if not p.requires_grad]
        # bitsandbytes keeps each Linear4bit's quant_state on the module too: FSDP2's DTensor weight has none
        states = [m.quant_state for m in model.modules() if getattr(m, "quant_state", None) is not None]
        parts = [t for st in states for t in (st.absmax, st.code)]
        parts += [t for st in states if st.nested for t in (st.offset, st.state2.absmax, st.state2.code)]
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        tokens = torch.randint(0, LLAMA["vocab_size"], (1, RUN["seq_len"]))
        tracker = FSDPMemTracker(model, optimizer)
        tracker.track_inputs((tokens,))
        collectives = CollectiveBytes()
        with tracker:
            for iteration in range(2):  # the second is the steady state (the first makes AdamW's states)
                if iteration:
                    tracker.reset_mod_stats()
                with collectives if iteration else nullcontext():
                    optimizer.zero_grad(set_to_none=True)
                    model(input_ids=tokens, labels=tokens).loss.backward()
                    optimizer.step()
        peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
        return {
            "frozen": sum(int(p.numel()) * p.element_size() for p in frozen),
            "states": _storages(parts),
            "weights": len(states),
            "peak": int(peak["Total"]),
            "all_gather": collectives.sums["all_gather"],
            "reduce_scatter": collectives.sums["reduce_scatter"],
        }


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    checkpoint = tmp_path_factory.mktemp("llama")
    made = AutoModelForCausalLM.from_config(AutoConfig.for_model(**LLAMA)).to(torch.bfloat16)  # type: ignore[no-untyped-call]
    made.save_pretrained(checkpoint)
    return {kind: _run(kind, checkpoint) for kind in ("nf4", "nf4-dq")}


@pytest.mark.parametrize("kind", ["nf4", "nf4-dq"])
def test_the_packed_base_and_its_quant_states_are_the_labs_to_the_byte(traced: Any, kind: str) -> None:
    from app.ledger.ledger import compute_ledger

    s, seen = _scenario(kind), traced[kind]
    md = s.model_defaults()
    assert md is not None and md.quant is not None
    params = next(ln for ln in compute_ledger(s, schedule=False).stages[3].lines if ln.tensor_class == "parameters")
    assert seen["frozen"] == params.frozen_elements * params.frozen_width
    assert seen["weights"] == 4 * 7 and seen["states"] == md.quant.state_bytes


def test_double_quantisation_stores_a_quarter_of_the_scales_and_more_tables(traced: Any) -> None:
    """One byte per block instead of four, plus per weight an FP32 mean, absmaxes per 256 blocks and a 256-entry
    table: smaller here, as bitsandbytes measures it."""
    assert traced["nf4-dq"]["states"] < traced["nf4"]["states"]
    assert traced["nf4-dq"]["frozen"] == traced["nf4"]["frozen"]


@pytest.mark.parametrize("kind", ["nf4", "nf4-dq"])
def test_the_base_is_all_gathered_as_its_packed_codes(traced: Any, kind: str) -> None:
    """Stage 3's all-gathers send the packed BF16 codes (a quarter of the values' elements), the reduce-scatters
    the adapters' gradients alone, in this run's FP32 reduce dtype: the lab's terms, to the byte."""
    from app.ledger.state.communication import communication

    terms = communication(parse_scenario({**RUN, "base_quant": kind, "reduce_bytes": 4}), 3).terms
    assert traced[kind]["all_gather"] == sum(t.buffer for t in terms if t.what.startswith("all-gather"))
    assert traced[kind]["reduce_scatter"] == sum(t.buffer for t in terms if t.what.startswith("reduce-scatter"))


@pytest.mark.parametrize("kind", ["nf4", "nf4-dq"])
def test_the_walked_peak_is_within_5_percent_of_the_trace(traced: Any, kind: str) -> None:
    from app.ledger.estimate import estimate

    s = _scenario(kind)
    md = s.model_defaults()
    assert md is not None and md.quant is not None
    measured = traced[kind]["peak"] + md.quant.state_bytes  # made at load, before the tracker starts
    walked = estimate(s).ledger.stages[3].peak
    assert walked.schedule is not None
    assert abs(walked.total - measured) * 20 <= measured, (walked.total, measured)
