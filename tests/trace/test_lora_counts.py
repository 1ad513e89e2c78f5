"""LoRA's parameter counts against PEFT 0.21.0 itself: transformers' own model class for each catalogue config, built
on the meta device, given ``get_peft_model(model, LoraConfig(r, target_modules))``. Every parameter, and those
that require a gradient, are the lab's ``params`` and ``trainable_params`` for the same ``lora_rank`` and
``lora_targets`` (PEFT's default targets where none are given), to the parameter."""

from __future__ import annotations

from typing import Any

import pytest

from app.ledger.models.reference import config_of
from app.ledger.scenario import parse_scenario
from app.trace import torch_installed

pytestmark = [
    pytest.mark.trace,
    pytest.mark.skipif(not torch_installed(), reason="the trace extra is not installed (pip install -e '.[trace]')"),
    # PEFT reads transformers 5.23.0's deprecated alias, and sets fan_in_fan_out itself for GPT-2's Conv1D
    pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"),
    pytest.mark.filterwarnings("ignore:fan_in_fan_out is set to False:UserWarning"),
    # PEFT's fused gate_up rank and alpha patterns, which it says matched no module and applies to the tensor anyway
    pytest.mark.filterwarnings("ignore:The following (rank|alpha)_pattern keys did not match:RuntimeWarning"),
]

CASES = [
    ("llama-3.1-8b", 16, "all-linear"),
    ("llama-3.1-8b", 8, ""),  # PEFT's default for llama: q_proj, v_proj
    ("llama-3.2-1b", 16, "all-linear"),  # tied embeddings: the output layer is still left out
    ("qwen3-8b", 32, "all-linear"),
    ("gemma-2-2b", 8, "q_proj,k_proj,v_proj,o_proj"),
    ("phi-3-mini", 16, "all-linear"),  # fused qkv_proj and gate_up_proj
    ("gpt2", 8, ""),  # Conv1D: c_attn
    ("gpt2", 4, "c_proj"),  # the attention's and the MLP's, both
    ("gpt-neox-20b", 8, "all-linear"),
    ("qwen3-30b-a3b", 8, "q_proj,v_proj"),  # a mixture of experts: adapters on its attention
    ("mixtral-8x7b-v0.1", 16, "q_proj,k_proj,v_proj,o_proj"),
    # its router and 3-D experts by their transformers-4 names (target_parameters), gate and up fused at twice the rank
    ("qwen3-30b-a3b", 16, "all-linear"),
    ("qwen3-30b-a3b", 8, "gate_proj,up_proj,down_proj"),
    ("qwen3-30b-a3b", 4, "gate"),
    ("mixtral-8x7b-v0.1", 16, "all-linear"),  # rank 16 on a router of 8 outputs: PEFT adapts it all the same
    ("mixtral-8x7b-v0.1", 8, "w2,q_proj"),
    # latent attention; the router and routed experts of its MoE layers, never its dense layers' MLP nor shared experts
    ("deepseek-v3", 16, "all-linear"),
    ("deepseek-v3", 8, "q_b_proj,kv_b_proj,o_proj"),
    ("deepseek-v3", 8, "gate_proj,up_proj,down_proj"),
]


@pytest.mark.parametrize(("model", "rank", "targets"), CASES)
def test_the_adapters_are_peft_s_own(model: str, rank: int, targets: str) -> None:
    from peft import LoraConfig, get_peft_model

    from app.trace import import_torch
    from app.trace.models.hf import build_hf_model

    torch = import_torch()
    # a list of names, which PEFT matches by the module path's last component (a string would be a regex), or its
    # all-linear shorthand, or None for its default
    names = targets.split(",") if targets and targets != "all-linear" else targets or None
    with torch.device("meta"):
        wrapped = get_peft_model(build_hf_model(config_of(model)), LoraConfig(r=rank, target_modules=names))
    every = sum(p.numel() for p in wrapped.parameters())
    trains = sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
    s = parse_scenario({"model": model, "lora_rank": rank, "lora_targets": targets})
    assert (s.params, s.trainable_params) == (every, trains)
    assert s.source_of("params") == s.source_of("trainable_params") == "from config"


@pytest.mark.parametrize(("model", "layers", "embed"), [("llama-3.1-8b", 16, False), ("llama-3.1-8b", 8, True),
                                                        ("llama-3.2-1b", 4, True), ("gpt2", 6, True)])  # fmt: skip
def test_frozen_modules_are_what_requires_grad_false_leaves(model: str, layers: int, embed: bool) -> None:
    """transformers' own class: the first decoder layers, and the input embedding, given requires_grad_(False); a tied
    head is the embedding's own weight, and GPT-2's learned positions belong with its embedding."""
    from app.trace import import_torch
    from app.trace.models.hf import build_hf_model

    torch = import_torch()
    with torch.device("meta"):
        built: Any = build_hf_model(config_of(model))
    for layer in list(built.base_model.layers if hasattr(built.base_model, "layers") else built.base_model.h)[:layers]:
        layer.requires_grad_(False)
    if embed:
        built.get_input_embeddings().requires_grad_(False)
        if hasattr(built.base_model, "wpe"):
            built.base_model.wpe.requires_grad_(False)
    trains = sum(p.numel() for p in built.parameters() if p.requires_grad)
    s = parse_scenario({"model": model, "frozen_layers": layers, "freeze_embed": int(embed)})
    assert s.trainable_params == trains and s.params == sum(p.numel() for p in built.parameters())


@pytest.mark.parametrize(
    ("model", "modules"),
    [("llama-3.1-8b", "self_attn"), ("llama-3.2-1b", "mlp,input_layernorm"), ("qwen3-8b", "q_norm,k_proj,down_proj"),
     ("gemma-2-2b", "pre_feedforward_layernorm,o_proj"), ("phi-3-mini", "qkv_proj"), ("qwen3-30b-a3b", "experts"),
     ("gpt2", "c_proj,ln_1")],
)  # fmt: skip
def test_modules_frozen_by_name_are_what_requires_grad_false_leaves(model: str, modules: str) -> None:
    """transformers' own class: every decoder layer's modules of those names given requires_grad_(False), matched by
    the last component of their path as ``named_modules()`` gives it (GPT-2's c_proj: the attention's and the MLP's)."""
    from app.trace import import_torch
    from app.trace.models.hf import build_hf_model

    torch = import_torch()
    names = set(modules.split(","))
    with torch.device("meta"):
        built: Any = build_hf_model(config_of(model))
    for layer in list(built.base_model.layers if hasattr(built.base_model, "layers") else built.base_model.h):
        for name, module in layer.named_modules():
            if name.rsplit(".", 1)[-1] in names:
                module.requires_grad_(False)
    trains = sum(p.numel() for p in built.parameters() if p.requires_grad)
    s = parse_scenario({"model": model, "frozen_modules": modules})
    assert s.trainable_params == trains < s.params == sum(p.numel() for p in built.parameters())


@pytest.mark.parametrize(
    "trains", [{"frozen_modules": "self_attn,post_attention_layernorm"}, {"frozen_layers": 3, "freeze_embed": 1},
               {"frozen_layers": 2, "frozen_modules": "c_attn", "freeze_embed": 1, "model": "gpt2"}],
)  # fmt: skip
def test_the_hf_trainer_snippet_freezes_what_the_scenario_freezes(trains: dict[str, object]) -> None:
    """The code the HF Trainer snippet's note gives for what is frozen, run on transformers' own class, leaves
    trainable exactly the scenario's trainable parameters."""
    from app.interop.hf_trainer import hf_trainer_snippet
    from app.trace import import_torch
    from app.trace.models.hf import build_hf_model

    torch = import_torch()
    s = parse_scenario({"model": "llama-3.2-1b", "stack": "hf-fsdp2", **trains})
    note = next(note for note in hf_trainer_snippet(s).notes if "; here: " in note)
    with torch.device("meta"):
        model: Any = build_hf_model(config_of(s.model))
    for line in note.split("; here: ", 1)[1].split("; "):
        exec(line, {"model": model})  # noqa: S102 - the snippet's own code, on a model built here
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == s.trainable_params
