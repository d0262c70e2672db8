"""How plan models report cross-field problems at the field they concern.

A model validator that finds, say, ``dr_value == primary_value`` should point
the operator at ``dns.dr_value``, not at ``dns``; and it should report every
such problem, not the first. :func:`raise_rules` raises a ``ValidationError``
whose errors carry locations relative to the model, which pydantic prefixes
with the model's own location. :func:`unique_by` checks list items for
duplicate keys even when some items failed validation, so the operator
sees both kinds of problem in one run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import InitErrorDetails, PydanticCustomError

from drills.plan.refs import safe_repr
from drills.text import for_terminal

Loc = tuple[str | int, ...]
Rule = tuple[Loc, str]


def rule_error(message: str) -> PydanticCustomError:
    return PydanticCustomError("plan_rule", "{message}", {"message": message})


def raise_rules(title: str, rules: Sequence[Rule]) -> None:
    """Raise every ``(relative location, message)`` in ``rules`` as one ValidationError."""
    if rules:
        details = [
            InitErrorDetails(type=rule_error(msg), loc=loc, input=None) for loc, msg in rules
        ]
        raise ValidationError.from_exception_data(title, details)


def _redetail(error: Any) -> InitErrorDetails:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind.startswith("plan_"):
        # Our own error types are unknown to pydantic-core; rebuild them as custom errors.
        return InitErrorDetails(
            type=PydanticCustomError(kind, "{message}", {"message": error["msg"]}),
            loc=error["loc"],
            input=error["input"],
        )
    return InitErrorDetails(type=kind, loc=error["loc"], input=error["input"], ctx=ctx)


def _shown_part(part: str) -> str:
    """One part of a duplicate item's key, for the message: as written when short and
    harmless, else a placeholder (a credential pasted into `namespace` is not echoed)."""
    if safe_repr(part) != repr(part):
        return "(a value that is not shown)"
    return for_terminal(part)


def unique_by(
    what: str, key: Callable[[Any], tuple[str, ...] | None], field: str, listed_in: str
) -> WrapValidator:
    """Validate a list, then report items whose ``key`` repeats an earlier item's.

    ``key`` reads the raw item (a mapping from YAML, or a model) and returns None
    when the item is too malformed to have a key. The problem is placed on the
    item's ``field``; ``listed_in`` names the list for the message.
    """

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        errors: list[InitErrorDetails] = []
        result = None
        try:
            result = handler(value)
        except ValidationError as exc:
            errors = [_redetail(e) for e in exc.errors(include_url=False)]
        if isinstance(value, list | tuple):
            seen: dict[tuple[str, ...], int] = {}
            for index, item in enumerate(value):
                item_key = key(item)
                if item_key is None:
                    continue
                if item_key in seen:
                    shown = "/".join(_shown_part(part) for part in item_key)
                    first = f"{listed_in}[{seen[item_key]}]"
                    message = f"duplicate {what} `{shown}` (already listed as {first})"
                    errors.append(
                        InitErrorDetails(type=rule_error(message), loc=(index, field), input=None)
                    )
                else:
                    seen[item_key] = index
        if errors:
            raise ValidationError.from_exception_data(what, errors)
        return result

    return WrapValidator(validate)


def key_of(*names: str) -> Callable[[Any], tuple[str, ...] | None]:
    """A ``key`` for :func:`unique_by`: the item's string fields ``names``, in order."""

    def read(item: Any) -> tuple[str, ...] | None:
        values = []
        for name in names:
            value = item.get(name) if isinstance(item, dict) else getattr(item, name, None)
            if not isinstance(value, str):
                return None
            values.append(value)
        return tuple(values)

    return read
