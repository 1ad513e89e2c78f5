"""The rules across fields: what no single field can check, run after every field passed its own.

:func:`across_fields` fills in what a named model supplies (params, U, the activation peak, s) and
states each broken rule as a :class:`Problem` on the field it blames: U ≤ N, the model's own limits
(``tp`` dividing the heads, ``seq_len`` within learned positions, a modelled activation peak in
bounds), and the sharding layout (a shard group and ZeRO++'s secondary partition dividing D, expert
parallelism's needs). :class:`app.ledger.scenario.inputs.ScenarioIn` runs it as its model validator;
:func:`app.ledger.scenario.to_scenario` reads its fill.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic_core import PydanticCustomError

from app.ledger.bounds import DEFAULT_UNIT_PARAMS_CAP, LIGER_FAMILIES, TWO_46
from app.ledger.models.activations import ActivationInputError
from app.ledger.models.architecture import ModelConfigError
from app.ledger.models.defaults import MODEL_INPUTS, ModelQuery, model_defaults
from app.ledger.models.fsdp2 import uneven_experts
from app.ledger.models.parallel import ParallelLayoutError
from app.ledger.models.reference import resolve
from app.ledger.models.trains import LoraError
from app.ledger.scenario.declared import ScenarioFields
from app.ledger.scenario.fields import STATIC_DEFAULTS
from app.ledger.scenario.stacks import STACK_CHOICES, preset

# The inputs whose default, when absent, is another input's value; U, whose default is min(400M, N); and
# the choices a training stack presets.
FOLLOWS: dict[str, str] = {"gather_bytes": "param_bytes", "reduce_bytes": "grad_bytes", "shard_group": "dp",
                           "frozen_bytes": "param_bytes", "trainable_params": "params"}  # fmt: skip
FOLLOWERS: tuple[str, ...] = (*(c for c in STACK_CHOICES if c not in FOLLOWS), "unit_params", *FOLLOWS)


def default_unit_params(params: int) -> int:
    """Spec default for U: min(400,000,000, N)."""
    return min(DEFAULT_UNIT_PARAMS_CAP, params)


def default_seq_len(model: str) -> int:
    """4,096 tokens, or the model's context when it has learned positions and a shorter one (GPT-2)."""
    arch = resolve(model).architecture
    base = int(STATIC_DEFAULTS["seq_len"])
    return min(base, arch.max_positions) if arch.learned_positions else base


def following(name: str, value: Callable[[str], int | str]) -> int | str:
    """The default of one of :data:`FOLLOWERS` (``name``), given how to read the other inputs."""
    if name == "unit_params":
        return default_unit_params(int(value("params")))
    given = None
    if name in STACK_CHOICES:
        given = preset(str(value("stack")), name, str(value("model")), int(value("seq_len")))
    if given is not None:
        return given.value
    return int(value(FOLLOWS[name]))


MODEL_ALLOWED = "a known model id or a compact config (cfg:…)"


@dataclass(frozen=True, slots=True)
class ModelFill:
    """What a named model supplies for the inputs left empty."""

    params: int
    unit_params: int
    activation_bytes: int
    seq_len: int
    trainable_params: int = 0  # LoRA's adapters (0: every parameter trains)


@dataclass(frozen=True, slots=True)
class Problem:
    """A rule across fields that the inputs break: the field it blames, why, and what is allowed."""

    field: str
    kind: str  # the pydantic error type
    message: str
    allowed: str | None = None  # None: the field's own allowed range

    def error(self) -> PydanticCustomError:
        context = {"reason": self.message} | ({"allowed": self.allowed} if self.allowed else {})
        return PydanticCustomError(self.kind, "{reason}", context)


@dataclass(frozen=True, slots=True)
class Across:
    """What the rules across fields found: the named model's fill (None without one, or when it failed)
    and the problems."""

    fill: ModelFill | None
    problems: tuple[Problem, ...]


def _value(inp: ScenarioFields, name: str) -> int | str:
    """The input as typed, or its default (a stack's choice, a width following another, or a static one)."""
    value: int | str | None = getattr(inp, name)
    if value is not None:
        return value
    if name in FOLLOWERS:
        return following(name, lambda other: _value(inp, other))
    return STATIC_DEFAULTS[name]


def _int(inp: ScenarioFields, name: str) -> int:
    return int(_value(inp, name))


def _model_fill(inp: ScenarioFields) -> ModelFill | Problem:
    """params, U, the activation peak and s as the named model gives them, or the problem that stops it.

    A bad model, or an activation input the model cannot take (``tp`` not dividing the heads,
    ``seq_len`` beyond learned positions), is a problem on that field; so is a modelled activation
    peak beyond the ``activation_bytes`` bound (blamed on ``micro_batch``).
    """
    model = str(inp.model)
    try:
        seq_len = inp.seq_len if inp.seq_len is not None else default_seq_len(model)
        given = {name: _value(inp, name) for name in MODEL_INPUTS if name not in ("model", "seq_len")}
        md = model_defaults(ModelQuery.of({**given, "model": model, "seq_len": seq_len}))
    except ModelConfigError as exc:
        return Problem("model", "model_config", str(exc), MODEL_ALLOWED)
    except ParallelLayoutError as exc:
        return Problem(exc.field, "parallel_layout", str(exc), exc.allowed)
    except ActivationInputError as exc:
        message = str(exc).removeprefix(f"{exc.field}: ")
        return Problem(exc.field, "activation_input", message)
    except LoraError as exc:
        return Problem(exc.field, "lora", str(exc), exc.allowed)
    activation = md.activations.total_bytes
    top = TWO_46  # the activation_bytes field's bound
    # A typed activation_bytes replaces the modelled total, but where the schedule-aware peak is walked
    # (the model's own params and U, tp = 1) its loss and backward temporaries stay modelled: they too
    # must stay in bounds, or a receipt's integers could pass 2^53.
    walked = inp.params is None and inp.unit_params is None and all(_int(inp, k) == 1 for k in ("tp", "pp", "ep", "cp"))
    if activation > top and (inp.activation_bytes is None or walked):
        typed = inp.activation_bytes is not None
        why = " (the schedule-aware peak models its temporaries even with activation_bytes typed)" if typed else ""
        fix = "a smaller micro_batch or seq_len" + ("" if typed else ", or a typed activation_bytes")
        message = f"the modelled activation peak, {activation:,} B, is beyond the {top:,} B bound{why}"
        return Problem("micro_batch", "activation_bound", message, fix)
    return ModelFill(md.params, md.unit_params, activation, seq_len, 0 if md.trainable == md.params else md.trainable)


def across_fields(inp: ScenarioFields, unchecked: frozenset[str] = frozenset()) -> Across:
    """The rules no single field can check, on fields that each passed their own.

    ``unchecked`` names inputs that were given but invalid: a rule that reads one of them is
    skipped (its verdict would be about a value nobody typed).
    """
    problems: list[Problem] = []
    fill: ModelFill | None = None
    model_failed = False
    if inp.model and not unchecked.intersection(MODEL_INPUTS):
        found = _model_fill(inp)
        if isinstance(found, Problem):
            problems.append(found)
            model_failed = True
        else:
            fill = found
    elif inp.model:
        model_failed = True  # a model input is bad: what the model would fill is unknown
    if inp.unit_params is not None and "params" not in unchecked:
        params = inp.params if inp.params is not None else fill.params if fill else None
        if params is None and not model_failed:
            params = int(STATIC_DEFAULTS["params"])
        if params is not None and inp.unit_params > params:
            problems.append(Problem("unit_params", "unit_above_params",
                                    f"{inp.unit_params:,} is larger than params ({params:,})",
                                    f"0 … params ({params:,})"))  # fmt: skip
    given = [
        f for f in ("lora_rank", "lora_targets", "frozen_layers", "freeze_embed", "frozen_modules") if getattr(inp, f)
    ]
    given += ["base_quant"] if inp.base_quant not in (None, "none") else []
    if given and not inp.model and "model" not in unchecked:
        allowed = "none without a model" if given[0] == "base_quant" else "0 (or empty) without a model"
        problems.append(Problem(given[0], "trains_needs_model", "needs a model (its modules)", allowed))
    elif "model" not in unchecked:
        problems.extend(_quant_problems(inp, unchecked))
    if inp.trainable_params is not None and "params" not in unchecked:
        params = inp.params if inp.params is not None else fill.params if fill else None
        if params is None and not model_failed:
            params = int(STATIC_DEFAULTS["params"])
        if params is not None and inp.trainable_params > params:
            problems.append(Problem("trainable_params", "trainable_above_params",
                                    f"{inp.trainable_params:,} is larger than params ({params:,})",
                                    f"1 … params ({params:,})"))  # fmt: skip
    if inp.reserve_bytes and "capacity_bytes" not in unchecked:
        capacity = _int(inp, "capacity_bytes")
        if inp.reserve_bytes > capacity:
            problems.append(Problem("reserve_bytes", "reserve_within_capacity",
                                    f"{inp.reserve_bytes:,} is above capacity_bytes ({capacity:,})",
                                    f"0 … capacity_bytes ({capacity:,})"))  # fmt: skip
    blamed = {p.field for p in problems}
    problems.extend(p for p in _sharding_problems(inp, unchecked) if p.field not in blamed)
    blamed = {p.field for p in problems}
    problems.extend(p for p in _loss_problems(inp, unchecked, fill) if p.field not in blamed)
    blamed = {p.field for p in problems}
    problems.extend(p for p in _context_problems(inp, unchecked, fill) if p.field not in blamed)
    return Across(fill, tuple(problems))


def _loss_problems(inp: ScenarioFields, unchecked: frozenset[str], fill: ModelFill | None) -> list[Problem]:
    """The chunked loss (torchtitan's ChunkedLossWrapper) against the sequence and the units it is walked with;
    the fused one (Liger's) against the units and the layouts it is walked with."""
    if _value(inp, "loss") == "fused" and not unchecked.intersection(("loss", "stack", "wrap")):
        return _fused_problems(inp, unchecked, fill)
    if unchecked.intersection(("loss", "loss_chunks", "stack", "wrap", "seq_len")) or _value(inp, "loss") != "chunked":
        return []
    chunks = _int(inp, "loss_chunks")
    seq_len = inp.seq_len if inp.seq_len is not None else fill.seq_len if fill else _int(inp, "seq_len")
    if seq_len % chunks:
        return [Problem("loss_chunks", "loss_chunks_divide", f"{chunks:,} does not divide seq_len ({seq_len:,}): "
                        "torchtitan's ChunkedLossWrapper splits the sequence into equal slices",
                        f"a divisor of seq_len ({seq_len:,})")]  # fmt: skip
    why = ""
    if _value(inp, "wrap") != "embed-tail":
        why = "the chunked loss is walked with torchtitan's units (wrap embed-tail: the head in a unit of its own)"
    elif fill is not None and resolve(str(inp.model)).architecture.tied_embeddings:
        why = ("a model with tied embeddings (torchtitan shards the embedding, norm and head as one unit) is not "
               "walked with the chunked loss yet")  # fmt: skip
    elif _int(inp, "grad_accum") > 1 and _value(inp, "grad_sync") == "last" and "grad_sync" not in unchecked:
        why = ("grad_sync last with the chunked loss is not walked: torchtitan, whose loss it is, reduce-scatters "
               "every micro batch (its slices toggle the head's sync themselves)")  # fmt: skip
    return [Problem("loss", "chunked_loss", why, "outside or inside")] if why else []


def _fused_problems(inp: ScenarioFields, unchecked: frozenset[str], fill: ModelFill | None) -> list[Problem]:
    """Liger's fused linear cross-entropy is walked on Accelerate's carved units (its lce_forward reads the head's
    weight from the tail unit, unsharded since the final norm's forward), on one data-parallel mesh."""
    why = ""
    arch = resolve(str(inp.model)).architecture if fill is not None else None
    if _value(inp, "wrap") != "embed-tail":
        why = "the fused loss is walked with Accelerate's units (wrap embed-tail: the final norm and head in one unit)"
    elif inp.model is None or (arch is not None and arch.family not in LIGER_FAMILIES):
        why = f"Liger Kernel 0.8.5 gives its fused loss to {', '.join(LIGER_FAMILIES)}" + (
            f", not {arch.family}" if arch else " (name the model)"
        )
    elif arch is not None and arch.tied_embeddings:
        why = ("a model with tied embeddings (its head is the embedding's weight, in a unit resharded after forward) "
               "is not walked with the fused loss")  # fmt: skip
    elif any(_int(inp, name) != 1 for name in ("tp", "pp", "cp", "ep") if name not in unchecked):
        why = "the fused loss is walked on one data-parallel mesh: tp, pp, cp and ep 1"
    return [Problem("loss", "fused_loss", why, "outside, inside or chunked")] if why else []


def _quant_problems(inp: ScenarioFields, unchecked: frozenset[str]) -> list[Problem]:
    """A 4-bit base is stored in BF16 elements (bnb_4bit_quant_storage) that FSDP2 shards and gathers as they are:
    the frozen width and the all-gather width must be 2, and ZeRO++'s secondary partition is not modelled for it."""
    if inp.base_quant in (None, "none") or unchecked & {"frozen_bytes", "gather_bytes", "hpz"}:
        return []
    for name in ("frozen_bytes", "gather_bytes"):
        if _value(inp, name) != 2:
            return [Problem("base_quant", "quant_storage_bf16", f"needs {name} 2: the 4-bit codes are stored in BF16 "
                            "elements (bnb_4bit_quant_storage), which FSDP2 shards and gathers as they are",
                            f"none with {name} {_value(inp, name)}")]  # fmt: skip
    if _int(inp, "hpz") > 1:
        return [Problem("base_quant", "quant_with_hpz", "ZeRO++'s secondary partition of a 4-bit base is not modelled",
                        "none with hpz above 1")]  # fmt: skip
    return []


def _freezes(inp: ScenarioFields) -> bool:
    """Whether part of the model is frozen: trainable_params typed, LoRA, or frozen modules."""
    return inp.trainable_params is not None or bool(
        inp.lora_rank or inp.frozen_layers or inp.freeze_embed or inp.frozen_modules
    )


def _sharding_problems(inp: ScenarioFields, unchecked: frozenset[str]) -> list[Problem]:
    """The shard group, the secondary partition and expert parallelism against D and each other."""
    if "dp" in unchecked:
        return []
    dp = _int(inp, "dp")
    problems: list[Problem] = []
    divisor = f"a divisor of dp ({dp:,})"
    group = inp.shard_group if "shard_group" not in unchecked else None
    hpz = _int(inp, "hpz") if "hpz" not in unchecked else 1
    ep = _int(inp, "ep") if "ep" not in unchecked else 1
    if group is not None and dp % group:
        problems.append(Problem("shard_group", "shard_group_divides", f"{group:,} does not divide dp ({dp:,})",
                                divisor))  # fmt: skip
    if hpz > 1 and dp % hpz:
        problems.append(Problem("hpz", "hpz_divides", f"{hpz:,} does not divide dp ({dp:,})", f"1 or {divisor}"))
    elif hpz > 1 and _freezes(inp) and _value(inp, "frozen_bytes") != _value(inp, "param_bytes"):
        problems.append(Problem("hpz", "hpz_with_frozen", "ZeRO++'s secondary partition of frozen parameters at a "
                                "width of their own is not modelled", "1 with frozen_bytes ≠ param_bytes"))  # fmt: skip
    elif hpz > 1 and group is not None and group < dp:
        why = "ZeRO++'s secondary partition with a shard group smaller than D is not modelled (DeepSpeed mixes them)"
        problems.append(Problem("hpz", "hpz_with_hsdp", why, "1 with a shard group"))
    if ep > 1:
        why = ""
        if dp % ep:
            why = f"{ep:,} does not divide dp ({dp:,}): the experts' data-parallel group is D ÷ ep ranks"
        elif not inp.model and "model" not in unchecked:
            why = f"{ep:,} needs a mixture-of-experts model (which of the parameters are experts)"
        elif inp.params is not None or inp.unit_params is not None:
            why = "needs the model's own parameter counts (params and unit_params not typed): which are experts"
        elif (group is not None and group < dp) or hpz > 1:
            why = "expert parallelism with a shard group or hpZ is not modelled"
        elif inp.trainable_params is not None:
            why = "expert parallelism with frozen parameters is not modelled (which experts train is not an input)"
        if why:
            problems.append(Problem("ep", "expert_parallel", why, f"1, or a divisor of dp ({dp:,}) and the experts"))
    problems += _titan_experts_problems(inp, unchecked, dp)
    return problems


def _titan_experts_problems(inp: ScenarioFields, unchecked: frozenset[str], dp: int) -> list[Problem]:
    """torchtitan shards a mixture of experts' fused experts on dim 1 where its FSDP degree (D × cp) exceeds the
    experts (:func:`~app.ledger.models.fsdp2.experts_dim`), and FSDP2 (torch 2.13 ``FSDPParam``) refuses a dim-1
    shard that does not divide evenly: such a run stops at ``fully_shard``."""
    if unchecked & {"model", "stack", "cp"} or not inp.model or _value(inp, "stack") != "torchtitan":
        return []
    try:
        inv = resolve(str(inp.model)).inventory
    except ModelConfigError:
        return []
    degree = dp * _int(inp, "cp")
    uneven = uneven_experts(inv, "torchtitan", degree)
    if not uneven:
        return []
    rows, experts = ", ".join(f"{u:,}" for u in uneven), inv.architecture.experts
    return [Problem("dp", "experts_even_dim_1", f"torchtitan shards the {experts} experts on dim 1 past D × cp > E, "
                    f"and FSDP2 refuses an uneven dim-1 shard: {rows} rows over {degree:,} ranks",
                    f"D × cp dividing {rows}, or at most {experts}")]  # fmt: skip


def _context_problems(inp: ScenarioFields, unchecked: frozenset[str], fill: ModelFill | None) -> list[Problem]:
    """Context parallelism against the sequence and the layouts the lab models it with. A named model's own limits
    (2·cp dividing s, a causal attention) come from its activation ledger (:mod:`app.ledger.models.activations.ring`);
    this checks the sequence without a model too, so a link is refused the same with or without one."""
    if "cp" in unchecked or _int(inp, "cp") == 1:
        return []
    cp = _int(inp, "cp")
    allowed = "1, or a cp with 2 × cp dividing seq_len (and loss_chunks s ÷ cp), without pp, ep or hpZ"
    seq_len = inp.seq_len if inp.seq_len is not None else fill.seq_len if fill else _int(inp, "seq_len")
    why = ""
    if "seq_len" not in unchecked and seq_len % (2 * cp):
        # torch 2.13.0 _context_parallel/_load_balancer.py _HeadTailLoadBalancer (torchtitan 0.3.0's default
        # "headtail"): `if seq_length % (world_size * 2) != 0: raise AssertionError`
        why = (f"{cp:,}: 2 × cp = {2 * cp:,} does not divide seq_len ({seq_len:,}); torch's head-tail load balancer "
               "(torchtitan's default) cuts each sequence into 2 × cp equal chunks")  # fmt: skip
    elif "pp" not in unchecked and _int(inp, "pp") > 1:
        why = "context with pipeline parallelism is not modelled (which micro batches a stage keeps, cut by cp)"
    elif "ep" not in unchecked and _int(inp, "ep") > 1:
        why = "context with expert parallelism is not modelled (torchtitan draws ep from dp_shard × cp × tp)"
    elif "hpz" not in unchecked and _int(inp, "hpz") > 1:
        why = "ZeRO++'s hpZ is DeepSpeed's, which has no context parallelism (its Ulysses is another scheme)"
    elif "loss" not in unchecked and _value(inp, "loss") == "chunked" and (seq_len // cp) % _int(inp, "loss_chunks"):
        # torchtitan slices the rank's own s ÷ cp tokens (its inputs and labels are sharded before the model runs)
        why = (f"{cp:,}: loss_chunks ({_int(inp, 'loss_chunks'):,}) does not divide the local sequence s ÷ cp = "
               f"{seq_len // cp:,}; torchtitan's ChunkedLossWrapper cuts the rank's tokens equally")  # fmt: skip
    return [Problem("cp", "context_parallel", why, allowed)] if why else []
