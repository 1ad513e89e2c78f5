"""The named checks that run on every scenario (spec "The independent oracle"), and two frozen references.

Each check receives a ledger computed under some rules (the production rules, or a mutant's)
and returns a named pass/fail whose message names the stage, the class (or the instant) and both
numbers. Checks 1–5 are the spec's; 6–8 hold the schedule-aware peak (``app/ledger/peak/schedule/``)
to how FSDP2 schedules memory: a reduce-scatter input is resident after a unit's backward,
gradients appear during backward, and the frozen model reference reproduces its hand-computed
instants. Without a model (no schedule) checks 6 and 7 do not apply.
"""

from __future__ import annotations

from collections.abc import Callable

from app.ledger.arithmetic import n
from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.models.reference import resolve
from app.ledger.peak.declared import activation_bytes
from app.ledger.peak.schedule.walk import saved_activations
from app.ledger.scenario import Scenario
from app.ledger.state.host import host_ledger, largest_tensor
from app.ledger.state.rules import CLASSES
from app.ledger.verify.frozen import (
    FROZEN_HOST,
    FROZEN_HSDP,
    FROZEN_MODEL_INSTANTS,
    FROZEN_MODEL_PEAK,
    FROZEN_MODEL_SCENARIO,
    FROZEN_MODEL_TITLE,
    FROZEN_PEAK,
    FROZEN_PERSISTENT,
    FROZEN_SCENARIO,
)
from app.ledger.verify.oracle import (
    LATENT_KEYS,
    LORA_FAMILIES,
    host_table,
    lora_params,
    qlora_stored,
    rank_params,
    stage_table,
)
from app.ledger.verify.results import (
    CheckResult,
    fail,
    ok,
)
from app.ledger.verify.schedule_checks import gradient_filling, reduce_scatter_presence

Evaluate = Callable[[Scenario], Ledger]


def oracle_rank_params(s: Scenario) -> tuple[int, int] | None:
    """The oracle's (dense, experts) parameters per rank for a scenario whose params are its model's own
    (``from config``), from the architecture's plain numbers; None without a model or with params typed."""
    if not s.model or s.source_of("params") != "from config":
        return None
    a = resolve(s.model).architecture
    adapters = 0
    if s.lora_rank:  # the adapters beside the model's own parameters, counted here from the plain dimensions
        if a.family not in LORA_FAMILIES:
            return None
        adapters = lora_params(a.layers, a.hidden, a.heads, a.kv_heads, a.head_dim, a.intermediate, s.lora_rank,
                               s.lora_targets)  # fmt: skip
    dense, experts = rank_params(
        a.family, a.hidden, a.layers, a.heads, a.kv_heads, a.head_dim, a.intermediate, a.vocab, a.experts,
        a.tied_embeddings, a.qkv_bias, a.o_bias, a.mlp_bias, a.norm == "layernorm",
        a.max_positions, s.tp, s.pp, s.pp_stage, s.ep, a.qk_norm,
        **{key: getattr(a, key) for key in LATENT_KEYS},
    )  # fmt: skip
    return dense + adapters, experts


def _frozen_stored(s: Scenario) -> int:
    """With a 4-bit base, the oracle's own count of the elements the frozen parameters are stored in; else 0."""
    if s.base_quant == "none":
        return 0
    a = resolve(s.model).architecture
    return qlora_stored(a.layers, a.hidden, a.heads, a.kv_heads, a.head_dim, a.intermediate, s.frozen_params)


def oracle_agreement(ledger: Ledger) -> CheckResult:
    """Every (stage, class) cell equals the oracle's stage table. With a model's own parameter count the
    oracle also counts the parameters per rank itself (tensor, pipeline and expert parallelism): the
    scenario's must equal it, and the table is built from the oracle's count, not the ledger's."""
    s = ledger.scenario
    params, experts = s.params, s.expert_params
    own = oracle_rank_params(s)
    if own is not None:
        dense, expert = own
        params, experts = dense + expert, expert if s.ep > 1 else 0
        if params != s.params or experts != s.expert_params:
            layout = f"tp = {s.tp}, pp = {s.pp}" + (f" ({s.pp_stage} stage)" if s.pp > 1 else "") + f", ep = {s.ep}"
            return fail(
                "oracle-agreement",
                f"params per rank ({layout}): ledger {n(s.params)} ({n(s.expert_params)} expert) ≠ oracle "
                f"{n(params)} ({n(experts)} expert)",
            )
    variants = [("", s, ledger)]
    if s.dp % 2 == 0 and s.shard_group == s.dp and s.ep == 1 and s.hpz == 1:
        # The same scenario in two shard groups of D ÷ 2 (HSDP): a layout that ignored the group would pass
        # on a flat mesh, where every group is all D ranks.
        split = s.with_(shard_group=s.dp // 2)
        variants.append(
            (f" in shard groups of {n(s.dp // 2)}", split, compute_ledger(split, ledger.rules, schedule=False))
        )
    for label, scenario, evaluated in variants:
        table = stage_table(
            params, scenario.dp, scenario.param_bytes, scenario.grad_bytes, scenario.master_bytes,
            scenario.opt_states, scenario.opt_bytes, optimizer_offloaded=scenario.offload_optimizer != "none",
            params_offloaded=scenario.offload_param != "none", expert_params=experts, ep=scenario.ep,
            shard_group=min(scenario.shard_group, scenario.dp), hpz=scenario.hpz,
            trainable=scenario.trainable_params, frozen_bytes=scenario.frozen_bytes, cp=scenario.cp,
            frozen_stored=_frozen_stored(scenario),
        )  # fmt: skip
        for stage in evaluated.stages:
            row = table[stage.stage]
            for line in stage.lines:
                expected = row[line.tensor_class]
                if line.bytes != expected:
                    return fail(
                        "oracle-agreement",
                        f"stage {stage.stage} {line.tensor_class}{label}: ledger {n(line.bytes)} B ≠ oracle "
                        f"{n(expected)} B",
                    )
    tail = "" if own is None else f", from the oracle's own {n(params)} parameters per rank"
    return ok("oracle-agreement", f"all 16 (stage, class) cells equal the oracle's{tail}")


def host_agreement(ledger: Ledger) -> CheckResult:
    """The host RAM per node of every stage equals the oracle's: on the scenario, and with both offloads
    to the CPU (so that the pinned buffers are always there to be counted)."""
    s = ledger.scenario
    offloaded = s.with_(offload_optimizer="cpu", offload_param="cpu")
    for label, scenario, host in (
        ("", s, ledger.host),
        (" with both offloads to the CPU", offloaded, host_ledger(offloaded, ledger.rules)),
    ):
        table = host_table(
            scenario.params, scenario.dp, scenario.param_bytes, scenario.grad_bytes, scenario.master_bytes,
            scenario.opt_states, scenario.opt_bytes, scenario.offload_optimizer, scenario.offload_param,
            scenario.ranks_per_node, largest_tensor(scenario), scenario.dp * scenario.tp * scenario.pp * scenario.cp,
            scenario.expert_params, scenario.ep, min(scenario.shard_group, scenario.dp), scenario.trainable_params,
            scenario.cp,
        )  # fmt: skip
        for stage in host.stages:
            if stage.per_node != table[stage.stage]:
                return fail(
                    "host-agreement",
                    f"stage {stage.stage} host{label}: ledger {n(stage.per_node)} B ≠ oracle {n(table[stage.stage])} B "
                    "per node",
                )
    return ok("host-agreement", "every stage's host RAM per node equals the oracle's, as given and offloaded")


def monotonic_lower_bounds(ledger: Ledger) -> CheckResult:
    totals = [stage.persistent for stage in ledger.stages]
    for stage in (1, 2, 3):
        if totals[stage] > totals[stage - 1]:
            return fail(
                "monotonic-lower-bounds",
                f"stage {stage} total: persistent {n(totals[stage])} B > stage {stage - 1}'s {n(totals[stage - 1])} B",
            )
    return ok("monotonic-lower-bounds", " ≥ ".join(f"{n(t)} B" for t in totals))


def activation_invariance(ledger: Ledger) -> CheckResult:
    """Each stage's activation term equals the one the same rules give the scenario at dp = 1; with a
    schedule, every instant's saved activations equal the same instant's at dp = 1."""
    s = ledger.scenario
    if any(st.peak.schedule is not None for st in ledger.stages):
        return _activations_per_instant(ledger)
    at_one = activation_bytes(s, ledger.rules, dp=1)
    for stage in ledger.stages:
        if stage.peak.activations != at_one:
            return fail(
                "activation-invariance",
                f"stage {stage.stage} activations: {n(stage.peak.activations)} B at dp = {n(s.dp)} but "
                f"{n(at_one)} B at dp = 1",
            )
    return ok("activation-invariance", f"{n(s.activation_bytes)} B at dp = {n(s.dp)} and at dp = 1")


def _activations_per_instant(ledger: Ledger) -> CheckResult:
    s = ledger.scenario
    saved_at_one = saved_activations(s.with_(dp=1), ledger.rules)
    checked = 0
    for stage in ledger.stages:
        if stage.peak.schedule is None:
            continue
        for instant in stage.peak.schedule.instants:
            if instant.key not in saved_at_one:  # a moment D = 1 does not have (an all-gather copy-out)
                continue
            here, there = instant.bytes_of("activations"), saved_at_one[instant.key]
            checked += 1
            if here != there:
                return fail(
                    "activation-invariance",
                    f"stage {stage.stage} {instant.name} activations: {n(here)} B at dp = {n(s.dp)} but "
                    f"{n(there)} B at dp = 1",
                )
    return ok("activation-invariance", f"the saved activations of all {checked} instants are the same at "
               f"dp = {n(s.dp)} and at dp = 1")  # fmt: skip


def gather_presence(ledger: Ledger) -> CheckResult:
    s = ledger.scenario
    if s.dp == 1 or s.unit_params == 0:
        return ok("gather-presence", "not applicable: dp = 1 or unit_params = 0")
    peak = ledger.stages[3].peak
    # The remote shards of the unit as the layout splits it: over D, a shard group, or for experts D ÷ ep.
    # Spelled here on purpose, not read from the peak's rule: a check that called the code it checks
    # could not catch a wrong rule.
    remote = sum(p - (p + o - 1) // o for p, o in s.unit_shards()) * s.gather_bytes
    if peak.schedule is not None:
        # the instant that gathers most (backward at a layer: the root, the layer, the one prefetched)
        most = max(peak.schedule.instants, key=lambda i: i.part("gather"))
        gathered = most.part("gather")
        if gathered < remote:
            return fail(
                "gather-presence",
                f"stage 3 parameters: the {most.name} holds {n(gathered)} B of unsharded parameters, fewer than "
                f"the {n(remote)} B of remote shards of one {n(s.unit_params)}-parameter unit",
            )
        return ok("gather-presence", f"stage 3 {most.name} holds {n(gathered)} B ≥ {n(remote)} B of remote shards")
    gathered = peak.subtotal - peak.persistent - peak.buckets - peak.activations - peak.overhead
    if gathered < remote:
        return fail(
            "gather-presence",
            f"stage 3 parameters: the peak holds {n(gathered)} B of gathered parameters, fewer than the "
            f"{n(remote)} B of remote shards of one {n(s.unit_params)}-parameter unit",
        )
    return ok("gather-presence", f"stage 3 peak holds {n(gathered)} B ≥ {n(remote)} B of remote shards")


def frozen_scenario(evaluate: Evaluate) -> CheckResult:
    ledger = evaluate(FROZEN_SCENARIO)
    for stage in ledger.stages:
        for tensor_class in CLASSES:
            got, want = stage.bytes_of(tensor_class), FROZEN_PERSISTENT[stage.stage][tensor_class]
            if got != want:
                return fail(
                    "frozen-scenario",
                    f"stage {stage.stage} {tensor_class}: got {n(got)} B, hand-computed {n(want)} B",
                )
        for part, want in FROZEN_PEAK[stage.stage].items():
            got = getattr(stage.peak, part)
            if got != want:
                return fail(
                    "frozen-scenario",
                    f"stage {stage.stage} peak {part}: got {n(got)} B, hand-computed {n(want)} B",
                )
    offloaded = evaluate(FROZEN_SCENARIO.with_(offload_optimizer="cpu", offload_param="cpu"))
    for host in offloaded.host.stages:
        if host.per_node != FROZEN_HOST[host.stage]:
            return fail(
                "frozen-scenario",
                f"stage {host.stage} host, both offloads to the CPU: got {n(host.per_node)} B per node, hand-computed "
                f"{n(FROZEN_HOST[host.stage])} B",
            )
    hsdp = evaluate(FROZEN_SCENARIO.with_(shard_group=4))
    for st in hsdp.stages:
        if st.persistent != FROZEN_HSDP[st.stage]:
            return fail(
                "frozen-scenario",
                f"stage {st.stage} persistent in shard groups of 4: got {n(st.persistent)} B, hand-computed "
                f"{n(FROZEN_HSDP[st.stage])} B",
            )
    return ok(
        "frozen-scenario",
        "the seed's example reproduces 112 / 38.5 / 26.25 / 14 GB, a 0.7 GB gather, offloaded its host RAM, and in "
        "shard groups of 4 112 / 49 / 38.5 / 28 GB",
    )


def frozen_model_scenario(evaluate: Evaluate) -> CheckResult:
    """The model reference's instants, hand-computed: each stage's worst instant and total, and every
    stage-3 instant's total."""
    ledger = evaluate(FROZEN_MODEL_SCENARIO)
    for st in ledger.stages:
        key, want = FROZEN_MODEL_PEAK[st.stage]
        peak = st.peak
        got_key = "declared" if peak.instant is None else peak.instant.key
        if got_key != key or peak.total != want:
            return fail(
                "frozen-model-scenario",
                f"{FROZEN_MODEL_TITLE}, stage {st.stage} peak: {got_key} {n(peak.total)} B, hand-computed "
                f"{key} {n(want)} B",
            )
    schedule = ledger.stages[3].peak.schedule
    assert schedule is not None  # the loop above found stage 3's worst instant in it
    got = {i.key: i.total for i in schedule.instants}
    for key, want in FROZEN_MODEL_INSTANTS.items():
        if got.get(key) != want:
            return fail(
                "frozen-model-scenario",
                f"{FROZEN_MODEL_TITLE}, stage 3 {key}: got {n(got.get(key, 0))} B, hand-computed {n(want)} B",
            )
    return ok("frozen-model-scenario", f"{FROZEN_MODEL_TITLE} reproduces its {len(FROZEN_MODEL_INSTANTS)} stage-3 "
               "instants and every stage's peak")  # fmt: skip


# The checks that read only the ledger (checks 5 and 8 compute a ledger of their own).
_LEDGER_CHECKS: dict[str, Callable[[Ledger], CheckResult]] = {
    "oracle-agreement": oracle_agreement,
    "monotonic-lower-bounds": monotonic_lower_bounds,
    "activation-invariance": activation_invariance,
    "gather-presence": gather_presence,
    "reduce-scatter-presence": reduce_scatter_presence,
    "gradient-filling": gradient_filling,
    "host-agreement": host_agreement,
}
_FROZEN: dict[str, Callable[[Evaluate], CheckResult]] = {
    "frozen-scenario": frozen_scenario,
    "frozen-model-scenario": frozen_model_scenario,
}
# The frozen checks under the production rules are constants: computed once.
_PRODUCTION_FROZEN: dict[str, CheckResult] = {}


def _frozen(check: str, evaluate: Evaluate) -> CheckResult:
    if evaluate is not compute_ledger:
        return _FROZEN[check](evaluate)
    if check not in _PRODUCTION_FROZEN:
        _PRODUCTION_FROZEN[check] = _FROZEN[check](evaluate)
    return _PRODUCTION_FROZEN[check]


def run_checks(
    ledger: Ledger, evaluate: Evaluate, checks: tuple[str, ...], *, stop_at_failure: bool = False
) -> tuple[CheckResult, ...]:
    """Run the named checks in order on ``ledger``; ``evaluate`` computes the frozen scenarios'
    ledgers under the same rules (checks 5 and 8). With ``stop_at_failure`` the first failure ends the run."""
    results = []
    for check in checks:
        result = _frozen(check, evaluate) if check in _FROZEN else _LEDGER_CHECKS[check](ledger)
        results.append(result)
        if stop_at_failure and not result.passed:
            break
    return tuple(results)
