"""What a scenario asks of a trace, checked before torch is imported: the model, the mesh, the dtypes.

FSDP2 (``fully_shard`` with a ``MixedPrecisionPolicy``) expresses one layout: the sharded
parameters are the optimizer's parameters (no separate master copy), their gradients and the
optimizer's states take the parameters' dtype, the all-gather casts to ``param_dtype`` and the
forward computes in it, and the reduce-scatter runs in ``reduce_dtype``. A scenario that states
another layout (the seed's BF16 parameters beside an FP32 master) cannot be traced as FSDP2, and
the error names the flags that express it. Pure Python: nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.models.architecture import Architecture, ModelConfigError
from app.ledger.models.reference import resolve
from app.ledger.models.trains import targets_of
from app.ledger.scenario import Scenario
from app.trace import HF_STACK_HINT, TITAN_HINT, hf_stack_installed, titan_installed

TRACEABLE_FAMILIES: tuple[str, ...] = ("llama", "mistral", "qwen2", "gpt2", "gpt_neox")
# --stack hf-fsdp2: the families whose transformers class runs on fake tensors: the dense ones, and the MoE ones
# through their default grouped-GEMM experts (fixed shapes). qwen3, qwen3_moe, mixtral, phi3, olmo2, gemma2 and
# deepseek_v3 only here: the lab's plain decoders (TRACEABLE_FAMILIES, --stack plain-fsdp2) have no per-head q/k
# norms, fused experts or projections, post-norms, eager soft-capped attention or latent attention.
HF_TRACEABLE: tuple[str, ...] = (
    "deepseek_v3", "gemma2", "gemma3_text", "llama", "mistral", "mixtral", "olmo2", "phi3", "qwen2", "qwen3",
    "qwen3_moe",
)  # fmt: skip
# --stack torchtitan: torchtitan's Llama 3 model (no biases; Mistral's window and Qwen2's biases are not its).
TITAN_TRACEABLE: tuple[str, ...] = ("llama",)
TITAN_MAX_SEQ = 131_072  # the llama3 registry's RoPE max_seq_len, which training.seq_len may not exceed
DTYPE_NAMES: dict[int, str] = {2: "bfloat16", 4: "float32"}
OPTIMIZERS: dict[int, str] = {0: "SGD", 1: "SGD with momentum", 2: "AdamW"}
FSDP2_LAYOUT = "--param-bytes 4 --master-bytes 0 --grad-bytes 4 --opt-bytes 4 --gather-bytes 2 --act-bytes 2"
REDUCE_WIDTHS = (2, 4)
TRACE_MAX_ACCUM = 4  # micro batches a trace runs per step: its time grows with each
MESH_DIM = "dp_shard"  # the fake mesh's one dimension (Accelerate shards over it: parallelism_config.fsdp_dim_names)


class TraceSetupError(ValueError):
    """A scenario the trace cannot build; ``problems`` holds one line per reason."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(problems))


@dataclass(frozen=True, slots=True)
class TraceSetup:
    """One traceable scenario: the model, the world size, the widths in bytes and the schedule."""

    scenario: Scenario
    architecture: Architecture
    model_title: str
    dp: int
    seq_len: int
    micro_batch: int
    param_bytes: int  # the sharded parameters, their gradients and the optimizer's states
    gather_bytes: int  # MixedPrecisionPolicy.param_dtype: all-gather and compute
    reduce_bytes: int  # MixedPrecisionPolicy.reduce_dtype
    logits_bytes: int  # the dtype the loss reads the logits in
    opt_states: int  # 0 SGD, 1 SGD with momentum, 2 AdamW
    act_policy: str  # none | full (per decoder layer) | op (torchtitan's)
    ac_every: int  # full: checkpoint layers 0, N, 2N, … (1: every layer)
    gqa: str  # native | expand (transformers' class given a mask it cannot drop)
    reshard_after_forward: bool
    optimizer_impl: str  # for-loop | foreach (torch's default on CUDA) | fused
    stack: str = "plain-fsdp2"  # plain-fsdp2: the lab's plain-torch decoders; hf-fsdp2: transformers' class;
    # torchtitan: torchtitan's Llama 3 model, checkpointing and wrapping
    loss: str = "outside"  # outside: the loop's cross_entropy on the logits; inside: the model's own (labels=);
    # chunked: torchtitan's ChunkedLossWrapper
    loss_chunks: int = 1  # chunked: the wrapper's num_chunks
    wrap: str = "root"  # root: the lab's recipe (layers, then the root); embed-tail: Accelerate's own code
    grad_accum: int = 1  # micro batches per optimizer step
    grad_sync: str = "every"  # every: reduce-scatter each micro batch; last: set_requires_gradient_sync(False) before
    reshard_after_backward: bool = True  # False: set_reshard_after_backward(False) on every micro batch but the last
    lora_rank: int = 0  # PEFT LoRA adapters of this rank (0: none)
    lora_targets: tuple[str, ...] = ()  # their target modules (``("all-linear",)``, or module names)
    frozen_layers: int = 0  # the first N decoder layers frozen (requires_grad_(False))
    freeze_embed: bool = False  # the token embedding frozen
    frozen_modules: tuple[str, ...] = ()  # every decoder layer's modules of these names frozen
    frozen_bytes: int = 4  # the frozen parameters' width (hf-fsdp2: the checkpoint's BF16, as Accelerate leaves them)

    @property
    def trains_part(self) -> bool:
        """Whether only part of the model trains (LoRA, or frozen modules)."""
        return bool(self.lora_rank or self.frozen_layers or self.freeze_embed or self.frozen_modules)

    @property
    def foreach(self) -> bool:
        return self.optimizer_impl == "foreach"

    @property
    def optimizer(self) -> str:
        return OPTIMIZERS[self.opt_states]

    def dtypes(self) -> dict[str, str]:
        return {
            "parameters": DTYPE_NAMES[self.param_bytes],
            "param_dtype": DTYPE_NAMES[self.gather_bytes],
            "reduce_dtype": DTYPE_NAMES[self.reduce_bytes],
            "logits": DTYPE_NAMES[self.logits_bytes],
        }


def _model(s: Scenario) -> tuple[Architecture | None, str, list[str]]:
    """The scenario's architecture and title, and why it is not a model of a traceable family."""
    if not s.model:
        return None, "", ["trace needs a model: --model ID or --model-config CONFIG.json"]
    try:
        ref = resolve(s.model)
    except ModelConfigError as exc:  # a parsed scenario's model resolves; kept for direct callers
        return None, "", [f"--model: {exc}"]
    arch = ref.architecture
    if arch.family in HF_TRACEABLE and arch.family not in TRACEABLE_FAMILIES and s.stack != "hf-fsdp2":
        return arch, ref.title, [f"--model: family {arch.family!r} is traced with transformers' own class only "
                                 "(--stack hf-fsdp2)"]  # fmt: skip
    if arch.family not in TRACEABLE_FAMILIES + HF_TRACEABLE:
        return (
            arch,
            ref.title,
            [
                f"--model: family {arch.family!r} is not yet traceable (traceable: {', '.join(TRACEABLE_FAMILIES)}; "
                f"with --stack hf-fsdp2 also {', '.join(f for f in HF_TRACEABLE if f not in TRACEABLE_FAMILIES)})"
            ],
        )
    return arch, ref.title, []


def _state_problems(s: Scenario) -> list[str]:
    """Why the scenario's model state (master copy, parameters, gradients, optimizer) is not FSDP2's."""
    problems: list[str] = []
    if s.master_bytes != 0:
        problems.append(
            f"--master-bytes {s.master_bytes}: FSDP2 keeps no separate master copy, the optimizer updates the "
            f"sharded parameters (the FSDP2 layout: {FSDP2_LAYOUT})"
        )
    if s.param_bytes not in DTYPE_NAMES:
        problems.append(f"--param-bytes {s.param_bytes}: only 2 (bfloat16) or 4 (float32) parameters are traceable")
    if s.grad_bytes != s.param_bytes:
        problems.append(
            f"--grad-bytes {s.grad_bytes}: FSDP2's sharded gradients take the parameters' dtype "
            f"(--param-bytes {s.param_bytes}); the reduce dtype is --reduce-bytes"
        )
    if s.opt_states not in OPTIMIZERS:
        problems.append(f"--opt-states {s.opt_states}: traceable are 0 (SGD), 1 (SGD with momentum), 2 (AdamW)")
    elif s.opt_states > 0 and s.opt_bytes != s.param_bytes:
        problems.append(
            f"--opt-bytes {s.opt_bytes}: the optimizer's states take the parameters' dtype "
            f"(--param-bytes {s.param_bytes})"
        )
    return problems


def _run_problems(s: Scenario) -> list[str]:
    """Why the scenario's forward and backward (widths, recomputation, parallelism) cannot be traced."""
    problems: list[str] = []
    if s.gather_bytes not in DTYPE_NAMES:
        problems.append(f"--gather-bytes {s.gather_bytes}: only 2 (bfloat16) or 4 (float32) all-gathers are traceable")
    elif s.act_bytes != s.gather_bytes:
        problems.append(
            f"--act-bytes {s.act_bytes}: the forward computes in the all-gather dtype, so activations are "
            f"--gather-bytes {s.gather_bytes} wide"
        )
    traceable = ("none", "op", "full") if s.stack == "torchtitan" else ("none", "full")
    if s.act_policy not in traceable:
        problems.append(f"--act-policy {s.act_policy}: not traceable with --stack {s.stack} (traceable: "
                        f"{', '.join(traceable)}; op is torchtitan's own policy)")  # fmt: skip
    if s.grad_accum > TRACE_MAX_ACCUM:
        problems.append(f"--grad-accum {s.grad_accum}: the trace runs every micro batch, at most {TRACE_MAX_ACCUM} "
                        "(the worst comes in the second; each later one repeats it)")  # fmt: skip
    if s.tp != 1 or s.sequence_parallel:
        problems.append("--tp / --sequence-parallel: the trace shards over one data-parallel mesh only (tp = 1)")
    if s.cp != 1:  # docs/parallelism.md, "Not traced on CPU": no CPU sharding strategy for the ring's SDPA
        problems.append("--cp: torch's ring attention does not run on CPU (no sharding strategy for "
                        "aten._scaled_dot_product_flash_attention_for_cpu): cp is not traced")  # fmt: skip
    if s.reduce_bytes not in REDUCE_WIDTHS:  # the scenario's field allows exactly these; kept for direct callers
        problems.append(f"--reduce-bytes {s.reduce_bytes}: one of 2 (bfloat16), 4 (float32)")
    return problems


def _stack_problems(s: Scenario, family: str) -> list[str]:
    """Why the scenario's stack and its loss cannot be traced (the model class each stack runs)."""
    if s.gqa == "expand" and s.stack != "hf-fsdp2":
        return [f"--gqa expand: traced on transformers' class only (--stack hf-fsdp2); {s.stack}'s attention "
                "reads grouped K/V natively"]  # fmt: skip
    if s.loss == "chunked" and s.stack != "torchtitan":
        return ["--loss chunked: traced with torchtitan's own ChunkedLossWrapper (--stack torchtitan)"]
    if s.loss == "fused" and s.stack != "hf-fsdp2":
        return ["--loss fused: traced with Liger's lce_forward on transformers' class (--stack hf-fsdp2)"]
    if s.stack == "plain-fsdp2":
        problems = []
        if s.loss == "inside":
            problems.append("--loss inside: the plain decoders return their logits; --stack hf-fsdp2 traces "
                            "transformers' model class, which computes its own loss")  # fmt: skip
        if s.wrap == "embed-tail":
            problems.append("--wrap embed-tail: the plain decoders are wrapped by the lab's recipe; --stack "
                            "hf-fsdp2 carves the units with Accelerate's own code")  # fmt: skip
        return problems
    if s.stack == "torchtitan":
        return _titan_problems(s, family)
    problems = []
    if family and family not in HF_TRACEABLE:
        problems.append(f"--stack {s.stack}: family {family!r} is not yet traceable with transformers' class "
                        f"(traceable: {', '.join(HF_TRACEABLE)})")  # fmt: skip
    if not hf_stack_installed():
        problems.append(HF_STACK_HINT)
    return problems


def _trains_problems(s: Scenario) -> list[str]:
    """Why what trains cannot be traced: PEFT's adapters and frozen modules run on transformers' classes only, and a
    typed trainable count says nothing of which modules train."""
    part = bool(s.lora_rank or s.frozen_layers or s.freeze_embed or s.frozen_modules)
    if s.base_quant != "none":
        return [f"--base-quant {s.base_quant}: bitsandbytes makes its 4-bit weights from real ones, not fake tensors "
                "(tests/trace/test_qlora_traced.py runs a small QLoRA model on real tensors)"]  # fmt: skip
    if part and s.stack != "hf-fsdp2":
        return [f"--stack {s.stack}: LoRA and frozen modules are traced on transformers' classes with PEFT 0.21.0 "
                "(--stack hf-fsdp2)"]  # fmt: skip
    if not part and s.trainable_params != s.params:
        return ["--trainable-params typed: the trace needs to know which modules train (--lora-rank, "
                "--frozen-layers, --freeze-embed, --frozen-modules)"]  # fmt: skip
    return []


def _titan_problems(s: Scenario, family: str) -> list[str]:
    """Why torchtitan's own Llama 3 model, checkpointing and wrapping cannot trace the scenario."""
    problems = []
    if family and family not in TITAN_TRACEABLE:
        problems.append(f"--stack torchtitan: family {family!r} is not traceable with torchtitan's Llama 3 model "
                        f"(traceable: {', '.join(TITAN_TRACEABLE)})")  # fmt: skip
    if s.loss == "inside":
        problems.append("--loss inside: torchtitan's train step computes the loss outside the model")
    if s.loss == "chunked" and s.logits_bytes != 4:
        problems.append(f"--logits-bytes {s.logits_bytes}: torchtitan's cross_entropy_loss reads the logits in "
                        "float32 (4)")  # fmt: skip
    if s.wrap != "embed-tail":
        problems.append("--wrap root: torchtitan's apply_fsdp_to_decoder carves the embedding and the tail "
                        "into units of their own (embed-tail)")  # fmt: skip
    if s.ac_every > 1:
        problems.append(f"--ac-every {s.ac_every}: torchtitan 0.3.0 checkpoints every block or none (its layer-wise "
                        "option is gone)")  # fmt: skip
    if s.buffers != "rope-per-layer":
        problems.append("--buffers none: torchtitan's attention keeps its RoPE cache buffer in every layer")
    if s.seq_len % 2 or s.seq_len > TITAN_MAX_SEQ:
        problems.append(f"--seq-len {s.seq_len}: torchtitan's RoPE cache takes an even length up to "
                        f"{TITAN_MAX_SEQ:,} (Decoder.Config.update_from_config)")  # fmt: skip
    if not titan_installed():
        problems.append(TITAN_HINT)
    return problems


def trace_setup(s: Scenario, *, foreach: bool = False) -> TraceSetup:
    """The trace ``s`` asks for, or a :class:`TraceSetupError` listing every reason it cannot be built.

    The reduce-scatter width and ``reshard_after_forward`` are the scenario's own fields (the
    reduce width defaults to the gradient width there). Inputs the trace measures instead of
    reading (params, U, the activation peak, buckets, overhead, prefetch) are not consulted.
    """
    arch, title, problems = _model(s)
    problems += _state_problems(s) + _run_problems(s) + _stack_problems(s, arch.family if arch else "")
    problems += _trains_problems(s)
    if problems or arch is None:
        raise TraceSetupError(problems)
    return TraceSetup(
        scenario=s,
        architecture=arch,
        model_title=title,
        dp=s.dp,
        seq_len=s.seq_len,
        micro_batch=s.micro_batch,
        param_bytes=s.param_bytes,
        gather_bytes=s.gather_bytes,
        reduce_bytes=s.reduce_bytes,
        logits_bytes=s.logits_bytes,
        opt_states=s.opt_states,
        act_policy=s.act_policy,
        ac_every=s.ac_every,
        gqa=s.gqa,
        reshard_after_forward=bool(s.reshard_after_forward),
        optimizer_impl="foreach" if foreach else s.optimizer_impl,
        stack=s.stack,
        loss=s.loss,
        loss_chunks=s.loss_chunks,
        wrap=s.wrap,
        grad_accum=s.grad_accum,
        grad_sync=s.grad_sync,
        reshard_after_backward=bool(s.reshard_after_backward),
        lora_rank=s.lora_rank,
        lora_targets=_targets(s),
        frozen_layers=s.frozen_layers,
        freeze_embed=bool(s.freeze_embed),
        frozen_modules=targets_of(s.frozen_modules),
        frozen_bytes=s.frozen_bytes,
    )


def _targets(s: Scenario) -> tuple[str, ...]:
    """LoRA's target modules as PEFT takes them: ``all-linear``, the names given, or the family's default."""
    if not s.lora_rank:
        return ()
    md = s.model_defaults()
    assert md is not None and md.lora is not None  # a parsed scenario with a rank has its adapters
    given = targets_of(s.lora_targets)
    return given or tuple(dict.fromkeys(m.name.rsplit(".", 1)[-1] for m in md.lora.modules))
