"""Schemathesis against the app's own OpenAPI document: every built-in check, bounded examples.

Some rules cannot be written in JSON Schema: cross-field ones (an explicit ``unit_params`` larger
than ``params`` is refused, spec: "an explicit U > N is refused"; ``shard_group``, ``hpz`` and
``ep`` must divide ``dp``), a named model's own limits (``tp`` must divide its heads, ``seq_len``
fit its positions …), and the name's pattern in a query string. Schemathesis's positive-data check
is therefore replaced by :func:`positive_data_is_accepted`, the same check except that it accepts
a 422 on schema-valid data only when every field it names broke one of those rules
(``DOCUMENTED_RULES``, each a predicate on the request), and fails otherwise. Beyond that, the
only statuses added to Schemathesis's expectations are the request limits' 413 and 414."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from app.ledger.bounds import LIGER_FAMILIES
from app.ledger.models.architecture import ModelConfigError
from app.ledger.models.reference import resolve
from app.ledger.scenario import DEFAULT_SCENARIO
from app.ledger.scenario.fields import NAME_PATTERN
from app.web.app import create_app

# The request limits (413 body too large, 414 query too long) are documented answers to bad input.
NEGATIVE_STATUSES = ["400", "401", "403", "404", "405", "406", "409", "413", "414", "415", "422", "428", "429"]
CONFIG = schemathesis.Config.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": NEGATIVE_STATUSES}}}
)
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(), config=CONFIG)


def _scenario_data(case: Any) -> dict[str, Any]:
    if isinstance(case.body, dict):
        return case.body
    return dict(case.query or {})


def _unit_exceeds_params(data: dict[str, Any]) -> bool:
    try:
        params = int(data.get("params") or DEFAULT_SCENARIO.params)
        unit = int(data["unit_params"])
    except (KeyError, TypeError, ValueError):
        return False
    return unit > params


def _trainable_refused(data: dict[str, Any]) -> bool:
    """At most params (the model's, with one)."""
    return bool(data.get("model")) or _unit_exceeds_params({"params": data.get("params"),
                                                             "unit_params": data.get("trainable_params")})  # fmt: skip


def _lora_given(data: dict[str, Any]) -> bool:
    """LoRA's inputs are read against the model's linear modules (a model needed, the rank within the narrowest
    target's width, the targets among its module names, a rank for any targets)."""
    return bool(data.get("lora_rank")) or bool(str(data.get("lora_targets") or "").strip())


def _quant_given(data: dict[str, Any]) -> bool:
    """A 4-bit base needs LoRA on a Llama-shaped model, BF16 frozen and gathered widths, no hpZ."""
    return str(data.get("base_quant") or "none").strip() not in ("", "none")


def _frozen_given(data: dict[str, Any]) -> bool:
    """Frozen modules are a model's (a model needed, at most its layers, not with LoRA or model parallelism)."""
    modules = bool(str(data.get("frozen_modules") or "").strip())
    return modules or _int_of(data, "frozen_layers", 0) > 0 or _int_of(data, "freeze_embed", 0) > 0


def _breaks_name_pattern(data: dict[str, Any]) -> bool:
    name = data.get("name")
    return isinstance(name, str) and re.fullmatch(NAME_PATTERN, name.strip()) is None


# A 422 on schema-valid data is accepted only for a rule the document states but JSON Schema
# cannot enforce for the generator: U ≤ N (a cross-field rule), and the name's pattern, which
# Schemathesis does not apply when it generates query strings.
def _names_no_model(data: dict[str, Any]) -> bool:
    try:
        resolve(str(data.get("model") or ""))
    except ModelConfigError:
        return True
    return False


def _with_a_model(data: dict[str, Any]) -> bool:
    """tp must divide the model's heads, seq_len fit its learned positions, and the modelled
    activation peak stay within bounds: rules of the named model, refused only with one."""
    return bool(data.get("model"))


def _titan_experts(data: dict[str, Any]) -> bool:
    """torchtitan shards a mixture of experts' experts on dim 1 past D × cp > E, which must then divide evenly."""
    return bool(data.get("model")) and str(data.get("stack") or "").strip() == "torchtitan"


def _int_of(data: dict[str, Any], name: str, default: int) -> int:
    try:
        return int(data.get(name, default))
    except (TypeError, ValueError):
        return default


def _group_not_dividing(data: dict[str, Any]) -> bool:
    """shard_group must divide dp."""
    dp = _int_of(data, "dp", DEFAULT_SCENARIO.dp)
    return dp % _int_of(data, "shard_group", dp) != 0


def _hpz_refused(data: dict[str, Any]) -> bool:
    """hpz > 1 must divide dp and cannot be combined with a shard group smaller than dp, nor with frozen parameters
    at a width of their own."""
    dp, hpz = _int_of(data, "dp", DEFAULT_SCENARIO.dp), _int_of(data, "hpz", 1)
    frozen = "trainable_params" in data or _lora_given(data) or _frozen_given(data)
    return hpz > 1 and (dp % hpz != 0 or _int_of(data, "shard_group", dp) < dp or frozen)


def _ep_refused(data: dict[str, Any]) -> bool:
    """ep > 1 must divide dp and the experts of a MoE model whose own parameter counts are used, without a
    shard group or hpZ."""
    dp, ep = _int_of(data, "dp", DEFAULT_SCENARIO.dp), _int_of(data, "ep", 1)
    if ep == 1:
        return False
    if (
        dp % ep
        or "params" in data
        or "unit_params" in data
        or "trainable_params" in data
        or _int_of(data, "hpz", 1) > 1
    ):
        return True
    if _int_of(data, "shard_group", dp) < dp or _names_no_model(data) or not data.get("model"):
        return True
    experts = resolve(str(data["model"])).architecture.experts
    return experts == 0 or experts % ep != 0


def _cp_refused(data: dict[str, Any]) -> bool:
    """cp > 1 needs 2 × cp dividing seq_len, no pp, ep or hpZ, and the named model's causal attention (its field's
    description and docs/parallelism.md); with the chunked loss, loss_chunks dividing s ÷ cp."""
    cp = _int_of(data, "cp", 1)
    if cp == 1:
        return False
    seq_len = _int_of(data, "seq_len", DEFAULT_SCENARIO.seq_len)
    if seq_len % (2 * cp) or any(_int_of(data, k, 1) > 1 for k in ("pp", "ep", "hpz")):
        return True
    return bool(data.get("model")) or _chunked(data)


def _reserve_above_capacity(data: dict[str, Any]) -> bool:
    try:
        capacity = int(data.get("capacity_bytes") or DEFAULT_SCENARIO.capacity_bytes)  # null: the default
        return int(data["reserve_bytes"]) > capacity
    except (KeyError, TypeError, ValueError):
        return False


def _op_without_a_dense_swiglu_model(data: dict[str, Any]) -> bool:
    """act_policy op: torchtitan's per-op checkpointing of its dense Llama-style block (the field's description)."""
    if data.get("act_policy") != "op":
        return False
    try:
        arch = resolve(str(data.get("model") or "")).architecture
    except ModelConfigError:
        return True
    return arch.family not in ("llama", "mistral", "qwen2") or arch.experts > 0


def _every_refused(data: dict[str, Any]) -> bool:
    """ac_every: act_policy full's, at most the model's layers (the field's description)."""
    try:
        every = int(data["ac_every"])
        layers = resolve(str(data.get("model") or "")).architecture.layers
    except (KeyError, TypeError, ValueError, ModelConfigError):
        return False
    return (every > 1 and (data.get("act_policy") or "none") != "full") or every > layers // int(data.get("pp") or 1)


def _expand_without_grouped_heads(data: dict[str, Any]) -> bool:
    """gqa expand: a model with grouped K/V heads (the field's description)."""
    if data.get("gqa") != "expand":
        return False
    try:
        arch = resolve(str(data.get("model") or "")).architecture
    except ModelConfigError:
        return False
    return arch.kv_heads == arch.heads or arch.family in ("gpt2", "gpt_neox")


def _chunked(data: dict[str, Any]) -> bool:
    """loss chunked, typed or torchtitan's preset."""
    loss = data.get("loss") or ("chunked" if data.get("stack") == "torchtitan" else "outside")  # null: the default
    return bool(loss == "chunked")


def _chunked_loss_refused(data: dict[str, Any]) -> bool:
    """loss chunked: walked on torchtitan's units (wrap embed-tail, the hf-fsdp2 and torchtitan stacks' preset) of a
    model without tied embeddings, not with grad_sync last over several micro batches (the field's description)."""
    if not _chunked(data):
        return False
    # a key the case sends as null is absent (its default), as the API reads it
    stack = data.get("stack") or "plain-fsdp2"
    wrap = data.get("wrap") or ("root" if stack == "plain-fsdp2" else "embed-tail")
    if wrap != "embed-tail":
        return True
    sync = data.get("grad_sync") or ("last" if stack == "hf-fsdp2" else "every")
    if int(data.get("grad_accum") or 1) > 1 and sync == "last":
        return True
    try:
        return resolve(str(data.get("model") or "")).architecture.tied_embeddings
    except ModelConfigError:
        return False


def _fused_loss_refused(data: dict[str, Any]) -> bool:
    """loss fused: walked on Accelerate's units (wrap embed-tail) of a named model of Liger's families without tied
    embeddings, on one data-parallel mesh (tp, pp, cp, ep 1) (the field's description)."""
    if data.get("loss") != "fused":
        return False
    stack = data.get("stack") or "plain-fsdp2"
    wrap = data.get("wrap") or ("root" if stack == "plain-fsdp2" else "embed-tail")
    if wrap != "embed-tail" or any(_int_of(data, k, 1) > 1 for k in ("tp", "pp", "cp", "ep")):
        return True
    try:
        arch = resolve(str(data.get("model") or "")).architecture
    except ModelConfigError:
        return True
    return arch.family not in LIGER_FAMILIES or arch.tied_embeddings


def _loss_refused(data: dict[str, Any]) -> bool:
    return _chunked_loss_refused(data) or _fused_loss_refused(data)


def _chunks_not_dividing(data: dict[str, Any]) -> bool:
    """loss_chunks must divide seq_len when the loss is chunked (the field's description)."""
    if not _chunked(data):
        return False
    default_seq = DEFAULT_SCENARIO.seq_len
    try:
        arch = resolve(str(data.get("model") or "")).architecture
        if arch.learned_positions:
            default_seq = min(default_seq, arch.max_positions)
    except ModelConfigError:
        pass
    return _int_of(data, "seq_len", default_seq) % _int_of(data, "loss_chunks", 8) != 0


DOCUMENTED_RULES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "unit_params": _unit_exceeds_params,
    "trainable_params": _trainable_refused,
    "lora_rank": _lora_given,
    "lora_targets": _lora_given,
    "base_quant": _quant_given,
    "frozen_layers": _frozen_given,
    "freeze_embed": _frozen_given,
    "frozen_modules": _frozen_given,
    "name": _breaks_name_pattern,
    "model": _names_no_model,
    "tp": _with_a_model,
    "seq_len": _with_a_model,
    "micro_batch": _with_a_model,
    "pp": _with_a_model,  # must divide the model's layers
    "dp": _titan_experts,
    "shard_group": _group_not_dividing,
    "hpz": _hpz_refused,
    "ep": _ep_refused,
    "cp": _cp_refused,
    "reserve_bytes": _reserve_above_capacity,
    "act_policy": _op_without_a_dense_swiglu_model,
    "ac_every": _every_refused,
    "gqa": _expand_without_grouped_heads,
    "loss": _loss_refused,
    "loss_chunks": _chunks_not_dividing,
}


def positive_data_is_accepted(case: Any, response: Any) -> None:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or 200 <= response.status_code < 300:
        return
    if response.status_code == 405 and case.method.upper() not in ("GET", "POST"):
        return  # the coverage phase's unsupported-method probes; Schemathesis checks their Allow header
    data = _scenario_data(case)
    if case.path in ("/compare.json", "/compare.csv"):
        # a and b are scenario links: their fields' bounds are the scenario's, which the schema of a
        # string cannot state, so the answer must name the side and the field within it (a.dp); and
        # two long non-ASCII sides, percent-encoded, can pass the documented cap on the whole query.
        assert response.status_code in (414, 422), f"schema-valid input answered {response.status_code}: {data}"
        if response.status_code == 422:
            assert all(d["loc"][:2] in (["query", "a"], ["query", "b"]) for d in response.json()["detail"])
        return
    assert response.status_code == 422, f"schema-valid input answered {response.status_code}: {data}"
    if case.path == "/api/model-inventory":
        # The body schema says "a config.json of a supported family"; which keys each family
        # needs, and their consistency, is the reader's to judge: it must name the key.
        assert all(d["loc"][0] == "body" for d in response.json()["detail"])
        return
    if case.path == "/api/deepspeed":
        # The config's schema is "a JSON object": which keys DeepSpeed takes, and their types, are the
        # reader's to judge, naming the key under config; the scenario beside it follows its own rules.
        details = response.json()["detail"]
        assert all(d["loc"][:2] == ["body", "config"] or d.get("field") for d in details), details
        given = data.get("scenario")
        scenario: dict[str, Any] = given if isinstance(given, dict) else {}
        for d in details:
            if d["loc"][:2] != ["body", "config"]:
                rule = DOCUMENTED_RULES.get(d["field"])
                assert rule is not None and rule(scenario), f"schema-valid {d['field']} refused: {data}"
        return
    if case.path == "/api/torchtitan":
        # The command's schema is a string: which flags torchtitan takes, and their values, are the reader's to
        # judge, naming the flag under command; the scenario beside it follows its own rules.
        details = response.json()["detail"]
        assert all(d["loc"][:2] == ["body", "command"] or d.get("field") for d in details), details
        return
    fields = [d["loc"][1] for d in response.json()["detail"]]
    for field in fields:
        rule = DOCUMENTED_RULES.get(field)
        assert rule is not None, f"schema-valid {field} refused: {data}"
        assert rule(data), f"{field} refused although it follows the documented rule: {data}"


@schema.parametrize()
@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_openapi_document(case: Any) -> None:
    response = case.call()
    case.validate_response(response, excluded_checks=[positive_data_acceptance])
    positive_data_is_accepted(case, response)
    assert response.status_code < 500
