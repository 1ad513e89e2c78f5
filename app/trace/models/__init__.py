"""Plain-torch decoders whose parameters are exactly the inventory of :mod:`app.ledger.models`.

Each family is written after the Hugging Face ``transformers`` modelling code it stands for, so that
the tensors autograd saves are the ones a real run saves on the same kernels, and the parameter
names and shapes are the checkpoint's (``model.layers.0.self_attn.q_proj.weight``; GPT-2's
``Conv1D`` weights stored [in, out]). That matters twice: FSDP2 pads dim 0 of exactly these
tensors, and a test holds every name, shape and the count to :func:`app.ledger.models.inventory`.

What each family computes (the choices a trace reproduces) is stated once, in its module:

- :mod:`app.trace.models.swiglu`: llama, mistral, qwen2 (mixtral: transformers' own class, ``hf.py``).
- :mod:`app.trace.models.gpt2`: gpt2 (eager attention, dropout 0.1).
- :mod:`app.trace.models.gpt_neox`: gpt_neox (partial rotary, parallel residual, no dropout).
- :mod:`app.trace.models.blocks`: what they share (RMSNorm, rotary tables, dropout as CUDA runs it,
  eager attention and SDPA).
- :mod:`app.trace.models.build`: :func:`build_model`, :func:`decoder_layers`, :func:`parameter_inventory`.

No weight is ever initialised for real: the trace builds these under ``FakeTensorMode``.
"""

from __future__ import annotations

from app.trace.models.blocks import Progress
from app.trace.models.build import ModelBuildError, build_model, decoder_layers, parameter_inventory
from app.trace.models.gpt_neox import neox_rotary_dims

__all__ = [
    "ModelBuildError",
    "Progress",
    "build_model",
    "decoder_layers",
    "neox_rotary_dims",
    "parameter_inventory",
]
