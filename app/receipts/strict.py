"""The base of every answer model: extra keys forbidden, and the annotated integers they share.

A field added to an answer without being declared on its model fails validation (and the tests)
instead of silently leaving ``/openapi.json`` behind.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Bytes = Annotated[int, Field(ge=0, description="bytes, an exact integer")]
SignedBytes = Annotated[int, Field(description="bytes, an exact integer; negative when over capacity")]
Count = Annotated[int, Field(ge=0)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
