"""What a readiness check is, and the registry that holds them.

A check is a small function of one typed ``CheckContext`` that returns an
``Outcome``; the runner adds identity and timing to make a frozen
``CheckResult``. The registry refuses a duplicate id at import time, and can
be injected (tests build their own) instead of being a hidden global.
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from drills.plan import DrillPlan
    from drills.store.history import HistoryStore
    from drills.targets.sites import Targets

Tier = Literal["critical", "normal", "batch"]
EXAMPLES = 5  # how many examples of each problem evidence keeps


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    ERROR = "error"


# Worst first, so a summary status is the minimum rank.
SEVERITY = {Status.ERROR: 0, Status.FAIL: 1, Status.WARN: 2, Status.PASS: 3}


@dataclass(frozen=True)
class Outcome:
    """What a check function returns; the runner turns it into a CheckResult."""

    status: Status
    summary: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remediation: str = ""
    blocking: bool = False


@dataclass(frozen=True)
class CheckResult:
    id: str
    title: str
    category: str
    status: Status
    blocking: bool
    summary: str
    evidence: Mapping[str, Any]
    duration_s: float
    remediation: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "category": self.category,
            "status": self.status.value,
            "blocking": self.blocking,
            "summary": self.summary,
            "evidence": dict(self.evidence),
            "duration_s": round(self.duration_s, 4),
            "remediation": self.remediation,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CheckResult:
        return cls(
            id=data["id"],
            title=data["title"],
            category=data["category"],
            status=Status(data["status"]),
            blocking=bool(data["blocking"]),
            summary=data["summary"],
            evidence=data.get("evidence", {}),
            duration_s=float(data.get("duration_s", 0.0)),
            remediation=data.get("remediation", ""),
        )


@dataclass(frozen=True)
class WorkerFact:
    """One worker of the drills work pool, as the orchestrator reports it."""

    name: str
    online: bool

    @property
    def cluster(self) -> str | None:
        """The cluster a worker is named after (``NAME@CLUSTER``); None: outside any."""
        _, at, cluster = self.name.rpartition("@")
        return cluster if at and cluster else None


@dataclass(frozen=True)
class Placement:
    """Where the orchestrator runs, gathered above the checks (they never import Prefect).

    ``cluster`` names the cluster this process runs in (None: none, or not told);
    ``workers`` are the work pool's, None when there is no orchestrator API to ask (this
    process is then the orchestrator) or, with ``workers_error``, when it did not answer."""

    role: str  # worker | dashboard | cli
    in_cluster: bool
    cluster: str | None
    workers: tuple[WorkerFact, ...] | None = None
    workers_error: str | None = None


@dataclass(frozen=True)
class CheckContext:
    """Everything a check may use, the same for every check of one run."""

    plan: DrillPlan
    targets: Targets  # each site's adapters, built on first use and shared by the checks
    history: HistoryStore | None  # None: the run keeps no history (the cadence check warns)
    now: dt.datetime  # one moment for the whole run, so ages compare across checks
    # HMAC key of the secret fingerprints: random per run, so fingerprints compare within
    # a run and never across. Secret like the values it protects: never shown.
    fingerprint_key: bytes = field(repr=False)
    placement: Placement | None = None  # None: not known (orchestrator.placement warns)


CheckFunc = Callable[[CheckContext], Outcome]


@dataclass(frozen=True)
class CheckSpec:
    """A registered check and its catalogue entry, written next to the check itself.

    ``reads`` says which systems and APIs it asks, at which site; ``blocks`` when it fails
    and blocks a takeover; ``warns`` when it warns or fails without blocking; and
    ``remediation`` what an operator does in general (each result also carries one written
    for the problem it found)."""

    id: str
    title: str
    category: str
    func: CheckFunc
    timeout_s: float
    reads: str
    blocks: str
    warns: str
    remediation: str

    @property
    def doc(self) -> str:
        """The catalogue text: the check's docstring."""
        return inspect.cleandoc(self.func.__doc__ or "")


class DuplicateCheckError(ValueError):
    """Two checks claimed one id; raised at import so it cannot ship."""


# The catalogue fields a check must state, beyond its docstring; registration refuses a
# check without any of them, so the reference cannot lack them.
CATALOGUE_FIELDS = ("reads", "blocks", "warns", "remediation")


class CheckRegistry:
    def __init__(self) -> None:
        self._specs: dict[str, CheckSpec] = {}

    def check(
        self,
        id: str,
        *,
        title: str,
        category: str,
        reads: str,
        blocks: str,
        warns: str,
        remediation: str,
        timeout_s: float = 20.0,
    ) -> Callable[[CheckFunc], CheckFunc]:
        """Register a check. ``warns`` may say "Never." but, like the others, not be empty."""
        texts = {"reads": reads, "blocks": blocks, "warns": warns, "remediation": remediation}

        def register(func: CheckFunc) -> CheckFunc:
            if id in self._specs:
                raise DuplicateCheckError(f"check id {id!r} is registered twice")
            if not (func.__doc__ or "").strip():
                raise ValueError(f"check {id!r} needs a docstring: it is the catalogue text")
            missing = [name for name in CATALOGUE_FIELDS if not texts[name].strip()]
            if missing:
                raise ValueError(
                    f"check {id!r} needs {', '.join(missing)}: the catalogue shows them"
                )
            self._specs[id] = CheckSpec(
                id,
                title,
                category,
                func,
                timeout_s,
                **{k: " ".join(v.split()) for k, v in texts.items()},
            )
            return func

        return register

    def all(self) -> list[CheckSpec]:
        return list(self._specs.values())

    def get(self, id: str) -> CheckSpec:
        return self._specs[id]

    def select(self, only: Iterable[str] = (), categories: Iterable[str] = ()) -> list[CheckSpec]:
        only, categories = set(only), {c.lower() for c in categories}
        unknown = only - self._specs.keys()
        if unknown:
            raise KeyError(f"unknown check id(s): {', '.join(sorted(unknown))}")
        return [
            s
            for s in self._specs.values()
            if (not only or s.id in only) and (not categories or s.category.lower() in categories)
        ]


REGISTRY = CheckRegistry()
check = REGISTRY.check


def tier_status(failing_tiers: Iterable[Tier]) -> tuple[Status, bool]:
    """The tier rule: a problem in the critical tier fails and blocks; elsewhere it warns."""
    tiers = set(failing_tiers)
    if not tiers:
        return Status.PASS, False
    if "critical" in tiers:
        return Status.FAIL, True
    return Status.WARN, False


def worst(statuses: Iterable[Status]) -> Status:
    return min(statuses, key=SEVERITY.__getitem__, default=Status.PASS)
