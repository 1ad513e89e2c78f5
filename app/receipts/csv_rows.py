"""The CSV receipt, produced row by row.

One row per (stage, ledger, category) with the columns ``stage,ledger,category,bytes`` and
more; the scenario's inputs are rows too (ledger ``input``), so the CSV alone reconstructs
the receipt. Text cells that a spreadsheet would run as a formula are neutralised (OWASP CSV
injection guidance), lookalikes of ``=``, ``+``, ``-`` and ``@`` (full-width ``＝``, …) and a
lead behind blanks included; integers stay numbers.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

from app.ledger.arithmetic import share_bp
from app.ledger.estimate import Estimate
from app.ledger.fields import FIELDS
from app.receipts.receipt import activations_section, fsdp2_section, model_section

COLUMNS: tuple[str, ...] = (
    "stage",
    "ledger",
    "category",
    "bytes",
    "value",
    "width",
    "copies",
    "owners",
    "elements",
    "share_bp",
    "formula",
    "detail",
)
_DANGEROUS_LEAD = ("=", "+", "-", "@", "\t", "\r")
# U+2212 MINUS SIGN is not a compatibility form of "-", but some spreadsheet locales read it as
# a minus on input; quoting a text cell that starts with it costs nothing.
_FORMULA_START = (*_DANGEROUS_LEAD, "\u2212")

Cell = int | str
Row = dict[str, Cell]


def _lead(char: str) -> Literal["formula", "skip", "text"]:
    """What one character at the start of a cell means to a spreadsheet."""
    if char in _DANGEROUS_LEAD:  # tab and CR before the blank test: they are blanks too
        return "formula"
    # Blanks (some importers trim a space before "=") and invisible format characters
    # (zero-width space, BOM) may be passed over. So is the quote, so that a text already
    # starting with "'=" is quoted again and restore() removes exactly the quote we added.
    if char == "'" or char.isspace() or unicodedata.category(char) == "Cf":
        return "skip"
    # NFKC folds the lookalikes onto the ASCII characters: full-width ＝＋－＠ (which spreadsheets
    # with an East Asian input method accept as formula starts), the small forms ﹦﹢﹣﹫, the
    # superscripts ⁼⁺⁻ and the like.
    return "formula" if unicodedata.normalize("NFKC", char).startswith(_FORMULA_START) else "text"


def _starts_a_formula(text: str) -> bool:
    for char in text:
        lead = _lead(char)
        if lead != "skip":
            return lead == "formula"
    return False


def neutralise(text: str) -> str:
    """Make a text cell inert in a spreadsheet: prefix ``'`` when it could start a formula."""
    if _starts_a_formula(text):
        return "'" + text
    return text


def restore(text: str) -> str:
    """Undo :func:`neutralise` (for reading a receipt back).

    Exact because a leading quote does not change the verdict: ``_starts_a_formula("'" + t)``
    equals ``_starts_a_formula(t)``, so only a cell that :func:`neutralise` quoted is unquoted.
    """
    if text.startswith("'") and _starts_a_formula(text[1:]):
        return text[1:]
    return text


def scenario_inputs(csv_rows: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The scenario's inputs from a CSV receipt's ``input`` rows, ready for ``parse_scenario``."""
    return {row["category"]: restore(row["value"]) for row in csv_rows if row.get("ledger") == "input"}


def rows(e: Estimate) -> Iterator[Row]:
    """Every CSV row of the receipt, in order, as dicts keyed by :data:`COLUMNS`."""
    s = e.scenario
    for field in FIELDS:
        value = getattr(s, field.name)
        yield {
            "ledger": "input",
            "category": field.name,
            "value": value,
            "bytes": value if field.kind == "bytes" else "",
            "detail": field.unit,
        }
    for st in e.ledger.stages:
        for line in st.lines:
            yield {
                "stage": st.stage,
                "ledger": "persistent",
                "category": line.tensor_class,
                "bytes": line.bytes,
                "width": line.width,
                "copies": line.copies,
                "owners": line.owners,
                "elements": line.elements,
                "share_bp": share_bp(line.bytes, st.persistent),
                "formula": line.formula,
                "detail": line.evidence,
            }
        yield {"stage": st.stage, "ledger": "persistent", "category": "total", "bytes": st.persistent}
        p = st.peak
        yield {"stage": st.stage, "ledger": "peak", "category": "persistent", "bytes": p.persistent}
        yield {
            "stage": st.stage,
            "ledger": "peak",
            "category": "gather",
            "bytes": p.gather,
            "formula": p.gather_formula,
        }
        yield {
            "stage": st.stage,
            "ledger": "peak",
            "category": "buckets",
            "bytes": p.buckets,
            "detail": "declared",
        }
        yield {
            "stage": st.stage,
            "ledger": "peak",
            "category": "activations",
            "bytes": p.activations,
            "formula": p.activations_formula,
            "detail": e.activation_source,
        }
        yield {
            "stage": st.stage,
            "ledger": "peak",
            "category": "overhead",
            "bytes": p.overhead,
            "detail": "declared",
        }
        yield {
            "stage": st.stage,
            "ledger": "peak",
            "category": "contingency",
            "bytes": p.contingency,
            "formula": p.contingency_formula,
        }
        yield {"stage": st.stage, "ledger": "peak", "category": "total", "bytes": p.total}
        yield {
            "stage": st.stage,
            "ledger": "fit",
            "category": "headroom",
            "bytes": p.headroom,
            "value": "fits" if p.fits else "does not fit",
        }
        yield {
            "stage": st.stage,
            "ledger": "communication",
            "category": "total",
            "bytes": st.communication.bytes,
            "formula": st.communication.formula,
            "detail": st.communication.collectives,
        }
    for c in e.checkpoint:
        yield {
            "ledger": "checkpoint",
            "category": f"{c.policy}.device",
            "bytes": c.device_bytes,
            "formula": c.device_formula,
        }
        yield {
            "ledger": "checkpoint",
            "category": f"{c.policy}.host",
            "bytes": c.host_bytes,
            "formula": c.host_formula,
            "detail": c.flag,
        }
        for stage, peak in enumerate(c.save_peaks):
            yield {"stage": stage, "ledger": "checkpoint", "category": f"{c.policy}.save_peak", "bytes": peak}
    yield from _model_rows(e)
    for fit in e.fit.stages:
        yield {"stage": fit.stage, "ledger": "fit_finder", "category": "smallest_dp", "value": _blank(fit.smallest_dp)}
        if e.fit.micro_batch_modelled:
            yield {"stage": fit.stage, "ledger": "fit_finder", "category": "largest_micro_batch",
                   "value": _blank(fit.largest_micro_batch)}  # fmt: skip
    for ledger_name, results in (("mutation", e.mutations), ("reference_mutation", e.reference_mutations)):
        for m in results:
            yield {
                "ledger": ledger_name,
                "category": m.id,
                "value": "killed" if m.killed else "survived",
                "formula": m.check,
                "detail": m.message,
            }


def _blank(value: int | None) -> int | str:
    return "" if value is None else value


def _model_rows(e: Estimate) -> Iterator[Row]:
    """The model's inventory, its activation ledger and the FSDP2 padding, when a model is named."""
    model, activations, fsdp2 = model_section(e), activations_section(e), fsdp2_section(e)
    if model is not None:
        yield {"ledger": "model", "category": "params", "value": model["params"], "detail": model["title"]}
        yield {"ledger": "model", "category": "largest_unit", "value": model["largest_unit"]["params"],
               "detail": model["largest_unit"]["name"]}  # fmt: skip
    if activations["source"] == "modelled":
        for key in ("per_layer_bytes", "working_set_bytes", "embedding_bytes", "head_bytes", "logits_bytes",
                    "total_bytes"):  # fmt: skip
            yield {"ledger": "activations", "category": key.removesuffix("_bytes"), "bytes": activations[key]}
        yield {"ledger": "activations", "category": "recompute_flops_fraction",
               "value": activations["recompute_flops_fraction"], "formula": activations["formula"]}  # fmt: skip
    if fsdp2 is not None:
        for cls, size in fsdp2["stage3_padded_bytes"].items():
            yield {"stage": 3, "ledger": "fsdp2", "category": cls, "bytes": size}
        yield {"stage": 3, "ledger": "fsdp2", "category": "padding", "bytes": fsdp2["padding_bytes"],
               "detail": fsdp2["note"]}  # fmt: skip


def csv_lines(e: Estimate) -> Iterator[str]:
    """The CSV text, one record at a time (for streaming responses)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\r\n")

    def written() -> str:
        """What the writer has just written, leaving the buffer empty for the next record."""
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    writer.writeheader()
    yield written()
    for row in rows(e):
        writer.writerow({k: neutralise(v) if isinstance(v, str) else v for k, v in row.items()})
        yield written()


def csv_text(e: Estimate) -> str:
    return "".join(csv_lines(e))
