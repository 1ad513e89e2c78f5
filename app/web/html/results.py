"""The results section: verdict, model, persistent state by stage, peak, fit finder,
communication, checkpoint and kill lists. The page includes it; a live update swaps it in.

Every number is formatted here, at the display edge, from the estimate's exact integers. User
text — the title (the scenario name), the query string, a pasted model's title and source, the
error messages that quote input — is escaped; the lab's own text goes through ``asc``.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.ledger.arithmetic import share_bp
from app.ledger.checks import CheckResult
from app.ledger.estimate import Estimate
from app.ledger.models.inventory import Unit
from app.ledger.mutants import reference_kill_list
from app.ledger.rules import CLASSES, STAGES
from app.ledger.scenario import FieldError
from app.receipts.display import gb, gib, integer, percent_bp
from app.receipts.receipt import DISCLAIMER, fsdp2_section
from app.web.charts import PARTS, PEAK_PARTS, fit_chart, peak_chart, stage_peaks
from app.web.html.tables import kills_table
from app.web.html.text import ascii_html as asc  # every text from the core goes through it
from app.web.html.text import esc
from app.web.html.text import recurring_ascii_html as fixed  # a text without numbers: converted once

_DISCLAIMER = asc(DISCLAIMER)
SECTION_OPEN = '<section id="results" class="results" aria-live="polite" aria-label="Ledger" tabindex="-1">\n'
REFERENCE_KILLS = kills_table("Reference: the frozen seed scenario (checks 1&ndash;5)", reference_kill_list())


def waiting(errors: Mapping[str, FieldError]) -> str:
    """The results section while some input is invalid: which fields, and what they allow."""
    count = len(errors)
    items = "".join(
        f'<li><a href="#f-{esc(name)}">{esc(name)}</a>: {asc(esc(err.message))}'
        f" (allowed: {asc(esc(err.allowed))})</li>\n"
        for name, err in errors.items()
    )
    return (
        f'{SECTION_OPEN}<div class="notice bad" role="status">\n<h2>Waiting for valid input</h2>\n'
        f"<p>{count} field{'s' if count != 1 else ''} need{'s' if count == 1 else ''} attention; the ledger is"
        f" computed only from a fully valid scenario.</p>\n<ul>\n{items}</ul>\n</div>\n</section>\n"
    )


def results(e: Estimate, title: str, query: str) -> str:
    """The whole results section for a valid scenario: the same for the page and a live update.
    The two long tables (ledger lines, fit curve) sit in closed ``<details>`` that fetch them when
    opened; without JavaScript their link opens them as a page of their own."""
    q = esc("?" + query) if query else ""
    capacity = e.scenario.capacity_bytes
    capacity_gb = gb(capacity)
    return "".join(
        (
            SECTION_OPEN,
            _summary(e, title, q, capacity_gb),
            _model(e) if e.model else "",
            _persistent(e, q),
            _peak(e, capacity_gb),
            _fit(e, q, capacity_gb),
            _communication(e),
            _checkpoint(e),
            _kills(e),
            "</section>\n",
        )
    )


def _summary(e: Estimate, title: str, q: str, capacity_gb: str) -> str:
    stages = e.ledger.stages
    least = next((st for st in stages if st.peak.fits), None)
    if least is not None:
        verdict = (
            f'<p class="verdict ok">\nLeast complex stage that fits: <strong>stage {least.stage}</strong>, peak '
            f"{gb(least.peak.total)} of {capacity_gb} ({gb(least.peak.headroom)} headroom).\n</p>\n"
        )
    else:
        verdict = (
            f'<p class="verdict bad">\n<strong>No stage fits</strong> in {capacity_gb} /'
            f" {gib(e.scenario.capacity_bytes)}:"
            f" the smallest peak is stage 3 at {gb(stages[3].peak.total)}.\n</p>\n"
        )
    return (
        f'<header class="summary">\n<h2>{esc(title)}</h2>\n{verdict}<p class="links">\n'
        f'<a href="/receipt.json{q}" download>Download JSON receipt</a> &middot;\n'
        f'<a href="/receipt.csv{q}" download>Download CSV receipt</a> &middot;\n'
        f'<a href="/api/estimate{q}" type="application/json">API</a> &middot;\n'
        f'<a id="share" href="/{q}">Link to this scenario</a>\n'
        '<button type="button" class="copy" data-copy="#share">Copy link</button>\n'
        '<span class="copied" role="status" aria-live="polite"></span>\n</p>\n</header>\n'
    )


def _unit_row(unit: Unit, layer: bool, layers: int) -> str:
    name = unit.name + (f" &hellip; layers.{layers - 1}" if layer and layers > 1 else "")
    tensors = "; ".join(
        f"{t.name} [{' &times; '.join(str(d) for d in t.shape)}]" + (f" &times; {t.count:,}" if t.count > 1 else "")
        for t in unit.tensors
    )
    each = " each" if layer else ""
    return (
        f'<tr><th scope="row">{name}</th><td class="num">{unit.params:,}{each}</td>'
        f"<td><small>{tensors}</small></td></tr>\n"
    )


def _model(e: Estimate) -> str:
    md = e.model
    assert md is not None
    s = e.scenario
    inv, arch = md.model.inventory, md.model.architecture
    params_note = f": the scenario uses {s.params:,}" if s.params != inv.params else ""
    unit_note = f": the scenario uses {s.unit_params:,}" if s.unit_params != inv.largest_unit.params else ""
    tied = " (tied embeddings, counted once)" if arch.tied_embeddings else ""
    fsdp2 = ""
    if e.fsdp2:
        section = fsdp2_section(e)
        fsdp2 = (
            f"<p>FSDP2 exact stage-3 shard at D = {s.dp:,}: {e.fsdp2.padded_elements:,} elements per rank with each"
            f" tensor padded on dim 0, against &lceil;N &divide; D&rceil; = {e.fsdp2.lower_bound_elements:,} &mdash;"
            f" {'' if section is None else asc(str(section['note']))}.</p>\n"
        )
    layer = inv.units[1]
    rows = (
        _unit_row(inv.embed, False, arch.layers)
        + _unit_row(layer, True, arch.layers)
        + _unit_row(inv.final, False, arch.layers)
    )
    return (
        '<section aria-labelledby="sec-model">\n'
        f'<h3 id="sec-model">Model: {asc(esc(md.model.title))}</h3>\n'
        f"<p>{asc(esc(arch.family))}: <strong>{inv.params:,}</strong> parameters"
        f" ({s.source_of('params')}{params_note}),"
        f" {arch.layers} layers, hidden {arch.hidden:,}, vocabulary {arch.vocab:,}{tied}.\n"
        f"Largest wrapped unit: <strong>{inv.largest_unit.name}</strong> = {inv.largest_unit.params:,} parameters"
        f" ({s.source_of('unit_params')}{unit_note}).</p>\n"
        f'<p class="hint">Source: {asc(esc(md.model.source))}. Wrapped as FSDP2 / DeepSpeed wrap a decoder: the'
        " embedding, each decoder layer, and a final unit (final norm"
        f"{'' if arch.tied_embeddings else ' + LM head'}).</p>\n"
        f"{fsdp2}<details>\n<summary>Units and tensors (one decoder layer shown; all {arch.layers} are identical)"
        '</summary>\n<div class="scroll">\n<table>\n<thead><tr><th scope="col">unit</th><th scope="col">parameters'
        '</th><th scope="col">tensors (shape)</th></tr></thead>\n'
        f"<tbody>\n{rows}</tbody>\n</table>\n</div>\n</details>\n</section>\n"
    )


_PERSISTENT_HEAD = (
    '<section aria-labelledby="h-persistent">\n<h3 id="h-persistent">Persistent state per busiest rank, by stage'
    '</h3>\n<p class="hint">Decimal GB (10<sup>9</sup> B) above binary GiB (2<sup>30</sup> B), then the exact bytes'
    " and the class's share of the stage. Hover a cell for its formula; the ledger lines below hold every formula"
    ' and its evidence.</p>\n<div class="scroll">\n<table class="stages">\n<thead><tr><th scope="col">class</th>'
    '<th scope="col">stage 0</th><th scope="col">stage 1</th><th scope="col">stage 2</th><th scope="col">stage 3'
    "</th></tr></thead>\n<tbody>\n"
)
_LINES_SUMMARY = "<summary>Ledger lines: formula and evidence for every (stage, class)</summary>\n"


def _lazy(kind: str, path: str, q: str, summary: str) -> str:
    """A closed ``<details>`` that fetches its table when first opened (htmx). The placeholder's
    link opens the same table as a page, for a reader without JavaScript."""
    return (
        f'<details class="{kind}" hx-get="{path}{q}" hx-trigger="toggle once" hx-target="find .lazy"'
        f' hx-swap="innerHTML">\n{summary}<div class="lazy"><p class="hint">loading&hellip; (or open'
        f' <a href="{path}{q}">the table on a page of its own</a>)</p></div>\n</details>\n'
    )


# Per (class, stage): the cell's fixed attributes, from the closing quote of data-bytes on.
_CELL_ATTRS = [[f'" data-stage="{stage}" data-class="{cls}"><span class="gb">' for stage in STAGES] for cls in CLASSES]


def _persistent(e: Estimate, q: str) -> str:
    stages = e.ledger.stages
    out = [_PERSISTENT_HEAD]
    for index, cls in enumerate(CLASSES):
        out.append(f'<tr><th scope="row">{cls}</th>')
        attrs = _CELL_ATTRS[index]
        # The stages that own a class the same way (replicated at stages 0-2, say) hold the same
        # line object (all_persistent_lines shares it): its title and figures are formatted once
        # for them. A line that is equal but not the same is simply formatted again.
        shown_for = None
        shown = ("", "", "", "")
        for st in stages:
            line = st.lines[index]
            value = line.bytes
            if line is not shown_for:
                shown_for = line
                shown = (asc(line.formula), gb(value), gib(value), integer(value))
            out.append(
                f'<td class="num" title="{shown[0]}" data-bytes="{value}{attrs[st.stage]}{shown[1]}</span>'
                f'<span class="gib">{shown[2]}</span><span class="raw">{shown[3]} B &middot;'
                f" {percent_bp(share_bp(value, st.persistent))}</span></td>"
            )
        out.append("</tr>\n")
    totals = "".join(
        f'<td class="num" data-bytes="{st.persistent}" data-stage="{st.stage}" data-class="total"><span class="gb">'
        f'{gb(st.persistent)}</span><span class="gib">{gib(st.persistent)}</span><span class="raw">'
        f"{integer(st.persistent)} B</span></td>"
        for st in stages
    )
    out.append(f'</tbody>\n<tfoot>\n<tr><th scope="row">total</th>{totals}</tr>\n</tfoot>\n</table>\n</div>\n')
    out.append(_lazy("lines", "/lines", q, _LINES_SUMMARY))
    out.append("</section>\n")
    return "".join(out)


_LEGEND = "".join(f'<li><span class="swatch {part}" aria-hidden="true"></span>{label}</li>' for part, label in PARTS)
_PEAK_TABLE_HEAD = (
    '<div class="scroll">\n<table class="peak">\n<caption>The chart\'s numbers (GB; exact bytes on hover; GiB for'
    ' peak and headroom)</caption>\n<thead><tr><th scope="col">stage</th><th scope="col">persistent</th>'
    '<th scope="col">all-gather</th><th scope="col">buckets</th><th scope="col">activations</th>'
    '<th scope="col">overhead</th><th scope="col">contingency</th><th scope="col">peak</th>'
    '<th scope="col">verdict</th><th scope="col">headroom</th></tr></thead>\n<tbody>\n'
)


def _peak(e: Estimate, capacity_gb: str) -> str:
    s = e.scenario
    stages = e.ledger.stages
    peaks = stage_peaks(e.ledger)
    rows = []
    for stage, fits, values, gbs, exact in peaks:
        cells = "".join(
            [
                f'<td class="num" data-part="{part}" data-bytes="{v}" title="{x} B">{g}</td>'
                for part, v, g, x in zip(PEAK_PARTS, values, gbs, exact, strict=True)
            ]
        )
        verdict = '<td class="ok">fits' if fits else '<td class="bad">does not fit'
        headroom = stages[stage].peak.headroom
        rows.append(
            f'<tr data-stage="{stage}"><th scope="row">stage {stage}</th>{cells}{verdict}<br><small>peak '
            f'{gib(values[6])}</small></td><td class="num" data-part="headroom" data-bytes="{headroom}"'
            f' title="{headroom:,} B &middot; {asc(gib(headroom))}">{asc(gb(headroom))}</td></tr>\n'
        )
    chart = peak_chart(peaks, s.capacity_bytes, capacity_gb)
    return (
        '<section aria-labelledby="h-peak">\n<h3 id="h-peak">Training peak against the device</h3>\n'
        f'<figure class="chart">\n{chart}<figcaption>\n<ul class="legend">{_LEGEND}'
        f'<li><span class="swatch capacity" aria-hidden="true"></span>capacity {capacity_gb} / {gib(s.capacity_bytes)}'
        f"</li></ul>\n</figcaption>\n</figure>\n{_PEAK_TABLE_HEAD}{''.join(rows)}</tbody>\n</table>\n</div>\n"
        f'<ul class="sources">\n<li>All-gather (stage 3): <code>{asc(stages[3].peak.gather_formula)}</code></li>\n'
        f"{_activations(e)}"
        f"<li>Buckets {gb(s.bucket_bytes)}, overhead {gb(s.overhead_bytes)}: declared inputs. Contingency"
        f" {s.contingency_pct} %: <code>{asc(stages[3].peak.contingency_formula)}</code></li>\n</ul>\n"
        f'<p class="claim"><strong>What this lab does not claim.</strong> {_DISCLAIMER}</p>\n</section>\n'
    )


def _activations(e: Estimate) -> str:
    s = e.scenario
    source = e.activation_source
    formula = asc(e.ledger.stages[0].peak.activations_formula)
    out = f"<li>Activations: <strong>{source}</strong>"
    if source == "placeholder":
        out += " &mdash; the seed's declared 20 GB; type a measurement or pick a model"
    out += f". <code>{formula}</code>\n"
    if source == "modelled":
        assert e.model is not None
        act = e.model.activations
        sp = " with sequence parallelism" if s.sequence_parallel else ""
        working = f" + working set {act.working_set_bytes:,} B" if act.working_set_bytes else ""
        out += (
            f"<br>{act.policy} recomputation, s = {s.seq_len:,}, b = {s.micro_batch:,}, t = {s.tp}{sp}:"
            f" {act.layers} layers &times; {act.per_layer_bytes:,} B{working} + embedding {act.embedding_bytes:,} B"
            f" + head input {act.head_bytes:,} B"
            f" + logits {act.logits_bytes:,} B = {act.total_bytes:,} B ({gb(act.total_bytes)}). Recomputation costs"
            f" +{act.recompute_fraction_text(3)} of a step in extra forward FLOPs.\n<details><summary>Formula and"
            f" assumptions</summary><p><code>{asc(act.formula)}</code></p>"
            f'<p class="hint">{asc(act.assumptions)}</p></details>\n'
        )
    elif source == "measured" and e.model:
        out += (
            f"<br>The model would give {gb(e.model.activations.total_bytes)} ({s.act_policy}, s = {s.seq_len:,},"
            f" b = {s.micro_batch:,}); the typed measurement wins."
        )
    return out + "</li>\n"


_FIT_LEGEND = "".join(
    f'<li><span class="swatch stage{stage}" aria-hidden="true"></span>stage {stage}</li>' for stage in STAGES
)
_FIT_SUMMARY = "<summary>The chart's numbers: peak per stage at each D</summary>\n"


def _fit(e: Estimate, q: str, capacity_gb: str) -> str:
    s = e.scenario
    modelled = e.fit.micro_batch_modelled
    rows = []
    for st in e.fit.stages:
        dp = "none fits" if st.smallest_dp is None else f"{st.smallest_dp:,}"
        if not modelled:
            mb = "&mdash; (activations not modelled)"
        else:
            mb = "none fits" if st.largest_micro_batch is None else f"{st.largest_micro_batch:,}"
        rows.append(
            f'<tr data-stage="{st.stage}"><th scope="row">stage {st.stage}</th><td class="num" data-fit="smallest_dp">'
            f'{dp}</td><td class="num" data-fit="largest_micro_batch">{mb}</td></tr>'
        )
    return (
        '<section aria-labelledby="h-fit">\n<h3 id="h-fit">Fit finder</h3>\n<div class="scroll">\n<table class="fit">\n'
        '<thead><tr><th scope="col">stage</th><th scope="col">smallest D that fits</th><th scope="col">largest micro'
        f" batch at D = {s.dp:,}</th></tr></thead>\n<tbody>\n{''.join(rows)}\n</tbody>\n</table>\n</div>\n"
        f'<figure class="chart">\n{fit_chart(e.fit.curve, s.capacity_bytes, capacity_gb)}'
        f'<figcaption><ul class="legend">{_FIT_LEGEND}<li><span class="swatch capacity" aria-hidden="true">'
        f"</span>capacity {capacity_gb}</li></ul></figcaption>\n</figure>\n"
        f"{_lazy('fit-numbers', '/fit-table', q, _FIT_SUMMARY)}</section>\n"
    )


def _communication(e: Estimate) -> str:
    rows = "".join(
        f'<tr><th scope="row">stage {st.stage}</th><td>{asc(c.collectives)}</td><td class="num" data-bytes="{c.bytes}">'
        f"{gb(c.bytes)}<br><small>{integer(c.bytes)} B</small></td><td><code>{asc(c.formula)}</code></td></tr>\n"
        for st in e.ledger.stages
        for c in (st.communication,)
    )
    return (
        '<section aria-labelledby="h-comm">\n<h3 id="h-comm">Communication per rank per optimizer step</h3>\n'
        '<div class="scroll">\n<table>\n<thead><tr><th scope="col">stage</th><th scope="col">collectives</th>'
        f'<th scope="col">bytes sent</th><th scope="col">formula</th></tr></thead>\n<tbody>\n{rows}</tbody>\n'
        f'</table>\n</div>\n<p class="hint">{fixed(e.ledger.stages[0].communication.evidence)}. Stage 3 is 1.5&times;'
        " the baseline when widths are equal.</p>\n</section>\n"
    )


_CHECKPOINT_HEAD = (
    '<section aria-labelledby="h-ckpt">\n<h3 id="h-ckpt">Checkpoint save on rank 0 (separate from the training peak)'
    '</h3>\n<div class="scroll">\n<table>\n<thead><tr><th scope="col">policy</th><th scope="col">device extra</th>'
    '<th scope="col">host bytes</th><th scope="col">save peak, stage 0</th><th scope="col">stage 1</th>'
    '<th scope="col">stage 2</th><th scope="col">stage 3</th></tr></thead>\n<tbody>\n'
)


def _checkpoint(e: Estimate) -> str:
    rows = [_CHECKPOINT_HEAD]
    peaks: tuple[int, ...] = ()
    saves = ""
    for c in e.checkpoint:
        if c.save_peaks != peaks:  # the two consolidating policies add the same unit: the same peaks
            peaks = c.save_peaks
            saves = "".join([f'<td class="num" data-bytes="{v}">{gb(v)}</td>' for v in peaks])
        flagged = ' class="flagged"' if c.flagged else ""
        rows.append(
            f'<tr{flagged}><th scope="row">{asc(c.policy)}<br><small>{fixed(c.description)}</small></th><td class="num"'
            f' data-bytes="{c.device_bytes}" title="{asc(c.device_formula)}">{gb(c.device_bytes)}</td><td class="num"'
            f' data-bytes="{c.host_bytes}" title="{asc(c.host_formula)}">{gb(c.host_bytes)}</td>{saves}</tr>\n'
        )
        if c.flagged:
            rows.append(f'<tr class="flagged"><td colspan="7" role="note">&#9873; {asc(c.flag)}</td></tr>\n')
    rows.append("</tbody>\n</table>\n</div>\n</section>\n")
    return "".join(rows)


def _check_item(c: CheckResult) -> str:
    if c.passed:
        return f'<li class="ok">&#10003; {fixed(c.title)} &mdash; {asc(c.message)}</li>'
    return f'<li class="bad">&#10007; {fixed(c.title)} &mdash; {asc(c.message)}</li>'


def _kills(e: Estimate) -> str:
    return (
        '<section aria-labelledby="h-kill">\n<h3 id="h-kill">Mutation kill list</h3>\n<p class="hint">Each mutant'
        " changes one accounting rule of the production ledger; a named check must catch it. On your scenario checks"
        " 1&ndash;4 run, so an equivalent mutant survives and says why.</p>\n"
        f"{kills_table('On this scenario', e.mutations)}{REFERENCE_KILLS}<details>\n<summary>The checks on the"
        f' production ledger</summary>\n<ul class="checks">\n{"".join(_check_item(c) for c in e.checks)}\n</ul>\n'
        "</details>\n</section>\n"
    )
