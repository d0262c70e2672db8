"""Drill plans: the typed models, the YAML loader with positions, and credential references.

``load_plan(path)`` is the way in; everything a caller needs is importable from here: the
models (``drills.plan.models``, whose names this repeats), the loader's functions and
``SecretRef``.
"""

from drills.plan import models
from drills.plan.loader import (
    load_plan,
    plan_digest,
    plan_from_text,
    plan_schema,
    plan_schema_text,
    plan_warnings,
)
from drills.plan.models import *  # noqa: F403
from drills.plan.refs import SecretRef

__all__ = [
    "SecretRef",
    "load_plan",
    "plan_digest",
    "plan_from_text",
    "plan_schema",
    "plan_schema_text",
    "plan_warnings",
]
__all__ += models.__all__
