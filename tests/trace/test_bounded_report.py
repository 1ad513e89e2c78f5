"""A trace report held to 256 KiB when the cache keeps it and when ``/trace.json`` serves it, whatever the model's
depth or what was put in the cache: its figures kept exactly, what was left out said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.trace.bounded import MAX_REPORT_BYTES, bounded_report
from app.trace.store import TraceStore, summarise
from tests.support.trace_fakes import REPORT


def _deep(layers: int) -> dict[str, Any]:
    """The fake trace's report with the timeline and instants of a model of ``layers`` layers (six instants per
    unit, as the tracer records), its peak at layer 700's backward."""
    report: dict[str, Any] = json.loads(json.dumps(REPORT))
    parts = {"params": 10**9, "grads": 10**9, "activations": 0}
    step = {"phase": "backward", "parts": parts}
    timeline = []
    for k in range(layers):
        for what in ("forward", "forward done", "backward", "gradients", "reduce-scattered", "recompute"):
            peak = 10**10 + k + (5 * 10**9 if (k, what) == (700, "backward") else 0)
            timeline.append({**step, "instant": f"{what} layers.{k}", "unit": f"layers.{k}", "total": peak - 1,
                             "peak_since_previous": peak})  # fmt: skip
    report["timeline"] = timeline
    row = report["instants"][0]
    report["instants"] = [{**row, "key": f"backward-layer-{k}", "traced": None if k % 2 else 10**10}
                          for k in range(layers)]  # fmt: skip
    return report


def test_a_report_that_fits_is_kept_as_it_was() -> None:
    text = json.dumps(REPORT)
    assert bounded_report(text) == text


def test_a_deep_models_report_keeps_its_figures_its_peak_and_says_what_it_left_out() -> None:
    report = _deep(1_200)
    text = json.dumps(report)
    assert len(text) > 4 * MAX_REPORT_BYTES
    bounded = json.loads(out := bounded_report(text))
    assert len(out.encode()) <= MAX_REPORT_BYTES
    for key in ("schema", "trace", "peak", "peak_at", "modelled"):
        assert bounded[key] == report[key]
    instants = [i["instant"] for i in bounded["timeline"]]
    assert "backward layers.700" in instants and instants[0] == "forward layers.0"
    (timeline_note, *_) = bounded["elided"]
    assert timeline_note["of"] == len(report["timeline"])
    assert timeline_note["kept"] + timeline_note["left_out"] == timeline_note["of"]


def test_the_cache_keeps_a_report_within_the_bound(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3", "v")
    store.claim("dp=2", "w", "", replacing=None)
    store.finish("dp=2", "w", json.dumps(_deep(1_200)), summarise(REPORT))
    kept = store.report("dp=2")
    assert kept is not None and len(kept.encode()) <= MAX_REPORT_BYTES
    assert json.loads(kept)["peak"] == REPORT["peak"]


def test_text_that_is_no_report_becomes_a_note() -> None:
    out = json.loads(bounded_report("x" * (MAX_REPORT_BYTES + 1)))
    assert out == {"elided": {"what": "the cached text, which is no trace report", "bytes": MAX_REPORT_BYTES + 1}}
