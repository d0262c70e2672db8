"""What the sites look like now, as far as it changes a takeover's time."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CurrentState:
    # Workloads whose DR replicas are already Ready: their rollout costs nothing now.
    warm: frozenset[str] = frozenset()
    dns_ttl_s: float | None = None  # the record's TTL now: clients may hold the old answer
    # Why the critical tier could not come up now (queue quota, free GPUs); empty: it can.
    blocked_by: tuple[str, ...] = ()
    # Seconds a new pod of the DR sentinel took to become Ready: DR's rollout speed today.
    pod_start_s: float | None = None
    replication_lag_s: float | None = None  # the worst dataset lag last measured
    notes: tuple[str, ...] = field(default_factory=tuple)
    # The inputs that could not be read, each with why: a forecast over them is unverified.
    unreadable: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        return not self.unreadable
