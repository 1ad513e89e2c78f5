"""What trains, applied to transformers' model before it is sharded, as a fine-tuning script applies it: PEFT 0.21.0's
``get_peft_model`` with a ``LoraConfig``, or ``requires_grad_(False)`` on the first decoder layers, the embedding, and
every layer's modules of the names given (``layer.named_modules()``' last path component). Imports torch and (with LoRA)
peft: call it from a trace only.

PEFT cannot inject adapters under ``FakeTensorMode`` (``_move_adapter_to_device_of_base_layer`` fails to swap the new
weights in): the injection runs with the fake mode set aside and the meta device as the default, so the adapters are
made on the meta device (no memory), and each is then replaced by a fake tensor of the same shape, dtype and
``requires_grad`` on the base's device. The base model stays fake throughout. Where only part of the model trains, the
stack loads the checkpoint in its own 16 bits (``from_pretrained(dtype="auto")``); Accelerate then upcasts only what
trains (:mod:`app.trace.accelerate`): the frozen parameters are cast to the frozen width here and what trains stays in
FP32, where Accelerate's upcast would put it (its log line needs an ``Accelerator`` the fake world has not).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

from app.trace.models import decoder_layers
from app.trace.setup import TraceSetup

_WIDTHS = {2: torch.bfloat16, 4: torch.float32}


def apply_trains(model: Any, setup: TraceSetup) -> Any:
    """``model`` with only what ``setup`` trains left trainable (a PEFT model with LoRA); unchanged when all train."""
    if not setup.trains_part:
        return model
    if setup.lora_rank:
        model = _with_adapters(model, setup)
    else:
        if setup.freeze_embed:
            model.get_input_embeddings().requires_grad_(False)  # a tied head shares its weight: frozen with it
            positions = getattr(getattr(model, "transformer", None), "wpe", None)  # GPT-2's learned positions
            if positions is not None:
                positions.requires_grad_(False)
        for layer in decoder_layers(model)[: setup.frozen_layers]:
            layer.requires_grad_(False)
        for layer in decoder_layers(model):
            for name, module in layer.named_modules():
                if name.rsplit(".", 1)[-1] in setup.frozen_modules:
                    module.requires_grad_(False)
    for p in model.parameters():
        if not p.requires_grad:
            p.data = p.data.to(_WIDTHS[setup.frozen_bytes])
    return model


def _with_adapters(model: Any, setup: TraceSetup) -> Any:
    import warnings

    from peft import LoraConfig, get_peft_model

    base = next(model.parameters())
    mode, device = base.fake_mode, base.device
    targets: str | list[str] = "all-linear" if setup.lora_targets == ("all-linear",) else list(setup.lora_targets)
    # made on the meta device, which PEFT leaves where it is (_move_adapter_to_device_of_base_layer skips meta): no
    # real memory however large the adapters (rank × E per expert stack: 60 GB in FP32 for a 235B MoE at rank 64)
    with unset_fake_temporarily(), torch.device("meta"), warnings.catch_warnings():
        # PEFT 0.21.0 warns that its fused gate_up's doubled rank and alpha matched no *module*, then applies them to
        # the ParamWrapper of that tensor all the same (its lora_A has 2·r·E rows: tests/trace/test_lora_counts.py)
        warnings.filterwarnings("ignore", "The following (rank|alpha)_pattern keys did not match", RuntimeWarning)
        peft_model = get_peft_model(model, LoraConfig(r=setup.lora_rank, target_modules=targets))
    for module in peft_model.modules():
        for name, p in list(module._parameters.items()):
            if p is not None and not isinstance(p, FakeTensor):
                with mode:  # FP32: PEFT's autocast_adapter_dtype
                    fake = torch.empty(p.shape, dtype=p.dtype, device=device)
                module._parameters[name] = torch.nn.Parameter(fake, requires_grad=p.requires_grad)
    return peft_model
