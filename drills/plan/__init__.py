"""Drill plans: the typed models, the YAML loader with positions, and credential references.

``load_plan(path)`` is the way in; everything a caller needs is importable from here: the
models (``drills.plan.models``, whose names this repeats), the loader's functions and
``SecretRef``.
"""

from typing import TYPE_CHECKING

from drills.faces import lazy_face
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

if TYPE_CHECKING:
    from drills.plan.claims import cluster_of, shared_claims
    from drills.plan.cron import next_fire_times
    from drills.plan.describe import describe_site
    from drills.plan.discovery import default_plan_patterns, plan_paths
    from drills.plan.durations import parse_duration
    from drills.plan.kubeconfig import KubeconfigError, load_kubeconfig
    from drills.plan.only import UnknownApplicationError, only_applications
    from drills.plan.refs import resolve_secret
    from drills.plan.urls import check_http_url

__all__ += [
    "KubeconfigError",
    "UnknownApplicationError",
    "check_http_url",
    "cluster_of",
    "default_plan_patterns",
    "describe_site",
    "load_kubeconfig",
    "next_fire_times",
    "only_applications",
    "parse_duration",
    "plan_paths",
    "resolve_secret",
    "shared_claims",
]

# The rest of the face: each name imported from its module when first asked for.
__getattr__ = lazy_face(
    __name__,
    {
        "claims": ["cluster_of", "shared_claims"],
        "cron": ["next_fire_times"],
        "describe": ["describe_site"],
        "discovery": ["default_plan_patterns", "plan_paths"],
        "durations": ["parse_duration"],
        "kubeconfig": ["KubeconfigError", "load_kubeconfig"],
        "only": ["UnknownApplicationError", "only_applications"],
        "refs": ["resolve_secret"],
        "urls": ["check_http_url"],
    },
)
