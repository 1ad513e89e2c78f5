"""The error answers every route documents, beside its 200."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    loc: list[str | int]
    msg: str
    type: str
    field: str | None = None
    allowed: str | None = None


class ErrorBody(BaseModel):
    detail: list[ErrorDetail]


class Unreadable(BaseModel):
    detail: str


LIMITS: dict[int | str, dict[str, Any]] = {
    413: {"model": ErrorBody, "description": "The request body is larger than 64 KiB"},
    414: {"model": ErrorBody, "description": "The query string is longer than 2,048 characters"},
}
ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": "A bad field, named in `loc` and `field`, with the allowed range"},
    **LIMITS,
}
# A body FastAPI cannot even decode (not UTF-8, or JSON nested past the parser's depth) is its 400.
BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": Unreadable, "description": "The body could not be read (not UTF-8, or nested too deeply)"},
    **ERRORS,
}
