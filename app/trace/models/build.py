"""The family's decoder for an architecture, its decoder layers and its parameter inventory."""

from __future__ import annotations

from torch import nn

from app.ledger.models.architecture import Architecture
from app.trace.models.blocks import Progress
from app.trace.models.gpt2 import GPT2LMHeadModel
from app.trace.models.gpt_neox import GPTNeoXForCausalLM
from app.trace.models.swiglu import SwiGLUForCausalLM
from app.trace.setup import TRACEABLE_FAMILIES


class ModelBuildError(ValueError):
    """A config the trace cannot build (a family it does not implement yet)."""


def build_model(arch: Architecture, progress: Progress | None = None) -> nn.Module:
    """The family's decoder for ``arch`` (call under ``FakeTensorMode`` for a model of any size).

    Raises :class:`ModelBuildError` for a family the trace does not implement yet.
    """
    report: Progress = progress or (lambda done, total: None)
    if arch.family == "gpt2":
        return GPT2LMHeadModel(arch, report)
    if arch.family == "gpt_neox":
        return GPTNeoXForCausalLM(arch, report)
    if arch.family in ("llama", "mistral", "qwen2"):
        return SwiGLUForCausalLM(arch, report)
    raise ModelBuildError(f"family {arch.family!r} is not yet traceable (traceable: {', '.join(TRACEABLE_FAMILIES)})")


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The decoder layers of a model :func:`build_model` made, in execution order."""
    for body_name, list_name in (("model", "layers"), ("transformer", "h"), ("gpt_neox", "layers")):
        body = getattr(model, body_name, None)
        if isinstance(body, nn.Module):
            layers = getattr(body, list_name)
            assert isinstance(layers, nn.ModuleList)
            return list(layers)
    raise TypeError(f"{type(model).__name__} is not a model build_model makes")


def parameter_inventory(model: nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every distinct parameter, in registration order (a tied head counted once)."""
    return [(name, tuple(p.shape)) for name, p in model.named_parameters()]
