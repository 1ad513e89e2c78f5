"""The ``hf-fsdp2`` stack's wrapping, by Accelerate's own code: what ``Accelerator.prepare`` does to a
transformers model under FSDP2 (accelerate 1.15.0, ``accelerator.py`` ``prepare_model``).

``fsdp2_apply_ac`` wraps each decoder layer in ``checkpoint_wrapper`` when activation checkpointing is on,
then ``fsdp2_prepare_model`` upcasts the trainable parameters to FP32 and shards: each decoder layer (the
transformer-based wrap policy on ``_no_split_modules``), the input embedding alone (untied), the final norm
with the head as one unit that is not resharded after forward (tied: norm, embedding and head together),
and the root last with FSDP2's default. Both functions read only a few attributes of the accelerator;
:class:`_Accelerator` stands in for it on the fake process group, with a real
``FullyShardedDataParallelPlugin``. Imports torch and accelerate: call it from a trace only.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from accelerate.utils import FullyShardedDataParallelPlugin
from accelerate.utils.fsdp_utils import fsdp2_apply_ac, fsdp2_prepare_model
from torch.distributed.fsdp import MixedPrecisionPolicy

from app.trace.setup import MESH_DIM, TraceSetup
from app.trace.units import unit_names


class _Accelerator(SimpleNamespace):
    """What ``fsdp2_apply_ac`` and ``fsdp2_prepare_model`` read of an ``Accelerator``."""


def prepare(model: Any, setup: TraceSetup, mesh: Any, mp: MixedPrecisionPolicy) -> tuple[Any, dict[str, str]]:
    """Shard ``model`` as Accelerate does: the prepared model and its FSDP modules' names by qualified name
    (``root``; ``embed``; ``tail``: the final norm and the head, one unit; ``layers.k``)."""
    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2,
        auto_wrap_policy="transformer_based_wrap",  # the HF Trainer's default under FSDP2
        reshard_after_forward=setup.reshard_after_forward,
        mixed_precision_policy=mp,
        # every N-th layer is the model's own checkpointing (below), not the plugin's, which wraps every layer
        activation_checkpointing=setup.act_policy == "full" and setup.ac_every == 1,
    )
    accelerator = _Accelerator(
        state=SimpleNamespace(fsdp_plugin=plugin),
        torch_device_mesh=mesh,
        parallelism_config=SimpleNamespace(fsdp_dim_names=(MESH_DIM,)),
        mixed_precision="bf16" if setup.gather_bytes == 2 else "no",
        is_main_process=True,
        device=torch.device("cpu"),
    )
    if plugin.activation_checkpointing:
        model = fsdp2_apply_ac(accelerator, model)
    elif setup.act_policy == "full":  # the HF Trainer's activation_checkpointing_kwargs={"every_n_layers": N}
        model.activation_checkpointing_enable(every_n_layers=setup.ac_every)
    model = fsdp2_prepare_model(accelerator, model)
    embedding = model.get_input_embeddings()
    untied = embedding.weight is not model.get_output_embeddings().weight
    return model, unit_names(model, embedding if untied else None)
