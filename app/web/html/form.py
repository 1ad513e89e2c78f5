"""The scenario form: presets, one grouped field per input, the config.json paste form, devices.

Everything about a field except its value, its error and a derived field's hint is fixed, so
each field's markup is split once, at import, into the parts around those three.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.ledger.fields import FIELDS, GROUPS, Field, allowed_text
from app.ledger.models.known import KNOWN_MODELS
from app.ledger.presets import DEVICES, PRESETS
from app.ledger.scenario import FieldError
from app.receipts.display import gb, gib, integer
from app.web.html.text import ascii_html, esc
from app.web.query import DERIVED
from app.web.views import FormField


def error_slot(name: str, error: FieldError | None, *, oob: bool = False) -> str:
    """A field's error slot: the element its ``aria-describedby`` points to. The page renders it in
    the form; the htmx fragment swaps every slot out of band, filled or emptied."""
    swap = ' hx-swap-oob="true"' if oob else ""
    if error is None:
        return f'<div class="field-error" id="e-{name}"{swap}></div>'
    return (
        f'<div class="field-error" id="e-{name}"{swap}><span role="alert">{name}: {ascii_html(esc(error.message))}'
        f" &mdash; allowed: {ascii_html(esc(error.allowed))}</span></div>"
    )


EMPTY_SLOTS: dict[str, str] = {f.name: error_slot(f.name, None) for f in FIELDS}


def derived_slot(name: str, hint: str, *, oob: bool = False) -> str:
    """What an empty derived field stands for, under the field; the htmx fragment swaps it out of
    band as the other inputs change."""
    swap = ' hx-swap-oob="true"' if oob else ""
    return f'<small class="derived" id="d-{name}"{swap}>{ascii_html(esc(hint))}</small>'


EMPTY_OOB_SLOTS = "\n".join(error_slot(f.name, None, oob=True) for f in FIELDS) + "\n"

PRESETS_BLOCK = ascii_html(
    '<form class="presets" method="get" action="/">\n'
    '<label for="preset">Preset</label>\n'
    '<select id="preset" name="preset" data-autosubmit>\n'
    '<option value="">&mdash; pick a workshop scenario &mdash;</option>\n'
    + "".join(f'<option value="{esc(p.id)}">{esc(p.title)}</option>\n' for p in PRESETS)
    + "</select>\n"
    '<button type="submit">Load</button>\n'
    "</form>\n"
)
DATALIST = ascii_html(
    '<datalist id="devices">\n'
    + "".join(
        f'<option value="{d.capacity_bytes}">{esc(d.title)} &mdash; {esc(d.nominal)} read as {d.unit}</option>\n'
        for d in DEVICES
    )
    + "</datalist>\n"
)
DEVICES_BLOCK = ascii_html(
    '<details class="devices">\n'
    "<summary>Device capacities and where they come from</summary>\n"
    "<table>\n"
    '<thead><tr><th scope="col">device</th><th scope="col">datasheet</th><th scope="col">bytes used</th>'
    '<th scope="col">source</th></tr></thead>\n'
    "<tbody>\n"
    + "".join(
        f'<tr><td>{esc(d.title)}</td><td>{esc(d.nominal)} ({d.unit})</td><td class="num">'
        f"{integer(d.capacity_bytes)}<br><small>{gb(d.capacity_bytes)} / {gib(d.capacity_bytes)}</small></td>"
        f"<td><small>{esc(d.source)}</small></td></tr>\n"
        for d in DEVICES
    )
    + "</tbody>\n</table>\n</details>\n"
)
FORM_OPEN = (
    '<form id="scenario" method="get" action="/" novalidate hx-get="/" hx-target="#results" hx-swap="outerHTML"'
    ' hx-push-url="true" hx-trigger="input delay:300ms, change, submit" hx-sync="this:replace"'
    ' hx-indicator="#busy">\n'
)
FORM_CLOSE = (
    '<div class="actions">\n'
    '<button type="submit">Compute</button>\n'
    '<span id="busy" class="busy" role="status" aria-live="polite"><span class="spinner" aria-hidden="true"></span>'
    " updating&hellip;</span>\n"
    "</div>\n"
    "</form>\n"
)


class _FieldParts:
    """One field's fixed markup, split around what a request fills in."""

    def __init__(self, f: Field, derived: bool) -> None:
        name = f.name
        self.name = name
        described = f"h-{name} e-{name}" + (f" d-{name}" if derived else "")
        self.label = ascii_html(
            f'<label for="f-{name}">{esc(f.label)} <span class="unit">({esc(f.unit)})</span></label>\n'
        )
        extra = f'maxlength="{f.maximum}"' if f.kind == "text" else 'inputmode="decimal" spellcheck="false"'
        if name == "capacity_bytes":
            extra += ' list="devices"'
        self.input_open = f'<input id="f-{name}" name="{name}" value="'
        self.input_close = f'" autocomplete="off" {extra} aria-describedby="{described}"'
        help_text = esc(f"{f.help} Allowed: {allowed_text(f)}.")
        self.help = ascii_html(f'<small class="help" id="h-{name}">{help_text}</small>\n')
        self.select: dict[str, str] | None = None
        self.select_none = ""
        values = [str(c) for c in f.choices] if f.choices else list(f.options or ())
        if values:
            head = f'<select id="f-{name}" name="{name}" aria-describedby="{described}">\n'

            def options(selected: str | None) -> str:
                default = ""
                if derived:
                    default = f'<option value=""{" selected" if selected == "" else ""}>default</option>\n'
                body = "".join(
                    f'<option value="{esc(v)}"{" selected" if v == selected else ""}>{esc(v)}</option>\n'
                    for v in values
                )
                return f"{head}{default}{body}</select>\n"

            self.select = {v: options(v) for v in ("", *values)}
            self.select_none = options(None)  # a typed value that is none of the options

    def render(self, ff: FormField) -> str:
        value, error = ff.value, ff.error
        if error is not None:
            control = f'{self.input_open}{esc(value)}{self.input_close} aria-invalid="true">\n'
            return (
                f'<div class="field invalid">\n{self.label}{control}{self._derived(ff)}{self.help}'
                f"{error_slot(self.name, error)}\n</div>\n"
            )
        if self.name == "model":
            control = _model_select(value)
        elif self.select is not None:
            control = self.select.get(value) or self.select_none
        else:
            control = f"{self.input_open}{esc(value)}{self.input_close}>\n"
        return (
            f'<div class="field">\n{self.label}{control}{self._derived(ff)}{self.help}'
            f"{EMPTY_SLOTS[self.name]}\n</div>\n"
        )

    def _derived(self, ff: FormField) -> str:
        return "" if ff.derived is None else derived_slot(self.name, ff.derived) + "\n"


_MODEL_HEAD = (
    '<select id="f-model" name="model" aria-describedby="h-model e-model">\n'
    '<option value="">&mdash; none: type the parameter count below &mdash;</option>\n'
)
_MODEL_OPTIONS = [
    (m.id, ascii_html(f'<option value="{esc(m.id)}">{esc(m.title)}</option>\n'),
     ascii_html(f'<option value="{esc(m.id)}" selected>{esc(m.title)}</option>\n'))
    for m in KNOWN_MODELS
]  # fmt: skip


def _model_select(value: str) -> str:
    options = "".join(selected if mid == value else plain for mid, plain, selected in _MODEL_OPTIONS)
    pasted = f'<option value="{esc(value)}" selected>pasted config.json</option>\n' if value.startswith("cfg:") else ""
    return f"{_MODEL_HEAD}{options}{pasted}</select>\n"


_PARTS = {f.name: _FieldParts(f, f.name in DERIVED) for f in FIELDS}


_GROUP_HEADS = {
    gid: ascii_html(f'<fieldset class="group" id="group-{gid}">\n<legend>{esc(title)}</legend>\n')
    for gid, title in GROUPS
}


def scenario_form(fields: Sequence[FormField]) -> str:
    out = [PRESETS_BLOCK, FORM_OPEN]
    by_group: dict[str, list[FormField]] = {gid: [] for gid, _ in GROUPS}
    for ff in fields:
        by_group[ff.field.group].append(ff)
    for gid, _ in GROUPS:
        out.append(_GROUP_HEADS[gid])
        out.extend(_PARTS[ff.field.name].render(ff) for ff in by_group[gid])
        out.append("</fieldset>\n")
    out.append(DATALIST)
    out.append(FORM_CLOSE)
    return "".join(out)


def paste_form(query: str, paste_error: str | None, pasted_config: str) -> str:
    """The "use a config.json" form: it posts the config and the current scenario (``keep``)."""
    error = f'<span role="alert">config: {esc(paste_error)}</span>' if paste_error else ""
    return (
        f'<details class="paste"{" open" if paste_error else ""}>\n'
        "<summary>Use a model's config.json</summary>\n"
        '<form method="post" action="/model">\n'
        '<label for="config">Paste a Hugging Face <code>config.json</code> (llama, mistral, mixtral, qwen2, gpt2,'
        " gpt_neox), or pick the file:</label>\n"
        '<input type="file" id="config-file" accept=".json,application/json" data-fills="#config">\n'
        '<textarea id="config" name="config" rows="6" spellcheck="false" aria-describedby="config-error">'
        f"{esc(pasted_config)}</textarea>\n"
        f'<input type="hidden" id="keep" name="keep" value="{esc(query)}">\n'
        f'<div class="field-error" id="config-error">{error}</div>\n'
        '<button type="submit">Use this config</button>\n'
        "</form>\n"
        "</details>\n"
    )
