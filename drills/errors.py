"""The error tree of drills.

Every SDK exception is translated into one of these at the adapter edge
(``drills.targets``), so callers above it never see botocore, urllib3 or
dnspython exceptions and can decide on retry by type alone.
"""

from __future__ import annotations

from dataclasses import dataclass


class DrillError(Exception):
    """Root of every error that drills raises on purpose."""


def located(file: str, line: int | None, column: int | None) -> str:
    """``file:line:col`` as editors and compilers print it, with what is known."""
    if line is None:
        return file
    return f"{file}:{line}" if column is None else f"{file}:{line}:{column}"


@dataclass(frozen=True)
class PlanProblem:
    """One problem in a plan file, located for an operator to fix."""

    file: str
    line: int | None
    column: int | None
    path: str
    message: str

    def __str__(self) -> str:
        field = f" {self.path}:" if self.path else ""
        return f"{located(self.file, self.line, self.column)}:{field} {self.message}"


class PlanError(DrillError):
    """A plan is invalid. Carries every problem found, not only the first."""

    def __init__(self, problems: list[PlanProblem]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in plan"
        super().__init__(head + "\n" + "\n".join(f"  {p}" for p in self.problems))


class TargetError(DrillError):
    """An external system (Kubernetes, S3, a registry, DNS, HTTP) failed us.

    ``target`` names the system and endpoint in words an operator knows,
    e.g. ``"kubernetes dr (http://127.0.0.3:6443)"``.
    """

    def __init__(self, target: str, cause: str) -> None:
        self.target = target
        self.cause = cause
        super().__init__(f"{target}: {cause}")


class PermanentError(TargetError):
    """Retrying cannot help: 401/403/404, a bad TSIG signature, a malformed answer."""


class TemporaryError(TargetError):
    """Retrying may help after ``delay`` seconds: 5xx, throttling, a reset connection."""

    def __init__(self, target: str, cause: str, delay: float = 1.0) -> None:
        super().__init__(target, cause)
        self.delay = delay


class MisroutedError(PermanentError):
    """What answered is not the system asked, so nothing it says can be judged.

    A misrouted proxy, a wrong path prefix or a stale ingress answers 404 to every path;
    a discovery document may lack the API group a read needs; a DNS server may not serve
    the zone. Read as "none here", such an answer would make a check pass (or report
    things "missing") on a system it never reached.
    """


def unreadable(exc: TargetError) -> bool:
    """Whether ``exc`` means the target gave no answer to judge: it could not be reached
    (TemporaryError) or what answered was not it (MisroutedError). A refusal the target
    itself gave (401, 403, BADSIG, AccessDenied) is an answer, and may be judged."""
    return isinstance(exc, TemporaryError | MisroutedError)


class CheckFailed(DrillError):  # noqa: N818 - the name the design notes give
    """A readiness check that gates a drill did not pass."""


class StepFailed(DrillError):  # noqa: N818 - the name the design notes give
    """A mutating step could not apply or verify its change."""

    def __init__(self, step: str, cause: str) -> None:
        self.step = step
        self.cause = cause
        super().__init__(f"step {step} failed: {cause}")


class NotMet(StepFailed):
    """DR came up and answered, but did not prove it carries production: a validation job
    failed, an SLO breached or could not be verified, or the load probe went over its
    limits. A drill's verdict is then ``not met``, and it rolls back as any failure does."""


class RunRefused(DrillError):  # noqa: N818 - it is a decision, not a failure of ours
    """A takeover refused before its first change: nothing here could prove it safe.

    Two sites that are one, or a primary whose service was never seen from outside
    (so no fence of it could be verified), are refused whatever the readiness says.
    """


class LabError(DrillError):
    """The local lab could not start, stop or be found."""


@dataclass(frozen=True)
class UndoFailure:
    seq: int
    kind: str
    target: str
    cause: str


class RollbackIncompleteError(DrillError):
    """Some undo steps failed; the journal still lists them for `drills recover`."""

    def __init__(self, failures: list[UndoFailure]) -> None:
        self.failures = failures
        lines = "; ".join(f"{f.kind} {f.target}: {f.cause}" for f in failures)
        super().__init__(f"{len(failures)} change(s) could not be undone: {lines}")
