"""Tables shown both inline and on demand: the ledger lines, the fit curve's numbers, a kill list.

The first two sit in closed ``<details>`` that fetch them (``/lines``, ``/fit-table``) when the
reader opens one; without JavaScript the same routes answer with a page of their own.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.ledger.ledger import Ledger
from app.ledger.mutants import MutationResult
from app.receipts.display import gb
from app.web.html.text import ascii_html, recurring_ascii_html

_LINES_HEAD = (
    '<div class="scroll">\n<table>\n<thead><tr><th scope="col">stage</th><th scope="col">class</th>'
    '<th scope="col">width (B)</th><th scope="col">copies</th><th scope="col">owners</th>'
    '<th scope="col">elements / rank</th><th scope="col">bytes / rank</th><th scope="col">formula</th>'
    '<th scope="col">evidence</th></tr></thead>\n<tbody>\n'
)
_TABLE_END = "</tbody>\n</table>\n</div>\n"


def lines_table(ledger: Ledger) -> str:
    """Every ledger line: width, copies, owners, elements and bytes per rank, formula, evidence."""
    rows = [_LINES_HEAD]
    for st in ledger.stages:
        for ln in st.lines:
            note = f"<br><small>{recurring_ascii_html(ln.note)}</small>" if ln.note else ""
            rows.append(
                f'<tr><td>{st.stage}</td><td>{ln.tensor_class}</td><td class="num">{ln.width}</td>'
                f'<td class="num">{ln.copies}</td><td class="num">{ln.owners:,}</td>'
                f'<td class="num">{ln.elements:,}</td>'
                f'<td class="num">{ln.bytes:,}</td><td><code>{ascii_html(ln.formula)}</code>{note}</td>'
                f"<td><small>{recurring_ascii_html(ln.evidence)}</small></td></tr>\n"
            )
    rows.append(_TABLE_END)
    return "".join(rows)


_FIT_HEAD = (
    '<div class="scroll">\n<table class="fit-curve">\n<thead><tr><th scope="col">D</th><th scope="col">stage 0</th>'
    '<th scope="col">stage 1</th><th scope="col">stage 2</th><th scope="col">stage 3</th></tr></thead>\n<tbody>\n'
)


def fit_table(curve: tuple[tuple[int, tuple[int, ...]], ...]) -> str:
    """The fit chart's twin: the peak of every stage at each D of the curve."""
    rows = [_FIT_HEAD]
    for dp, peaks in curve:
        cells = "".join(f'<td class="num" data-bytes="{p}">{gb(p)}</td>' for p in peaks)
        rows.append(f'<tr><th scope="row">{dp:,}</th>{cells}</tr>')
    rows.append("\n" + _TABLE_END)
    return "".join(rows)


_KILLS_HEAD = (
    '<thead><tr><th scope="col">mutant</th><th scope="col">broken rule</th><th scope="col">result</th>'
    '<th scope="col">killed by</th><th scope="col">message</th></tr></thead>\n<tbody>\n'
)


def kills_table(caption: str, results: Iterable[MutationResult]) -> str:
    """One kill list: each mutant, the rule it breaks, and the check that caught it (or why not)."""
    rows = [f'<div class="scroll">\n<table class="kills">\n<caption>{caption}</caption>\n', _KILLS_HEAD]
    for m in results:
        verdict = '<td class="ok">killed' if m.killed else '<td class="warn">survived'
        rows.append(
            f'<tr data-mutant="{m.id}"><th scope="row"><code>{m.id}</code></th><td>{recurring_ascii_html(m.rule)}</td>'
            f"{verdict}</td><td>{m.check}</td><td>{ascii_html(m.message)}</td></tr>\n"
        )
    rows.append(_TABLE_END)
    return "".join(rows)
