"""``zero3-lab trace``: one FSDP2 training step traced with PyTorch's ``FSDPMemTracker`` on fake tensors.

An optional extra (``pip install 'zero3-lab[trace]'``, pinned ``torch==2.13.0``): the lab itself never
imports torch. Only :mod:`app.trace.models`, :mod:`app.trace.step` and :mod:`app.trace.timeline` do, and
only when a trace runs (:func:`app.trace.tracer.run_trace` imports them).

- :mod:`app.trace.setup`: the scenario as a traceable FSDP2 layout, or the reasons it is not (no torch).
- :mod:`app.trace.models`: plain-torch decoders whose parameters equal the lab's inventory, one module
  per family (``swiglu``, ``gpt2``, ``gpt_neox``), their shared ``blocks`` and ``build_model``; and
  ``hf``: transformers' own model class, for the ``hf-fsdp2`` stack.
- :mod:`app.trace.accelerate`, :mod:`app.trace.titan`: Accelerate's and torchtitan's own wrapping (and
  :mod:`app.trace.units`, the units they make, by name); ``models.titan``: torchtitan's Llama 3 model.
- :mod:`app.trace.tracer`: :func:`~app.trace.tracer.run_trace`, two iterations under the tracker.
- :mod:`app.trace.step`: the fake process group, ``fully_shard``, the optimizer, one iteration.
- :mod:`app.trace.timeline`: the tracker with a timeline of named instants and the peak's location.
- :mod:`app.trace.result`: what a trace found: categories, instants, the peak's place (no torch).
- :mod:`app.trace.report`: the JSON and the table, beside the lab's stage-3 model (no torch).
- the page's trace jobs (no torch): :mod:`app.trace.queue` (huey, on SQLite or Redis), :mod:`app.trace.runner`
  (the task: a trace as a child process, :mod:`app.trace.process`), :mod:`app.trace.worker` (``zero3-lab worker``,
  and ``serve``'s own), :mod:`app.trace.jobs` (the web side: admission and where a job stands),
  :mod:`app.trace.store` (the page's cache), :mod:`app.trace.sqlite_files` (both SQLite files heal).
- :mod:`app.cli.trace`: the ``trace`` subcommand (argparse lives there; nothing here imports it).
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

TORCH_PIN = "torch==2.13.0"
INSTALL_HINT = (
    "the trace needs PyTorch, an optional extra: pip install -e '.[trace]' "
    f"(or pip install {TORCH_PIN}; scripts/setup installs it into .venv)"
)


HF_STACK_PINS = "transformers==5.23.0 accelerate==1.15.0"
HF_STACK_HINT = (
    "--stack hf-fsdp2 traces transformers' own model class sharded by Accelerate's own code, in the trace "
    f"extra: pip install -e '.[trace]' (or pip install {HF_STACK_PINS} with {TORCH_PIN})"
)


def hf_stack_installed() -> bool:
    """Whether transformers and accelerate can be imported, asked without importing them."""
    return all(importlib.util.find_spec(name) is not None for name in ("transformers", "accelerate"))


# torchtitan imports triton (its distributed package loads Triton kernels) and needs only tyro and spmd_types
# besides torch for the parts the trace runs: installed without its other dependencies (scripts/setup).
TITAN_PIN = "torchtitan==0.3.0"
TITAN_NEEDS = "triton==3.9.0 tyro==1.0.17 spmd_types==0.2.3"
TITAN_HINT = (
    "--stack torchtitan traces torchtitan's own Llama 3 model, checkpointing and wrapping: pip install --no-deps "
    f"{TITAN_PIN}, and pip install {TITAN_NEEDS} with {TORCH_PIN} (the trace extra has them; scripts/setup does "
    "both)"
)


def titan_installed() -> bool:
    """Whether torchtitan and what its import needs can be found, asked without importing them."""
    return all(importlib.util.find_spec(name) is not None for name in ("torchtitan", "triton", "tyro", "spmd_types"))


def torch_installed() -> bool:
    """Whether torch can be imported, asked without importing it."""
    return importlib.util.find_spec("torch") is not None


def import_torch() -> Any:
    """``import torch`` without its "Failed to initialize NumPy" warning (the trace needs no NumPy).

    Call it before importing anything that imports torch (:mod:`app.trace.models`): the first
    import is the one that warns, and the test suite turns warnings into errors.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch

    return torch
