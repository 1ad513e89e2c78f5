"""Every answer of the golden set is the one recorded: pages, receipts, CSV, tables, comparisons, imports.

A change that moves code must leave every figure, formula and message as it was. A change that means
to alter an answer records the set again (``python -m tests.support.golden --write``) and the diff of
``--dump`` folders before and after shows a reviewer exactly what moved.
"""

from __future__ import annotations

import difflib

from tests.support.golden import answers, load


def test_every_answer_is_the_recorded_one() -> None:
    recorded = load()
    now = dict(answers())
    assert sorted(now) == sorted(recorded), "the set's requests changed: record it again on purpose"
    differing = [key for key in recorded if now[key] != recorded[key]]
    report = []
    for key in differing[:3]:
        diff = difflib.unified_diff(
            recorded[key].splitlines(), now[key].splitlines(), "recorded", "now", lineterm="", n=1
        )
        report.append(f"--- {key}\n" + "\n".join(list(diff)[:40]))
    assert not differing, f"{len(differing)} answers differ, e.g.:\n" + "\n".join(report)
