"""The core's formula strings split for the CSV: the arithmetic for the ``formula`` column, the words
around it (remarks, citations, trailing prose) for ``detail``.

Read back out of the text with regular expressions until the core hands its formulas over as
structured values (arithmetic and remark apart; issue 25, item 3).
"""

from __future__ import annotations

import re

# Words inside a formula that are not the formula: a parenthesised remark that starts with a
# letter, has a blank and no arithmetic ("(one unit at a time)", "(attention core recomputed)",
# "(Korthikanti et al. 2022, Table 2)"; not "(Ψ_g + Ψ_p = …)" nor "(checkpoint)"), and a run of
# two or more words ending a line ("… t=4 with sequence parallelism"; not the unit in "= 14 B").
_REMARK = re.compile(r"\s*\(([^\W\d_][^()=+×÷−⌈⌉·]*\s[^()=+×÷−⌈⌉·]*)\)")
_TRAILING_WORDS = re.compile(r"\s+([^\W\d_]+(?:\s[^\W\d_]+)+)$")
_NAME = re.compile(r"[^\W\d_]+(?: [^\W\d_]+)*")  # a line's name: "per layer", "working set", "logits"


def split_formula(text: str) -> tuple[str, tuple[str, ...]]:
    """The core's formula text as (the arithmetic, the words around it), for the two columns.

    A text without ``=`` is no equation ("stages 0–2 hold full parameters: nothing to gather",
    "20,000,000,000 B, not divided by D"): all of it is a remark and the formula is empty.
    Otherwise every line keeps its arithmetic and gives up its parenthesised remarks and a
    trailing run of words; a remark on a named line carries the name ("per layer: attention core
    recomputed"), a continuation line (one starting with ``=``) counting as the line above.
    """
    if "=" not in text:
        return "", (text,) if text else ()
    remarks: list[str] = []
    lines = []
    name = ""
    for line in text.split("\n"):
        found = [m.group(1).strip() for m in _REMARK.finditer(line)] if "(" in line else []
        if found:
            line = _REMARK.sub("", line)
        last_two = line.rsplit(None, 2)[-2:]
        trailing = _TRAILING_WORDS.search(line) if all(word.isalpha() for word in last_two) else None
        if trailing is not None:
            found.append(trailing.group(1))
            line = line[: trailing.start()]
        head = line.partition("=")[0].strip()
        if head or not line.lstrip().startswith("="):
            name = head if _NAME.fullmatch(head) else ""
        remarks.extend(f"{name}: {remark}" if name else remark for remark in found)
        lines.append(line)
    return "\n".join(lines), tuple(dict.fromkeys(remarks))
