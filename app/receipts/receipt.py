"""The JSON receipt (spec "Receipt contract"): stable names, raw integer bytes."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from app.interop.deepspeed.estimator import compare, not_comparable
from app.ledger.arithmetic import share_bp
from app.ledger.estimate import Estimate
from app.ledger.peak.declared import Peak
from app.ledger.peak.schedule import Instant
from app.ledger.pipeline import PipelineEnds
from app.ledger.scenario import Scenario
from app.ledger.scenario.links import canonical_query, link
from app.ledger.verify.checks import TITLES
from app.ledger.verify.mutants import MutationResult

# 2: with a model, `peak` is the schedule-aware peak (the worst named instant of a step) and names its
# `instant`; the seed's declared sum moved to `declared_peak` (spec "Two peaks"; issue 13).
SCHEMA_VERSION = 2
# The `parallelism` key (issue 15 item 4) was added without a version bump, as `host` and `url` were: the
# contract names what a receipt holds "at least", and no existing field changed its name or meaning.
# Where ``zero3-lab serve`` listens by default: the base of ``url`` when no other is given.
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
DISCLAIMER = (
    "Exact persistent state, the seed's declared peak and, with a model, a schedule-aware peak checked "
    "against PyTorch's own accounting (FSDPMemTracker). The lab does not predict allocator fragmentation, "
    "kernel workspaces, throughput, or whether a particular framework version fits."
)


# host[:port]: a DNS name or IPv4 address (labels may hold "_", as container names do), or an IPv6
# address in brackets; nothing else.
_NETLOC = re.compile(
    r"(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*"
    r"|\[[0-9A-Fa-f:.]{2,45}\])(?::(?P<port>[0-9]{1,5}))?"
)
_PATH = re.compile(r"(?:/[A-Za-z0-9._~%-]*)*")


def check_base_url(text: str) -> str:
    """``text`` checked as the base of an absolute URL, normalised without a trailing ``/``.

    An ``http`` or ``https`` URL with a plain host (a name, IPv4, or IPv6 in brackets), an optional
    port and an optional path prefix (``https://example.org/lab``): no user, query, fragment, blank
    or control character. Raises :class:`ValueError` saying what is wrong.
    """
    if not text.isprintable() or any(c.isspace() for c in text):
        raise ValueError(f"{text!r} must not contain blanks or control characters")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{text!r} must start with http:// or https://")
    netloc = _NETLOC.fullmatch(parts.netloc)
    if netloc is None:
        raise ValueError(f"{text!r} must name a host and optionally a port, nothing else")
    if netloc["port"] is not None and not 0 < int(netloc["port"]) < 65536:
        raise ValueError(f"{text!r} has a port outside 1 … 65,535")
    if "?" in text or "#" in text:
        raise ValueError(f"{text!r} must not carry a query or a fragment")
    segments = parts.path.split("/")[1:]
    if not _PATH.fullmatch(parts.path) or "." in segments or ".." in segments:
        raise ValueError(f"{text!r} has a path that is not a plain prefix such as /lab")
    return f"{parts.scheme}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def page_url(s: Scenario, base_url: str = DEFAULT_BASE_URL) -> str:
    """The scenario's page as an absolute URL: ``base_url`` + ``/?`` + the canonical query."""
    return base_url.rstrip("/") + link(s, "/")


def model_section(e: Estimate) -> dict[str, Any] | None:
    """The named model's inventory: family, exact count, layers, the largest unit and every unit."""
    if e.model is None:
        return None
    ref = e.model.model
    inv = ref.inventory
    return {
        "reference": ref.reference,
        "title": ref.title,
        "source": ref.source,
        "family": ref.architecture.family,
        "params": inv.params,
        "layers": ref.architecture.layers,
        "largest_unit": {"name": inv.largest_unit.name, "params": inv.largest_unit.params},
        "units": [{"name": u.name, "params": u.params} for u in inv.units],
        "params_source": e.scenario.source_of("params"),
        "unit_params_source": e.scenario.source_of("unit_params"),
    }


def activations_section(e: Estimate) -> dict[str, Any]:
    """The activation entry of the peak: the model's ledger when modelled, else the declared figure."""
    s = e.scenario
    source = e.activation_source
    if e.model is None or source != "modelled":
        return {"source": source, "total_bytes": s.activation_bytes}
    a = e.model.activations
    num, den = a.recompute_flops
    return {
        "source": "modelled",
        "policy": a.policy,
        "per_layer_bytes": a.per_layer_bytes,
        "layers": a.layers,
        "working_set_bytes": a.working_set_bytes,
        "embedding_bytes": a.embedding_bytes,
        "head_bytes": a.head_bytes,
        "logits_bytes": a.logits_bytes,
        "total_bytes": a.total_bytes,
        "recompute_flops_fraction": a.recompute_fraction_text(4),
        "recompute_flops": {"numerator": num, "denominator": den},
        "formula": a.formula,
        "assumptions": a.assumptions,
        "inputs": {"seq_len": s.seq_len, "micro_batch": s.micro_batch, "act_bytes": s.act_bytes,
                   "tp": s.tp, "sequence_parallel": bool(s.sequence_parallel), "logits_bytes": s.logits_bytes},
    }  # fmt: skip


def fsdp2_section(e: Estimate) -> dict[str, Any] | None:
    """FSDP2's stage-3 shard with each tensor padded on dim 0, beside the ⌈N ÷ D⌉ bound.

    Both sides count the *model's* parameters, so the padding is never negative: a scenario that
    declares another N (7B for Llama-2-7B's 6,738,415,616) changes its ledger, not the model's shard.
    """
    if e.fsdp2 is None:
        return None
    f = e.fsdp2
    stage3 = e.ledger.stages[3]
    per_class = {line.tensor_class: f.padded_elements * line.width * line.copies for line in stage3.lines}
    padded_total = sum(per_class.values())
    state_width = sum(line.width * line.copies for line in stage3.lines)
    extra = f.padded_elements - f.lower_bound_elements
    lower_total = f.lower_bound_elements * state_width
    padding = padded_total - lower_total
    return {
        "padded_elements": f.padded_elements,
        "lower_bound_elements": f.lower_bound_elements,
        "padding_elements": extra,
        "stage3_padded_bytes": {**per_class, "total": padded_total},
        "stage3_lower_bound_bytes": lower_total,
        "padding_bytes": padding,
        "largest_gather_unit": f.largest_gather_unit,
        "note": f"dim-0 padding: +{padding:,} bytes at stage 3 ({extra:,} elements per rank beyond ⌈N ÷ D⌉, × "
        f"{state_width} B of sharded state per element)",
    }


def fit_section(e: Estimate) -> dict[str, Any]:
    return {
        "capacity_bytes": e.scenario.capacity_bytes,
        "stages": [
            {"stage": st.stage, "smallest_dp": st.smallest_dp, "largest_micro_batch": st.largest_micro_batch}
            for st in e.fit.stages
        ],
        "micro_batch_modelled": e.fit.micro_batch_modelled,
        "curve": [{"dp": dp, "peaks": peaks} for dp, peaks in e.fit.curve],
        "cheapest_offload": None
        if (o := e.offload_fit) is None
        else {
            "stage": e.scenario.stage,
            "offload_optimizer": o.offload_optimizer,
            "offload_param": o.offload_param,
            "device_peak": o.device_peak,
            "host_peak": o.host_peak,
        },
    }


def _parts(p: Peak) -> dict[str, Any]:
    return {
        "persistent": p.persistent,
        "gather": p.gather,
        "buckets": p.buckets,
        "activations": p.activations,
        "overhead": p.overhead,
        "contingency": p.contingency,
        "total": p.total,
        "subtotal": p.subtotal,
        "formulas": {
            "gather": p.gather_formula,
            "activations": p.activations_formula,
            "contingency": p.contingency_formula,
        },
    }


def instant_json(i: Instant) -> dict[str, Any]:
    return {
        "key": i.key,
        "name": i.name,
        "phase": i.phase,
        "total": i.total,
        "parts": {part: i.part(part) for part in ("persistent", "gather", "buckets", "activations", "overhead")},
        "entries": [
            {"category": e.category, "what": e.what, "bytes": e.bytes, "formula": e.formula} for e in i.entries
        ],
    }


def peak_json(p: Peak, parts: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stage's ``peak``: the schedule-aware one with its instants (a model), else the declared one."""
    instant = p.instant
    return {
        **(parts or _parts(p)),
        "kind": p.kind,
        "instant": None if instant is None else instant.name,
        "instant_key": None if instant is None else instant.key,
        "note": p.why_declared if p.schedule is None else p.schedule.note,
        "instants": [] if p.schedule is None else [instant_json(i) for i in p.schedule.instants],
    }


def declared_peak_json(p: Peak, parts: dict[str, Any] | None = None) -> dict[str, Any]:
    """The seed's declared peak (the same parts as schema 1's ``peak``), its verdict, and how far the
    peak in use lies from it (0 without a model, where it is the peak). ``parts``: the peak's own,
    when it is the declared one (spelled once)."""
    d = p.declared_peak
    shown = parts if parts is not None and d is p else _parts(d)
    return {**shown, "fits": d.fits, "headroom_bytes": d.headroom, "peak_minus_declared": p.total - d.total}


def mutation_json(m: MutationResult) -> dict[str, Any]:
    return {
        "id": m.id,
        "rule": m.rule,
        "killed": m.killed,
        "check": m.check,
        "message": m.message,
        "failed_checks": m.failed_checks,
    }


def receipt(e: Estimate, base_url: str = DEFAULT_BASE_URL) -> dict[str, Any]:
    """The whole answer for one scenario as JSON-ready data (tuples are JSON arrays).

    ``base_url`` is where the lab is served, as :func:`check_base_url` accepts it (the web routes
    pass the public one, the CLI its ``--base-url``): ``url`` is the scenario's page there, while
    ``link`` stays the bare canonical query that other tools read.
    """
    stages = []
    for st in e.ledger.stages:
        p = st.peak
        persistent = {line.tensor_class: line.bytes for line in st.lines}
        persistent["total"] = st.persistent
        stages.append(
            {
                "stage": st.stage,
                "persistent": persistent,
                "peak": peak_json(p, parts := _parts(p)),
                "declared_peak": declared_peak_json(p, parts),
                "fits": p.fits,
                "headroom_bytes": p.headroom,
                "communication_bytes": st.communication.bytes,
                "communication": {
                    "collectives": st.communication.collectives,
                    "volume_bytes": st.communication.volume,
                    "formula": st.communication.formula,
                    "evidence": st.communication.evidence,
                },
                "lines": [
                    {
                        "class": line.tensor_class,
                        "width": line.width,
                        "copies": line.copies,
                        "owners": line.owners,
                        "elements": line.elements,
                        "bytes": line.bytes,
                        "share_bp": share_bp(line.bytes, st.persistent),
                        "formula": line.formula,
                        "evidence": line.evidence,
                        "note": line.note,
                    }
                    for line in st.lines
                ],
            }
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "scenario": e.scenario.as_dict(),
        "link": canonical_query(e.scenario),
        "url": page_url(e.scenario, base_url),
        "units": "bytes",
        "sources": {
            "activations": e.activation_source,
            "params": e.scenario.source_of("params"),
            "unit_params": e.scenario.source_of("unit_params"),
            "buckets": "declared",
            "overhead": "declared",
        },
        "stages": stages,
        "checkpoint": {
            c.policy: {
                "description": c.description,
                "device_bytes": c.device_bytes,
                "host_bytes": c.host_bytes,
                "save_peak_bytes": c.save_peaks,
                "device_formula": c.device_formula,
                "host_formula": c.host_formula,
                "flagged": c.flagged,
                "flag": c.flag,
            }
            for c in e.checkpoint
        },
        "checks": [
            {"check": c.check, "title": TITLES[c.check], "passed": c.passed, "message": c.message} for c in e.checks
        ],
        "mutations": [mutation_json(m) for m in e.mutations],
        "reference_mutations": [mutation_json(m) for m in e.reference_mutations],
        "model": model_section(e),
        "activations": activations_section(e),
        "fsdp2": fsdp2_section(e),
        "fit": fit_section(e),
        "host": host_section(e),
        "parallelism": parallelism_section(e),
        "disclaimer": DISCLAIMER,
    }


def host_section(e: Estimate) -> dict[str, Any]:
    """The host ledger per node (offloaded state, pinned buffers, the load peak) and DeepSpeed's estimator
    beside it where it models the same thing."""
    host, s = e.ledger.host, e.scenario
    ds = compare(e.ledger, host)
    return {
        "ranks_per_node": host.ranks_per_node,
        "capacity": host.capacity,
        "stages": [
            {
                "stage": st.stage,
                "per_rank": st.per_rank,
                "per_node": st.per_node,
                "nvme_per_node": st.nvme_per_node,
                "load_peak": st.load_peak,
                "load_formula": st.load_formula,
                "load_note": st.load_note,
                "peak": st.peak,
                "headroom": st.headroom,
                "fits": st.fits,
                "lines": [
                    {
                        "what": x.what,
                        "where": x.where,
                        "pinned": x.pinned,
                        "bytes": x.bytes,
                        "formula": x.formula,
                        "evidence": x.evidence,
                    }
                    for x in st.lines
                ],
            }
            for st in host.stages
        ],
        "deepspeed_estimator": None
        if ds is None
        else {
            "stage": ds.stage,
            "options": ds.options,
            "gpu_bytes": ds.gpu,
            "cpu_bytes": ds.cpu,
            "printed": ds.printed,
            "lab_gpu_bytes": ds.lab_gpu,
            "lab_cpu_bytes": ds.lab_cpu,
            "differences": list(ds.differences),
        },
        "deepspeed_estimator_note": not_comparable(s) or "",
    }


def parallelism_shown(s: Scenario) -> bool:
    """Whether the layout is more than plain data parallelism: tp, pp or ep above 1, an HSDP / MiCS shard
    group smaller than D, or a ZeRO++ secondary partition (the table and the page show it then)."""
    return s.tp > 1 or s.pp > 1 or s.ep > 1 or s.shard_group < s.dp or s.hpz > 1


def pipeline_json(ends: PipelineEnds | None) -> dict[str, Any] | None:
    """Both ends of the pipeline at the run's stage (None when pp = 1)."""
    if ends is None:
        return None
    return {
        "budgeted": ends.budgeted,
        "busier": ends.busier,
        "budgeted_is_busier": ends.budgeted_is_busier,
        "other_problem": ends.other_problem,
        "ends": [
            {
                "pp_stage": end.pp_stage,
                "params": end.params,
                "unit_params": end.unit_params,
                "activation_bytes": end.activation_bytes,
                "peak": end.peak,
                "fits": end.fits,
            }
            for end in ends.ends
        ],
    }


def parallelism_section(e: Estimate) -> dict[str, Any]:
    """The model-parallel layout: the world size, this rank's share of the model before ZeRO shards it
    (with a model), the 1F1B activations (when modelled) and both ends of the pipeline (pp > 1)."""
    s, md = e.scenario, e.model
    share = None if md is None else md.share
    acts = md.activations if md is not None and e.activation_source == "modelled" else None
    return {
        "world": s.world,
        "dp": s.dp,
        "tp": s.tp,
        "pp": s.pp,
        "ep": s.ep,
        "shard_group": s.shard_group,
        "replicas": s.dp // s.shard_group,
        "hpz": s.hpz,
        "params_per_rank": s.params,
        "expert_params_per_rank": s.expert_params,
        "share": None
        if share is None
        else {
            "stage": share.stage,
            "layers": share.layers,
            "dense": share.dense,
            "experts": share.experts,
            "whole_model": share.whole_model,
            "largest_unit": {"name": share.largest.name, "params": share.largest.params},
            "lines": list(share.lines),
        },
        "activations": None
        if acts is None
        else {"stage": acts.stage, "in_flight": acts.in_flight, "all_to_all_bytes": acts.all_to_all_bytes},
        "pipeline": pipeline_json(e.pipeline),
    }
