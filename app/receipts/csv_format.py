"""CSV as the receipts write it: text cells made inert in a spreadsheet, integers left as numbers, a UTF-8 byte order
mark for Excel, one record at a time for streaming; and read back.

Text cells that a spreadsheet would run as a formula are neutralised (OWASP CSV injection guidance), lookalikes of
``=``, ``+``, ``-`` and ``@`` (full-width ``＝``, …) and a lead behind blanks included. The download starts with a
UTF-8 byte order mark (:data:`BOM`): without it Excel reads the file in the system's code page and garbles × ÷ ⌈ ⌉;
:func:`read_csv` reads a receipt back with or without.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Literal

_DANGEROUS_LEAD = ("=", "+", "-", "@", "\t", "\r")
# U+2212 MINUS SIGN is not a compatibility form of "-", but some spreadsheet locales read it as
# a minus on input; quoting a text cell that starts with it costs nothing.
_FORMULA_START = (*_DANGEROUS_LEAD, "\u2212")

BOM = "\ufeff"  # U+FEFF, three bytes EF BB BF in UTF-8: how Excel knows the file is UTF-8

Cell = int | str | Decimal  # Decimal: a figure in GB or GiB (app.receipts.display.in_units)
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


def read_csv(data: str | bytes) -> list[dict[str, str]]:
    """A CSV receipt's rows keyed by column, from its text or its bytes, with or without the BOM."""
    text = data.decode("utf-8-sig") if isinstance(data, bytes) else data.removeprefix(BOM)
    return list(csv.DictReader(io.StringIO(text, newline="")))


def csv_records(columns: Sequence[str], records: Iterable[Row], *, bom: bool = False) -> Iterator[str]:
    """CSV text one record at a time (for streaming): text cells neutralised, integers left as
    numbers; with ``bom``, the first record starts with :data:`BOM` (a download, a CSV file)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\r\n")

    def written() -> str:
        """What the writer has just written, leaving the buffer empty for the next record."""
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    writer.writeheader()
    yield (BOM if bom else "") + written()
    for row in records:
        writer.writerow({k: neutralise(v) if isinstance(v, str) else v for k, v in row.items()})
        yield written()
