"""The FSDP units a stack's own wrapping code made, by name (imports torch: call it from a trace only)."""

from __future__ import annotations

from typing import Any

from torch.distributed.fsdp import FSDPModule


def unit_names(model: Any, embedding: Any | None) -> dict[str, str]:
    """Each FSDP module of ``model`` by qualified name: ``root``; ``layers.k`` (checkpoint wrappers looked
    through); ``embed`` for ``embedding``, the input embedding when it is a unit of its own (untied); ``tail`` for
    the rest: the final norm and the head, one unit (tied: with the embedding)."""
    names = {}
    for fqn, module in model.named_modules():
        if not isinstance(module, FSDPModule):
            continue
        parts = [p for p in fqn.split(".") if p != "_checkpoint_wrapped_module"]
        if not fqn:
            names[fqn] = "root"
        elif parts[-1].isdigit():
            names[fqn] = ".".join(parts[-2:])
        elif embedding is not None and module is embedding:
            names[fqn] = "embed"
        else:
            names[fqn] = "tail"
    return names
