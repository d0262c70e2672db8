"""Loading a drill plan: YAML in, a validated :class:`~drills.plan.models.DrillPlan` out, and
the plan's schema and digest.

``load_plan(path)`` reads YAML, validates it whole and raises a single
:class:`drills.errors.PlanError` listing every problem with its file, line,
column and field path. It raises nothing else, whatever the file holds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from drills.errors import PlanError, PlanProblem
from drills.plan.error_translation import CREDENTIAL_KEY_HINT, translate
from drills.plan.models import DrillPlan, PlanWarning
from drills.plan.refs import find_literal_credentials
from drills.plan.yamlfile import (
    Loc,
    YamlDocument,
    format_loc,
    nearest_position,
    parse_yaml,
    read_plan_text,
)
from drills.text import for_terminal

log = logging.getLogger("drills.plan")


# --- loading ------------------------------------------------------------------------


def load_plan(path: str | Path) -> DrillPlan:
    """Load and validate a plan file. Raises only :class:`PlanError`."""
    source = str(path)
    try:
        file = Path(path)
        text, problems = read_plan_text(file, source)
        if text is None:
            raise _plan_error(problems)
        return _validate(text, source, file.resolve().parent)
    except PlanError:
        raise
    except (RecursionError, MemoryError, ValueError, OSError) as exc:
        raise _plan_error([_unexpected(source, exc)]) from None


def plan_from_text(text: str, source: str = "<plan>") -> DrillPlan:
    """Validate plan YAML given as text; relative paths resolve against the working directory."""
    try:
        return _validate(text, source, None)
    except PlanError:
        raise
    except (RecursionError, MemoryError, ValueError) as exc:
        raise _plan_error([_unexpected(source, exc)]) from None


def _unexpected(source: str, exc: BaseException) -> PlanProblem:
    # Not expected to happen; the type is enough to report, and the text might quote input.
    log.warning("plan %s could not be checked: %s", for_terminal(source), type(exc).__name__)
    return PlanProblem(
        source, None, None, "", f"the plan could not be checked ({type(exc).__name__})"
    )


def _plan_error(problems: list[PlanProblem]) -> PlanError:
    """The PlanError for ``problems``, each made safe to print: whatever the plan held
    (an ESC sequence in a key, say) shows as a visible escape."""
    return PlanError(
        [
            dataclasses.replace(
                p,
                file=for_terminal(p.file),
                path=for_terminal(p.path),
                message=for_terminal(p.message),
            )
            for p in problems
        ]
    )


def _validate(text: str, source: str, source_dir: Path | None) -> DrillPlan:
    doc = parse_yaml(text, source)
    if doc.data is None:
        raise _plan_error(doc.problems or [doc.problem(None, (), "the plan file is empty")])
    if not isinstance(doc.data, dict):
        kind = "a list" if isinstance(doc.data, list) else "a single value"
        message = f"the plan must be a mapping of fields (name, sites, workloads, ...), not {kind}"
        raise _plan_error([*doc.problems, doc.problem(doc.values.get(()), (), message)])
    # Duplicate keys and unreadable values do not stop validation: the operator gets
    # every problem in one run. A field the YAML layer already reported is not reported twice.
    problems = list(doc.problems)
    plan = None
    try:
        plan = DrillPlan.model_validate(doc.data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=True)
        reported = {p.path for p in doc.problems}
        problems += [p for p in translate(errors, doc, DrillPlan) if p.path not in reported]
    problems = _merge_credential_problems(doc, doc.data, problems)
    if plan is not None and not problems:
        # What the models hold, after every conversion, is what gets stored and printed:
        # scan that too, not only what the YAML said.
        problems = _merge_credential_problems(doc, plan.model_dump(mode="json"), problems)
        problems += _same_cluster_problems(doc, plan, source_dir or Path.cwd())
    if problems or plan is None:
        raise _plan_error(_in_file_order(problems))
    plan._source_dir = source_dir
    plan._source = source
    plan._positions = doc.values
    return plan


def _merge_credential_problems(
    doc: YamlDocument, data: Any, problems: list[PlanProblem]
) -> list[PlanProblem]:
    """Add literal-credential findings; each replaces pydantic's problem for the same field."""
    found = {
        format_loc(loc): (loc, msg, at_key) for loc, msg, at_key in find_literal_credentials(data)
    }
    unknown: dict[str, str] = {}
    merged: list[PlanProblem] = []
    for problem in problems:
        if problem.path not in found:
            merged.append(problem)
        elif problem.message.startswith("unknown field"):
            unknown[problem.path] = problem.message
    for path, (loc, message, at_key) in found.items():
        if path in unknown and not at_key:
            # A credential-named key's message already says where credentials go.
            said = CREDENTIAL_KEY_HINT in unknown[path]
            message = f"{unknown[path]}; its value {message.split(';')[0] if said else message}"
        at = doc.keys.get(loc) if at_key else nearest_position(doc.values, loc)
        merged.append(doc.problem(at, loc, message))
    return list(dict.fromkeys(merged))


def _same_cluster_problems(doc: YamlDocument, plan: DrillPlan, base: Path) -> list[PlanProblem]:
    """Two kubeconfig paths that are one file (a symlink, `./a` and `a`) with one context
    are one cluster. (Whether two files name one API server is a runtime check.)"""
    p, d = plan.sites.primary.kubernetes, plan.sites.dr.kubernetes
    if p.kubeconfig is None or d.kubeconfig is None or p.context != d.context:
        return []
    if _real(p.kubeconfig, base) != _real(d.kubeconfig, base):
        return []
    loc: Loc = ("sites", "dr", "kubernetes", "kubeconfig")
    message = (
        "is the same file as the primary's kubeconfig, with the same context: "
        "both sites would be the one cluster"
    )
    return [doc.problem(nearest_position(doc.values, loc), loc, message)]


def _real(path: Path, base: Path) -> str:
    path = path.expanduser()
    return os.path.realpath(path if path.is_absolute() else base / path)


def _in_file_order(problems: list[PlanProblem]) -> list[PlanProblem]:
    # Stable: problems at one spot (missing fields of a mapping) keep the model's field order.
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0, p.column or 0))


def plan_warnings(plan: DrillPlan) -> tuple[PlanWarning, ...]:
    """Warnings about a valid plan, each with its field path and, when the plan came from
    a file, its line and column. Printed by `drills plan validate`; for readiness too."""
    return plan.warnings


# --- schema and digest --------------------------------------------------------------


def plan_schema() -> dict[str, Any]:
    """The JSON Schema of a plan file, for editors and for `drills plan schema`."""
    return DrillPlan.model_json_schema()


def plan_schema_text() -> str:
    """The schema as `drills plan schema` prints it and docs/schema/plan.schema.json holds it."""
    return json.dumps(plan_schema(), indent=2, sort_keys=False) + "\n"


def plan_digest(plan: DrillPlan) -> str:
    """sha256 of the plan's canonical JSON: equal for equal plans, wherever the file lives
    (an application's view has its whole plan's digest: the file it came from)."""
    canonical = json.dumps(
        _without_later_defaults(plan.whole.model_dump(mode="json")),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# Fields a plan gained after runs began recording digests: at their defaults they are left out,
# so a plan file that did not change keeps the digest its earlier runs recorded.
_LATER_DEFAULTS: tuple[tuple[tuple[str, ...], object], ...] = (
    (("applications",), []),
    (("cost",), None),
    (("slo",), []),
    (("load",), None),
    (("demand",), {}),
    (("images",), {"remap": []}),
    (("validation_jobs",), []),
    (("secrets", "store"), []),
    (("secrets", "external_secrets"), []),
    *(
        (("sites", role, *field), value)
        for role in ("primary", "dr")
        for field, value in (
            (("secret_store",), {"provider": "aws-secrets-manager", "settings": {}}),
            (("objects", "provider"), "s3"),
            (("objects", "settings"), {}),
            (("object_stores",), {}),
        )
    ),
)


def _without_later_defaults(dumped: dict[str, Any]) -> dict[str, Any]:
    for dataset in dumped.get("datasets") or ():
        if isinstance(dataset, dict) and dataset.get("store", False) is None:
            del dataset["store"]
    for path, default in _LATER_DEFAULTS:
        *parents, key = path
        node: Any = dumped
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(key, object()) == default:
            del node[key]
    return dumped
