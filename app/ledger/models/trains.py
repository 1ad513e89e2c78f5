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

Modelled for the dense decoder families (their linear modules are the layers' 2-D weights of the inventory) and
for Qwen3-MoE and Mixtral, whose router and fused 3-D experts (transformers 5) PEFT 0.21.0 reaches through
``target_parameters`` (``utils/transformers_weight_conversion.py`` ``_convert_peft_config_moe``): targets keep their
transformers-4 names (:data:`MOE_NAMES`: ``gate`` the router, ``gate_proj`` and ``up_proj`` or ``w1`` and ``w3``
together, fused into ``gate_up_proj`` at twice the rank and alpha, ``down_proj`` or ``w2``), and ``all-linear``
resolves to all of them with the attention's. Each becomes a ``ParamWrapper``: ``lora_A`` (rank·E × in) and
``lora_B`` (out × rank·E) over the E experts' stack (the router's: one matrix), which it **folds** into the weight
every forward (``W + s·B·A``, a ``baddbmm`` over the experts): a new tensor the size of the weight the layer's
GEMMs keep for backward (:attr:`Adapted.folded`). DeepSeek-V3 the same way (transformers maps deepseek_v3 onto
qwen2_moe's conversion): its latent attention's linear modules, and in its MoE layers the router and routed experts;
its dense first layers' MLP and its shared experts are never adapted (their ``gate_proj``/``up_proj``/``down_proj``
names go to the routed experts), so those layers carry the attention's adapters alone (:attr:`Lora.dense`); its
router multiplies by an FP32 copy of its weight, so its folded weight is not kept (:attr:`Lora.upcast_router`).
Tensor, pipeline and expert parallelism with adapters are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

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
# of experts (none of these four has PEFT 0.21.0 default targets that match transformers 5.23.0's class: mixtral's
# entry, q_proj and v_proj, leaves get_peft_model raising NoMatchingPeftModuleError)
MODELLED = (*PEFT_DEFAULTS, "olmo2", "phi3", "qwen3_moe", "mixtral", "deepseek_v3")
# peft 0.21.0 utils/transformers_weight_conversion.py _MOE_TARGET_MODULE_MAPPING (qwen3_moe reads qwen2_moe's through
# transformers' _MODEL_TO_CONVERSION_PATTERN): a target's transformers-4 name → the layer tensor it adapts
MOE_NAMES: dict[str, dict[str, str]] = {
    "qwen3_moe": {"gate": "mlp.gate.weight", "gate_proj": "mlp.experts.gate_up_proj",
                  "up_proj": "mlp.experts.gate_up_proj", "down_proj": "mlp.experts.down_proj"},
    "mixtral": {"gate": "mlp.gate.weight", "w1": "mlp.experts.gate_up_proj", "w3": "mlp.experts.gate_up_proj",
                "w2": "mlp.experts.down_proj"},
}  # fmt: skip
MOE_NAMES["deepseek_v3"] = MOE_NAMES["qwen3_moe"]  # transformers 5.23.0 conversion_mapping: deepseek_v3 → qwen2_moe
# DeepseekV3TopkRouter: F.linear(x.float(), weight.float()): the FP32 copy, not the (folded) weight, is kept
ROUTER_UPCAST = frozenset({"deepseek_v3"})
TARGETS_ALLOWED = f"{ALL_LINEAR}, or module names separated by commas"


class LoraError(ValueError):
    """LoRA inputs the model cannot take: ``field`` names the input, ``allowed`` what it may be."""

    def __init__(self, field: str, message: str, allowed: str) -> None:
        self.field = field
        self.allowed = allowed
        super().__init__(message)


class Adapted(NamedTuple):
    """One adapted tensor of a decoder layer: its path, its matrix's two dimensions (a out, b in; GPT-2's Conv1D
    stores [in, out] and is read so), the rows of its
    ``lora_A`` (= the columns of its ``lora_B``: the rank, or rank × E over a stack of E experts, twice the rank for
    the fused gate and up) and, for a ``ParamWrapper``, the elements of the weight it folds the adapter into every
    forward (0: a ``lora.Linear``, which adds ``lora_B(lora_A(x))`` beside the frozen weight)."""

    name: str
    a: int
    b: int
    rows: int
    folded: int = 0
    experts: int = 0  # a stack's E (its rows are rank × the names fused × E)

    @property
    def params(self) -> int:
        return self.rows * (self.a + self.b)

    @property
    def leaf(self) -> str:
        """The name the walk knows it by: the module's own (PEFT matches a path's last component), or an expert
        tensor's ``experts.<tensor>`` (a MoE's gate_up_proj reads the tokens gathered per expert, not the norm's
        output as Phi-3's linear one does)."""
        head, _, last = self.name.rpartition(".")
        return f"experts.{last}" if head.endswith("experts") else last

    @property
    def folded_shape(self) -> str:
        """The folded weight's elements in symbols (the router's E·h, the experts' E·2i·h and E·h·i)."""
        return {"gate": "E·h", "experts.gate_up_proj": "E·2i·h", "experts.down_proj": "E·h·i"}[self.leaf]


@dataclass(frozen=True, slots=True)
class Lora:
    """The adapters of one LoRA config on one model: per adapted tensor of one decoder layer (:class:`Adapted`),
    and the parameters they add per layer and in all."""

    rank: int
    modules: tuple[Adapted, ...]
    per_layer: int
    params: int
    dense: tuple[Adapted, ...] = ()  # deepseek_v3's dense first layers' (their attention's alone)
    dense_layers: int = 0
    upcast_router: bool = False  # the router multiplies by an FP32 copy of its folded weight (ROUTER_UPCAST)

    @property
    def dense_per_layer(self) -> int:
        return sum(m.params for m in self.dense)

    @property
    def linear(self) -> tuple[Adapted, ...]:
        """The ``lora.Linear`` modules (each keeps its ``lora_A`` output for backward)."""
        return tuple(m for m in self.modules if not m.folded)

    @property
    def _kept_folds(self) -> tuple[Adapted, ...]:
        return tuple(m for m in self.modules if m.folded and not (self.upcast_router and m.leaf == "gate"))

    @property
    def folded(self) -> int:
        """Elements of the folded weights a layer's GEMMs keep for backward (``ParamWrapper``), per layer."""
        return sum(m.folded for m in self._kept_folds)

    @property
    def folded_shape(self) -> str:
        shapes = [m.folded_shape for m in self._kept_folds]
        return shapes[0] if len(shapes) == 1 else f"({' + '.join(shapes)})"

    @property
    def formula(self) -> str:
        if self.dense == self.modules or not self.dense_layers:  # one kind of adapted layer
            return f"{self._terms(self.params // self.per_layer, self.modules, 'layers')} = {n(self.params)}"
        kinds = [((self.params - self.dense_layers * self.dense_per_layer) // self.per_layer, self.modules, "layers")]
        kinds += [(self.dense_layers, self.dense, "dense layers")] if self.dense else []
        return f"{' + '.join(self._terms(*kind) for kind in kinds)} = {n(self.params)}"

    def _terms(self, layers: int, modules: tuple[Adapted, ...], what: str) -> str:
        if all(m.rows == self.rank for m in modules):
            terms = " + ".join(f"({n(m.a)} + {n(m.b)})" for m in modules)
            return f"{n(layers)} {what} × {self.rank} × ({terms})"
        terms = " + ".join(f"{_rows(m, self.rank)} × ({n(m.a)} + {n(m.b)})" for m in modules)
        return f"{n(layers)} {what} × ({terms})"


def _rows(m: Adapted, rank: int) -> str:
    """An adapted tensor's rows as the rank times what multiplies it: 8, 8·128 (E), 2·8·128 (gate and up fused)."""
    if not m.experts:
        return str(rank)
    fused = m.rows // (rank * m.experts)
    return f"{fused}·{rank}·{m.experts}" if fused > 1 else f"{rank}·{m.experts}"


def adapter_tensors(adapters: Lora, dense: bool = False) -> tuple[Tensor, ...]:
    """One decoder layer's adapter tensors (``dense``: one of deepseek_v3's dense first layers'): ``lora_A`` (rows ×
    in) and ``lora_B`` (out × rows) per adapted tensor."""
    return tuple(
        t for m in (adapters.dense if dense else adapters.modules)
        for t in (Tensor(f"{m.name}.lora_A", (m.rows, m.b), m.rows * m.b),
                  Tensor(f"{m.name}.lora_B", (m.a, m.rows), m.a * m.rows))
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
    if arch.family not in MODELLED:
        raise LoraError("lora_rank", f"LoRA on {arch.family} is not modelled", "0 for this model")
    moe = MOE_NAMES[arch.family] if arch.experts else {}
    kinds = inv.layer_kinds  # deepseek_v3: its dense first layers, then its MoE ones (the adapters' superset)
    layer = {t.name: t.shape for t in kinds[-1][2].tensors}
    # a linear module named as a MoE target is not one PEFT wraps: the name goes to the routed experts (deepseek_v3's
    # shared experts and dense MLP), or is the router's
    linears = [(name.removesuffix(".weight"), shape) for name, shape in layer.items()
               if len(shape) == 2 and name.removesuffix(".weight").rsplit(".", 1)[-1] not in moe]  # fmt: skip
    names = list(dict.fromkeys([name.rsplit(".", 1)[-1] for name, _ in linears] + list(moe)))
    allowed = f"{ALL_LINEAR} or some of {', '.join(sorted(names))}"
    wanted = targets_of(targets)
    if not wanted:
        if arch.family not in PEFT_DEFAULTS:  # mixtral's mapping entry matches nothing in transformers 5.23.0's class
            raise LoraError("lora_targets", f"PEFT 0.21.0 has no default target modules for {arch.family} that match "
                            "transformers' class (get_peft_model raises): name them", allowed)  # fmt: skip
        wanted = PEFT_DEFAULTS[arch.family]
    if wanted == (ALL_LINEAR,):
        wanted = tuple(names)
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise LoraError("lora_targets", f"{', '.join(unknown)}: not a linear module of {arch.family}'s layers",
                        allowed)  # fmt: skip
    conv1d = arch.family == "gpt2"  # GPT-2's Conv1D stores its weight [in, out]: PEFT's lora_A reads in, lora_B out
    chosen = [Adapted(name, b, a, rank) if conv1d else Adapted(name, a, b, rank)
              for name, (a, b) in linears if name.rsplit(".", 1)[-1] in wanted]  # fmt: skip
    chosen += _parameter_targets(moe, layer, rank, wanted, allowed)
    narrowest = min((min(m.a, m.b) for m in chosen if m.leaf != "gate"), default=rank)
    if rank > narrowest:
        raise LoraError("lora_rank", f"{rank:,} is above the narrowest target's width ({narrowest:,})",
                        f"1 … {narrowest:,}")  # fmt: skip
    per_layer = sum(m.params for m in chosen)
    if len(kinds) == 1:
        return Lora(rank, tuple(chosen), per_layer, per_layer * arch.layers)
    (_, k, dense_unit), (_, rest, _) = kinds
    in_dense = {t.name.removesuffix(".weight") for t in dense_unit.tensors}
    dense = tuple(m for m in chosen if m.name in in_dense)
    params = rest * per_layer + k * sum(m.params for m in dense)
    return Lora(rank, tuple(chosen), per_layer, params, dense, k, arch.family in ROUTER_UPCAST)


def _parameter_targets(moe: dict[str, str], layer: dict[str, tuple[int, ...]], rank: int, wanted: tuple[str, ...],
                       allowed: str) -> list[Adapted]:  # fmt: skip
    """A MoE layer's router and 3-D experts as PEFT adapts them (``ParamWrapper``): the targets' transformers-4 names
    mapped onto the tensors, both halves of the fused gate and up or neither (PEFT raises otherwise), at rank × the
    names fused; the router's width does not bound the rank (its E outputs, 8 on Mixtral, are fewer than the ranks
    all-linear runs use, and PEFT adapts it whatever the rank)."""
    out = []
    for tensor in dict.fromkeys(moe.values()):
        fused = [old for old, new in moe.items() if new == tensor]
        named = [old for old in fused if old in wanted]
        if not named:
            continue
        if len(named) < len(fused):
            missing = ", ".join(old for old in fused if old not in named)
            raise LoraError("lora_targets", f"{', '.join(named)} without {missing}: PEFT fuses them into "
                            f"{tensor.rsplit('.', 1)[-1]} (name both)", allowed)  # fmt: skip
        shape = layer[tensor]
        if len(shape) == 2:  # the router's [E, h] weight: one matrix
            out.append(Adapted(tensor.removesuffix(".weight"), shape[0], shape[1], rank, shape[0] * shape[1]))
        else:
            e, a, b = shape
            out.append(Adapted(tensor, a, b, rank * len(fused) * e, e * a * b, e))
    return out
