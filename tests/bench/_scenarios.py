"""The benchmarks' scenarios.

``random_query``: a random scenario as a query string (the same kind ``scenarios.lua`` sends), a
different one per request, so no cache keyed on the scenario can answer for the work.

``form_state`` and ``edit``: what a workshop attendee sends. ``form_state`` reads the scenario
form's fields and values from the page as served (as a browser would); ``edit`` changes one field
the way a person at the page would (a power of two for ``dp``, a model preset, a recomputation
policy, a micro-batch, a device capacity …), keeping the scenario valid, and the htmx request
then carries the whole form, as ``hx-get`` on the form does.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable
from html.parser import HTMLParser


def random_query(rng: random.Random) -> str:
    params = rng.randint(1, 200_000) * 1_000_000
    return (
        f"params={params}&dp={rng.randint(1, 4096)}&param_bytes={rng.choice((1, 2, 4))}"
        f"&master_bytes={rng.choice((0, 4, 8))}&opt_states={rng.randint(0, 4)}&unit_params={rng.randint(0, params)}"
        f"&prefetch={rng.randint(0, 8)}&activation_bytes={rng.randint(0, 60)}GB"
        f"&capacity_bytes={rng.randint(16, 192)}GiB&contingency_pct={rng.randint(0, 20)}"
    )


class _FormReader(HTMLParser):
    """The named controls of ``<form id="scenario">`` and their current values, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.fields: dict[str, str] = {}
        self._in_form = False
        self._select: str | None = None
        self._first_option: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._in_form = a.get("id") == "scenario"
        elif not self._in_form:
            return
        elif tag == "input" and a.get("name") and a.get("type", "text") not in ("submit", "button", "reset"):
            self.fields[a["name"]] = a.get("value", "")
        elif tag == "select" and a.get("name"):
            self._select, self._first_option = a["name"], None
        elif tag == "option" and self._select is not None:
            value = a.get("value", "")
            if self._first_option is None:
                self._first_option = value
                self.fields[self._select] = value
            if "selected" in a:
                self.fields[self._select] = value

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False
        elif tag == "select":
            self._select = None


_SCENARIO_FORM = re.compile(r'<form\b[^>]*\bid="scenario".*?</form>', re.DOTALL)


def form_state(page_html: str) -> dict[str, str]:
    """The scenario form's fields as the page shows them (what htmx would serialise)."""
    found = _SCENARIO_FORM.search(page_html)
    if found is None:
        raise ValueError("no scenario form (<form id=scenario>) in the page")
    return dict(_read_form(found.group()))


@functools.lru_cache(maxsize=16)
def _read_form(form_html: str) -> tuple[tuple[str, str], ...]:
    # Cached: 200 attendees load the same page, and parsing it costs the load generator milliseconds.
    reader = _FormReader()
    reader.feed(form_html)
    reader.close()
    if "dp" not in reader.fields:
        raise ValueError("the scenario form has no dp field")
    return tuple(reader.fields.items())


# Controls of the form that are not scenario fields (the page takes them along; /api/estimate refuses them).
NOT_SCENARIO = frozenset({"preset", "present"})
MODELS = ("", "llama-2-7b", "llama-2-13b", "llama-2-70b", "mistral-7b-v0.1", "mixtral-8x7b-v0.1", "qwen2-7b",
          "gpt2", "gpt-neox-20b")  # fmt: skip
SHORT_CONTEXT = {"gpt2": ("256", "512", "1024")}  # learned positions: seq_len ≤ 1,024
SEQ_LENS = ("1024", "2048", "4.096K", "8192")
CAPACITIES = ("24GB", "40GB", "80GB", "80GiB", "141GB", "192GB")


def _model(rng: random.Random, form: dict[str, str]) -> None:
    form["model"] = rng.choice(MODELS)
    if form["model"] in SHORT_CONTEXT:  # as a person would after the inline error, in one go
        form["seq_len"] = rng.choice(SHORT_CONTEXT[form["model"]])


def _seq_len(rng: random.Random, form: dict[str, str]) -> None:
    form["seq_len"] = rng.choice(SHORT_CONTEXT.get(form.get("model", ""), SEQ_LENS))


# field edited → how, with how often an attendee touches it (weights)
EDITS: dict[str, tuple[int, Callable[[random.Random, dict[str, str]], None]]] = {
    "dp": (5, lambda rng, f: f.__setitem__("dp", str(2 ** rng.randint(0, 12)))),
    "model": (3, _model),
    "act_policy": (2, lambda rng, f: f.__setitem__("act_policy", rng.choice(("none", "selective", "full")))),
    "micro_batch": (2, lambda rng, f: f.__setitem__("micro_batch", rng.choice(("1", "2", "4", "8", "16")))),
    "capacity_bytes": (2, lambda rng, f: f.__setitem__("capacity_bytes", rng.choice(CAPACITIES))),
    "seq_len": (1, _seq_len),
    "params": (1, lambda rng, f: f.__setitem__("params", rng.choice(("", "1.3B", "7B", "13B", "70B", "175B")))),
    "tp": (1, lambda rng, f: f.__setitem__("tp", rng.choice(("1", "2", "4")))),
    "master_bytes": (1, lambda rng, f: f.__setitem__("master_bytes", rng.choice(("0", "4", "8")))),
    "opt_states": (1, lambda rng, f: f.__setitem__("opt_states", rng.choice(("0", "1", "2")))),
    "prefetch": (1, lambda rng, f: f.__setitem__("prefetch", str(rng.randint(0, 4)))),
    "contingency_pct": (1, lambda rng, f: f.__setitem__("contingency_pct", rng.choice(("0", "5", "10", "20")))),
}
_NAMES = tuple(EDITS)
_WEIGHTS = tuple(w for w, _ in EDITS.values())


def edit(rng: random.Random, form: dict[str, str]) -> str:
    """Change one field of ``form`` in place, as an attendee would; the field's name.

    ``params`` applies only without a model (a model sets it), so it is edited only then.
    """
    while True:
        name = rng.choices(_NAMES, _WEIGHTS)[0]
        if name == "params" and form.get("model"):
            continue
        EDITS[name][1](rng, form)
        return name
