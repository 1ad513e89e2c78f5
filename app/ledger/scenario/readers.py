"""Reading a raw scenario value: exact integers, sizes, text and choices, one reader per kind of field.

A string (a URL, a form, a CLI flag) is read by the exact size parsers of :mod:`app.ledger.scenario.sizes`
(``7B``, ``80GiB``, ``7,000,000,000``); a JSON number passes when it is an exact integer (a whole float
such as ``8.0`` or ``7e9`` becomes that int); true/false, fractions and anything else are refused,
never rounded. The ``Annotated`` aliases below pair each reader with its ``x-kind``; the bounds are each
field's own (:mod:`app.ledger.scenario.declared`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from app.ledger.bounds import (
    ActPolicy,
    ActWidth,
    BaseQuantKind,
    BuffersKind,
    GqaKind,
    GradSync,
    LoadPath,
    LogitsWidth,
    LossPlace,
    NormsImpl,
    OptimizerImpl,
    ReserveSource,
    SavePath,
    TrainingStack,
    Wrapping,
)
from app.ledger.models.trains import targets_of
from app.ledger.scenario.sizes import SizeError, parse_bytes, parse_count, parse_plain

Kind = Literal["count", "bytes", "int", "text", "choice"]

# "Printable" for a scenario name, stated as one character class so that the parser and the
# OpenAPI schema enforce the same rule: no C0/C1 controls or DEL, no soft hyphen, no zero-width
# or bidirectional controls, no line/paragraph separators, no BOM, no surrogates, no private use,
# no noncharacters.
NAME_FORBIDDEN = (
    "\\u0000-\\u001f\\u007f-\\u009f\\u00ad\\u061c\\u180e\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f"
    "\\ud800-\\udfff\\ue000-\\uf8ff\\ufdd0-\\ufdef\\ufeff\\ufff0-\\uffff"
)
NAME_PATTERN = f"^[^{NAME_FORBIDDEN}]*$"
# The choices only the scenario reads (those the model layer reads too live in app/ledger/bounds.py).
PipelineStage = Literal["first", "last"]
OffloadDevice = Literal["none", "cpu", "nvme"]


def _refuse(kind: str, reason: str) -> PydanticCustomError:
    # The reason goes in the context, not the template: it may quote user text with braces.
    return PydanticCustomError(kind, "{reason}", {"reason": reason})


def _exact_int(parse: Callable[[str], int]) -> Callable[[object], int | None]:
    """A reader for one kind of integer field: strings through ``parse``, JSON numbers exactly."""

    def read(raw: object) -> int | None:
        if raw is None or (isinstance(raw, int) and not isinstance(raw, bool)):
            return raw
        if isinstance(raw, str):
            try:
                return parse(raw)
            except SizeError as exc:
                raise _refuse("exact_integer", str(exc)) from None
        if isinstance(raw, bool):  # True == 1 in Python; a JSON true must never become dp = 1
            raise _refuse("exact_integer", "must be a number, not true/false")
        if isinstance(raw, float):
            # JSON has one number type: 7e9 and 0.0 are integers there. Only whole values pass,
            # converted exactly (every bound is below 2^53); the ledger never sees the float.
            if not raw.is_integer():
                raise _refuse("exact_integer", f"{raw!r} is not a whole number")
            return int(raw)
        raise _refuse("exact_integer", f"must be an integer or a size string, not {type(raw).__name__}")

    return read


def _read_text(raw: object) -> str | None:
    """Text, trimmed; its length and characters are checked by the field's ``max_length`` and ``pattern``."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise _refuse("text_type", "must be text")
    return raw.strip()


def _canonical_names(text: str | None) -> str | None:
    """Module names with commas, once the pattern has passed them, as one canonical text: each name trimmed, empty
    ones and repeats dropped (``"q_proj, v_proj,"`` → ``"q_proj,v_proj"``; only commas → empty)."""
    return ",".join(targets_of(text)) if text is not None else None


def _read_choice(raw: object) -> object:
    """A choice, trimmed; which values are allowed is the field's ``Literal``."""
    return raw.strip() if isinstance(raw, str) else raw


read_count = _exact_int(parse_count)
read_bytes = _exact_int(parse_bytes)
read_plain = _exact_int(parse_plain)

# The reader each kind of field uses: ``app.ledger.scenario.fields`` checks every field against it.
READERS: dict[Kind, Callable[..., object]] = {
    "count": read_count,
    "bytes": read_bytes,
    "int": read_plain,
    "text": _read_text,
    "choice": _read_choice,
}


def _kind(kind: Kind) -> Any:
    return Field(json_schema_extra={"x-kind": kind})


# One alias per way of reading; the bounds are each field's own (``Field(ge=…, le=…)``).
Count = Annotated[int | None, BeforeValidator(read_count), _kind("count")]
Bytes = Annotated[int | None, BeforeValidator(read_bytes), _kind("bytes")]
Plain = Annotated[int | None, BeforeValidator(read_plain), _kind("int")]
Text = Annotated[str | None, BeforeValidator(_read_text), _kind("text")]
Names = Annotated[str | None, BeforeValidator(_read_text), AfterValidator(_canonical_names), _kind("text")]
# Supported widths and flags: anything else (3, 16, …) is refused, never rounded.
W124 = Annotated[Literal[1, 2, 4] | None, BeforeValidator(read_plain), _kind("int")]
W24 = Annotated[Literal[2, 4] | None, BeforeValidator(read_plain), _kind("int")]
# The activation model's widths: the model layer checks the same choices (app/ledger/bounds.py).
ActW = Annotated[ActWidth | None, BeforeValidator(read_plain), _kind("int")]
LogitsW = Annotated[LogitsWidth | None, BeforeValidator(read_plain), _kind("int")]
W048 = Annotated[Literal[0, 4, 8] | None, BeforeValidator(read_plain), _kind("int")]
W1248 = Annotated[Literal[1, 2, 4, 8] | None, BeforeValidator(read_plain), _kind("int")]
Flag = Annotated[Literal[0, 1] | None, BeforeValidator(read_plain), _kind("int")]
StageRun = Annotated[Literal[0, 1, 2, 3] | None, BeforeValidator(read_plain), _kind("int")]
Policy = Annotated[ActPolicy | None, BeforeValidator(_read_choice), _kind("choice")]
Stack = Annotated[TrainingStack | None, BeforeValidator(_read_choice), _kind("choice")]
Loss = Annotated[LossPlace | None, BeforeValidator(_read_choice), _kind("choice")]
Wrap = Annotated[Wrapping | None, BeforeValidator(_read_choice), _kind("choice")]
Norms = Annotated[NormsImpl | None, BeforeValidator(_read_choice), _kind("choice")]
Buffers = Annotated[BuffersKind | None, BeforeValidator(_read_choice), _kind("choice")]
BaseQuant = Annotated[BaseQuantKind | None, BeforeValidator(_read_choice), _kind("choice")]
Source = Annotated[ReserveSource | None, BeforeValidator(_read_choice), _kind("choice")]
Gqa = Annotated[GqaKind | None, BeforeValidator(_read_choice), _kind("choice")]
Sync = Annotated[GradSync | None, BeforeValidator(_read_choice), _kind("choice")]
Save = Annotated[SavePath | None, BeforeValidator(_read_choice), _kind("choice")]
Load = Annotated[LoadPath | None, BeforeValidator(_read_choice), _kind("choice")]
OptimizerKind = Annotated[OptimizerImpl | None, BeforeValidator(_read_choice), _kind("choice")]
Offload = Annotated[OffloadDevice | None, BeforeValidator(_read_choice), _kind("choice")]
PpStage = Annotated[PipelineStage | None, BeforeValidator(_read_choice), _kind("choice")]
