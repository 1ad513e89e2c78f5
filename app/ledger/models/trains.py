"""What trains: LoRA adapters as PEFT 0.21.0 adds them, or a model's own modules frozen.

**Frozen modules** (``requires_grad_(False)`` before the model is sharded): the first ``frozen_layers`` decoder
layers, with ``freeze_embed`` the token embedding (GPT-2's learned positions with it; a tied head shares the
embedding's weight, so it is frozen too), and with ``frozen_modules`` the modules of every decoder layer of those
names (transformers' own: ``self_attn``, ``mlp``, ``q_proj``, ``input_layernorm`` …; a module's name is the last
component of its path, as ``layer.named_modules()`` gives it, and freezing a module freezes what it holds). Their
parameters stay, sharded and gathered; they take no gradient.

**LoRA** adapters, which modules they wrap and how many parameters they add:

``LoraConfig(r, target_modules)`` wraps each targeted linear module (``torch.nn.Linear``, or GPT-2's ``Conv1D``) of
weight [a, b] with ``lora_A`` (r × in) and ``lora_B`` (out × r), no bias (``bias="none"``, the default): r × (a + b)
parameters, inside the module, so inside the FSDP unit (the decoder layer) that holds it. ``get_peft_model`` freezes
every other parameter: the adapters are what trains. Targets are module names matched as PEFT matches them, the
last component of the module's path (``c_proj`` names both of GPT-2's); ``all-linear`` is every linear module but
the output layer (``tuners_utils._maybe_include_all_linear_layers``); none given is PEFT's default for the model
type (``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``), where it has one.

Modelled for the dense decoder families (their linear modules are the layers' 2-D weights of the inventory) and,
on Qwen3-MoE and Mixtral, for the attention's projections: there PEFT 0.21.0's ``all-linear`` also wraps the
router and, through ``target_parameters``, the fused 3-D experts (a ``ParamWrapper`` per expert tensor), which are
not modelled and are refused with the router and the experts as targets. DeepSeek's latent attention is refused, as
are tensor, pipeline and expert parallelism with adapters.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import n
from app.ledger.models.architecture import Architecture
from app.ledger.models.inventory import Inventory, Tensor

ALL_LINEAR = "all-linear"  # PEFT's INCLUDE_LINEAR_LAYERS_SHORTHAND
# peft 0.21.0 utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, for the families modelled here
PEFT_DEFAULTS: dict[str, tuple[str, ...]] = {
    "llama": ("q_proj", "v_proj"),
    "mistral": ("q_proj", "v_proj"),
    "qwen2": ("q_proj", "v_proj"),
    "qwen3": ("q_proj", "v_proj"),
    "gemma2": ("q_proj", "v_proj"),
    "gemma3_text": ("q_proj", "v_proj"),
    "gpt2": ("c_attn",),
    "gpt_neox": ("query_key_value",),
}
# the dense decoder families, whose layers' linear modules are the inventory's 2-D layer weights, and the mixtures
# of experts whose attention's are (none of these four has PEFT 0.21.0 default targets that match transformers
# 5.23.0's class: mixtral's entry, q_proj and v_proj, leaves get_peft_model raising NoMatchingPeftModuleError)
MODELLED = (*PEFT_DEFAULTS, "olmo2", "phi3", "qwen3_moe", "mixtral")
MOE_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")  # a mixture of experts' modelled targets: its attention
TARGETS_ALLOWED = f"{ALL_LINEAR}, or module names separated by commas"


class LoraError(ValueError):
    """LoRA inputs the model cannot take: ``field`` names the input, ``allowed`` what it may be."""

    def __init__(self, field: str, message: str, allowed: str) -> None:
        self.field = field
        self.allowed = allowed
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Lora:
    """The adapters of one LoRA config on one model: per targeted module of one decoder layer (its name, its
    weight's two dimensions), and the parameters they add per layer and in all."""

    rank: int
    modules: tuple[tuple[str, int, int], ...]
    per_layer: int
    params: int

    @property
    def formula(self) -> str:
        terms = " + ".join(f"({n(a)} + {n(b)})" for _, a, b in self.modules)
        return f"{n(self.params // self.per_layer)} layers × {self.rank} × ({terms}) = {n(self.params)}"


def adapter_tensors(adapters: Lora) -> tuple[Tensor, ...]:
    """One decoder layer's adapter tensors: ``lora_A`` (r × in) and ``lora_B`` (out × r) per targeted module."""
    r = adapters.rank
    return tuple(
        t for name, a, b in adapters.modules
        for t in (Tensor(f"{name}.lora_A", (r, b), r * b), Tensor(f"{name}.lora_B", (a, r), a * r))
    )  # fmt: skip


def trained_root(inv: Inventory, embed_frozen: bool) -> tuple[Tensor, ...]:
    """What trains of the model's own tensors outside its layers: the embedding unless frozen (a tied head with it),
    the final norm and an untied head (LoRA trains none of them: not asked here)."""
    return (() if embed_frozen else inv.embed.tensors) + inv.final.tensors


def trained_layer(tensors: tuple[Tensor, ...], modules: frozenset[str]) -> tuple[Tensor, ...]:
    """What trains of one decoder layer's tensors when its modules of those names are frozen."""
    return tuple(t for t in tensors if not frozen_by(t.name, modules))


def layer_modules(inv: Inventory) -> tuple[str, ...]:
    """The names of the modules of the model's decoder layers that hold parameters or contain ones that do (every
    component of a layer tensor's path but the parameter's own name), sorted."""
    return tuple(
        sorted({part for _, _, unit in inv.layer_kinds for t in unit.tensors for part in t.name.split(".")[:-1]})
    )


def frozen_by(tensor: str, modules: frozenset[str]) -> bool:
    """Whether the layer tensor named ``tensor`` (its path in the layer) lies in a module of one of those names."""
    return any(part in modules for part in tensor.split(".")[:-1])


def frozen_modules(arch: Architecture, inv: Inventory, text: str) -> frozenset[str]:
    """The module names a ``frozen_modules`` input lists, each one a module of the model's layers. Raises
    :class:`LoraError` naming ``frozen_modules`` for a name the family's layers lack, or names that leave no
    parameter of a layer to train (that is ``frozen_layers``)."""
    names = targets_of(text)
    if arch.two_kinds:  # the trained layout and the walk read one kind of layer's modules
        raise LoraError("frozen_modules", f"modules frozen by name in {arch.family}'s two kinds of layer (dense, then "
                        "MoE) are not modelled", "empty for this model (frozen_layers, freeze_embed)")  # fmt: skip
    known = layer_modules(inv)
    unknown = [m for m in names if m not in known]
    if unknown:
        raise LoraError("frozen_modules", f"{', '.join(unknown)}: not a module of {arch.family}'s decoder layers",
                        f"some of {', '.join(known)}")  # fmt: skip
    chosen = frozenset(names)
    for _, _, unit in inv.layer_kinds:
        if all(frozen_by(t.name, chosen) for t in unit.tensors):
            raise LoraError("frozen_modules", "freezes every parameter of the decoder layers: nothing in them would "
                            "train", "fewer modules (frozen_layers freezes whole layers)")  # fmt: skip
    return chosen


@dataclass(frozen=True, slots=True)
class Frozen:
    """The model's own parameters frozen: how many, what they are in words, and the sum that counts them."""

    params: int
    what: str  # "the first 8 decoder layers, the embedding, every layer's self_attn"
    formula: str
    modules: frozenset[str] = frozenset()  # the layers' modules frozen by name


def frozen_params(arch: Architecture, inv: Inventory, layers: int, embed: bool, modules: frozenset[str] = frozenset()
                  ) -> Frozen:  # fmt: skip
    """The parameters of the first ``layers`` decoder layers, of the ``modules`` of the others and, with ``embed``, of
    the embedding unit (and a tied head, the same weight). Raises :class:`LoraError` naming ``frozen_layers`` beyond
    the model's layers."""
    if layers > arch.layers:
        raise LoraError("frozen_layers", f"{layers:,} is more than the model's {arch.layers:,} decoder layers",
                        f"0 … {arch.layers:,}")  # fmt: skip
    total = inv.embed.params if embed else 0
    terms = [f"{n(total)} (embedding)"] if embed else []
    for start, count, unit in inv.layer_kinds:
        whole = max(0, min(layers, start + count) - start)
        part = sum(t.numel for t in unit.tensors if frozen_by(t.name, modules)) if modules else 0
        total += whole * unit.params + (count - whole) * part
        terms += [f"{whole} × {n(unit.params)} (whole layers)"] if whole else []
        terms += [f"{count - whole} × {n(part)} (their {', '.join(sorted(modules))})"] if part and count > whole else []
    what = ([f"the first {layers:,} decoder layers"] if layers else []) + (["the embedding"] if embed else [])
    what += [f"every layer's {', '.join(sorted(modules))}"] if modules else []
    return Frozen(total, ", ".join(what), f"{' + '.join(terms)} = {n(total)}", modules)


def targets_of(text: str) -> tuple[str, ...]:
    """The module names a ``lora_targets`` input lists (empty: none given)."""
    return tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))


def lora(arch: Architecture, inv: Inventory, rank: int, targets: str) -> Lora | None:
    """The adapters of ``LoraConfig(r=rank, target_modules=targets)`` on the model (None: rank 0, no LoRA).
    Raises :class:`LoraError` naming ``lora_rank`` or ``lora_targets``."""
    if rank == 0:
        if targets.strip():
            raise LoraError("lora_targets", "needs lora_rank ≥ 1 (LoRA is off at 0)", "empty with lora_rank 0")
        return None
    if arch.mla or arch.two_kinds or arch.family not in MODELLED:
        raise LoraError("lora_rank", f"LoRA on {arch.family} (latent attention, two kinds of layer) is not modelled",
                        "0 for this model")  # fmt: skip
    linears = [(t.name.removesuffix(".weight"), t.shape) for t in inv.units[1].tensors if len(t.shape) == 2]
    names = {name.rsplit(".", 1)[-1] for name, _ in linears}
    wanted = targets_of(targets)
    if arch.experts and (wanted == (ALL_LINEAR,) or any(w in names - set(MOE_TARGETS) for w in wanted)):
        raise LoraError(
            "lora_targets",
            f"adapters on {arch.family}'s router and 3-D experts (PEFT's all-linear "
            "wraps them with target_parameters) are not modelled",
            f"some of {', '.join(MOE_TARGETS)}",
        )
    linear = f"{ALL_LINEAR} or some of {', '.join(sorted(names))}"
    allowed = f"some of {', '.join(MOE_TARGETS)}" if arch.experts else linear
    if not wanted:
        if arch.family not in PEFT_DEFAULTS:  # mixtral's mapping entry matches nothing in transformers 5.23.0's class
            raise LoraError("lora_targets", f"PEFT 0.21.0 has no default target modules for {arch.family} that match "
                            "transformers' class (get_peft_model raises): name them", allowed)  # fmt: skip
        wanted = PEFT_DEFAULTS[arch.family]
    if wanted != (ALL_LINEAR,):
        unknown = [w for w in wanted if w not in names]
        if unknown:
            raise LoraError("lora_targets", f"{', '.join(unknown)}: not a linear module of {arch.family}'s layers",
                            allowed)  # fmt: skip
    chosen = [(name, a, b) for name, (a, b) in linears if wanted == (ALL_LINEAR,) or name.rsplit(".", 1)[-1] in wanted]
    narrowest = min(min(a, b) for _, a, b in chosen)
    if rank > narrowest:
        raise LoraError("lora_rank", f"{rank:,} is above the narrowest target's width ({narrowest:,})",
                        f"1 … {narrowest:,}")  # fmt: skip
    per_layer = sum(rank * (a + b) for _, a, b in chosen)
    return Lora(rank, tuple(chosen), per_layer, per_layer * arch.layers)
