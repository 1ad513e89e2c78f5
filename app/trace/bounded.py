"""A trace report held to a size: what the cache keeps and ``/trace.json`` serves never grows with the model.

A report's ``timeline`` has a handful of instants per FSDP unit and its ``instants`` one row per modelled instant:
a deep model's report passes 256 KiB, and a row put in the cache by other means could be any size. Past
:data:`MAX_REPORT_BYTES` the timeline keeps its first and last instants, the peak's and the instants around it, and
says how many it left out; past it still, the modelled instants keep only those with a traced figure beside them;
text that is no report at all becomes a note. Exact integers are kept as they were. Standard library only.
"""

from __future__ import annotations

import json
from typing import Any

MAX_REPORT_BYTES = 256 * 1024
KEEP_ENDS = 40  # instants kept at each end of the timeline
KEEP_AROUND_PEAK = 40  # and on each side of the instant whose stretch holds the peak


def _size(report: dict[str, Any]) -> int:
    return len(json.dumps(report).encode())


def _elide(items: list[Any], keep: set[int], what: str) -> tuple[list[Any], dict[str, Any]]:
    kept = [items[i] for i in sorted(keep) if 0 <= i < len(items)]
    return kept, {"what": what, "of": len(items), "kept": len(kept), "left_out": len(items) - len(kept)}


def bounded_report(text: str, limit: int = MAX_REPORT_BYTES) -> str:
    """``text`` (a trace's JSON report) as it is when it fits in ``limit`` bytes, else made to fit."""
    if len(text.encode()) <= limit:
        return text
    try:
        report = json.loads(text)
    except ValueError:
        report = None
    if not isinstance(report, dict):
        return json.dumps({"elided": {"what": "the cached text, which is no trace report", "bytes": len(text)}})
    elided: list[dict[str, Any]] = []
    timeline = report.get("timeline")
    if isinstance(timeline, list):
        peak = max(range(len(timeline)), key=lambda i: _total(timeline[i]), default=0)
        ends = set(range(KEEP_ENDS)) | set(range(len(timeline) - KEEP_ENDS, len(timeline)))
        keep = ends | set(range(peak - KEEP_AROUND_PEAK, peak + KEEP_AROUND_PEAK + 1))
        report["timeline"], note = _elide(timeline, keep, "timeline: its ends and the instants around its peak")
        elided.append(note)
    report["elided"] = elided
    instants = report.get("instants")
    if _size(report) > limit and isinstance(instants, list):
        keep = {i for i, row in enumerate(instants) if isinstance(row, dict) and row.get("traced") is not None}
        report["instants"], note = _elide(instants, keep, "instants: those with a traced figure beside them")
        elided.append(note)
    if _size(report) > limit:
        kept = {
            k: report[k] for k in ("schema", "scenario", "peak", "peak_at", "modelled", "comparison") if k in report
        }
        report = {**kept, "elided": [*elided, {"what": "the timeline and the instants, which do not fit"}]}
    if _size(report) > limit:
        return json.dumps({"elided": {"what": "the report, whose figures alone do not fit", "bytes": len(text)}})
    return json.dumps(report)


def _total(instant: Any) -> int:
    peak = instant.get("peak_since_previous", instant.get("total", 0)) if isinstance(instant, dict) else 0
    return peak if isinstance(peak, int) else 0
