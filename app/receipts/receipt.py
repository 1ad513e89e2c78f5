"""The JSON receipt (spec "Receipt contract"): stable names, raw integer bytes."""

from __future__ import annotations

from functools import cache
from typing import Any

from app.ledger.arithmetic import share_bp
from app.ledger.checks import TITLES
from app.ledger.estimate import Estimate
from app.ledger.fields import STATIC_DEFAULTS
from app.ledger.mutants import MutationResult, reference_kill_list
from app.receipts.links import canonical_query

SCHEMA_VERSION = 1
DISCLAIMER = (
    "Declared lower bounds and one declared peak. The lab does not predict allocator fragmentation, "
    "kernel workspaces, throughput, or whether a particular framework version fits."
)


def activation_source(e: Estimate) -> str:
    """``placeholder`` while the seed's declared 20 GB stands, else ``declared``."""
    if e.scenario.activation_bytes == STATIC_DEFAULTS["activation_bytes"]:
        return "placeholder"
    return "declared"


def _mutation(m: MutationResult) -> dict[str, Any]:
    return {
        "id": m.id,
        "rule": m.rule,
        "killed": m.killed,
        "check": m.check,
        "message": m.message,
        "failed_checks": list(m.failed_checks),
    }


@cache
def _reference_json() -> tuple[dict[str, Any], ...]:
    return tuple(_mutation(m) for m in reference_kill_list())


def _reference(results: tuple[MutationResult, ...]) -> list[dict[str, Any]]:
    """The frozen scenario's kill list never changes: its JSON form is built once (copied per receipt)."""
    if results is reference_kill_list():
        return [dict(m) for m in _reference_json()]
    return [_mutation(m) for m in results]


def receipt(e: Estimate) -> dict[str, Any]:
    """The whole answer for one scenario as JSON-ready data."""
    stages = []
    for st in e.ledger.stages:
        p = st.peak
        stages.append(
            {
                "stage": st.stage,
                "persistent": {
                    **{line.tensor_class: line.bytes for line in st.lines},
                    "total": st.persistent,
                },
                "peak": {
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
                },
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
        "units": "bytes",
        "sources": {"activations": activation_source(e), "buckets": "declared", "overhead": "declared"},
        "stages": stages,
        "checkpoint": {
            c.policy: {
                "description": c.description,
                "device_bytes": c.device_bytes,
                "host_bytes": c.host_bytes,
                "save_peak_bytes": list(c.save_peaks),
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
        "mutations": [_mutation(m) for m in e.mutations],
        "reference_mutations": _reference(e.reference_mutations),
        "disclaimer": DISCLAIMER,
    }
