"""The base of every plan model: frozen, strict about unknown keys, and never showing input."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

StrictInt = Annotated[int, Field(strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]


class PlanModel(BaseModel):
    # hide_input_in_errors: a ValidationError printed by anyone must not show a
    # credential that was (wrongly) written inline.
    # use_attribute_docstrings: a field's docstring is its description in the JSON Schema,
    # the reference and an editor's hover (the docstring is the one source of that text).
    model_config = ConfigDict(
        frozen=True, extra="forbid", hide_input_in_errors=True, use_attribute_docstrings=True
    )
