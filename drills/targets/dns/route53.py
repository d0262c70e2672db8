"""Route 53 (boto3) as the DNS provider; errors go through ``drills.targets.aws``.

Route 53 serves a hosted zone from four name servers of its own, which drills cannot
query one by one from everywhere; ``get_change`` reaching INSYNC is Route 53's word
that all of them serve a change, so ``confirm`` waits for that and then reads the
record back.
"""

from __future__ import annotations

import logging
import secrets
import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from drills.errors import PermanentError, unreadable
from drills.plan import DrillPlan, Route53Dns
from drills.targets import aws
from drills.targets.dns.records import (
    ChangeResult,
    DnsTarget,
    RecordAnswer,
    normalize_name,
    normalize_value,
    stale_reason,
)

log = logging.getLogger("drills.targets.dns")

# The probe of check_control is refused with one of these only after IAM allowed it.
_PROBE_REFUSALS = frozenset({"InvalidChangeBatch", "InvalidInput"})
# Values no real zone answers with (RFC 5737, RFC 3849, RFC 2606).
_PROBE_VALUES = {"A": "192.0.2.1", "AAAA": "2001:db8::1", "CNAME": "probe.invalid."}


def route53_endpoint(config: Route53Dns, plan: DrillPlan) -> aws.AwsEndpoint:
    """Where and as whom to reach Route 53; credentials resolved from the plan's refs."""
    return aws.resolve_endpoint(
        plan, config.aws.region, config.aws.endpoint_url, config.aws.credentials
    )


class Route53Target(DnsTarget):
    def __init__(
        self,
        config: Route53Dns,
        where: aws.AwsEndpoint,
        *,
        read_timeout_s: float = aws.READ_TIMEOUT_S,
    ) -> None:
        self.config = config
        self.zone_id = config.hosted_zone_id
        self.server = f"route53 {self.zone_id}"
        self.target = f"dns {where.describe('route53')} zone {self.zone_id}"
        self._client: Any = aws.client("route53", where, read_timeout=read_timeout_s)
        self._changes: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._client.close()

    # -- reads --------------------------------------------------------------------
    def read(self, name: str, rtype: str) -> list[RecordAnswer]:
        record = self._record_set(name, rtype)
        if record is None:
            return [RecordAnswer(self.server, (), None)]
        values = tuple(
            sorted(normalize_value(rtype, r["Value"]) for r in record.get("ResourceRecords", []))
        )
        return [RecordAnswer(self.server, values, int(record["TTL"]))]

    def _record_set(self, name: str, rtype: str) -> dict[str, Any] | None:
        page = aws.call(
            self.target,
            self._client.list_resource_record_sets,
            HostedZoneId=self.zone_id,
            StartRecordName=name,
            StartRecordType=rtype,
            MaxItems="10",
        )
        matches = [
            rs
            for rs in page.get("ResourceRecordSets", [])
            if normalize_name(rs["Name"]) == normalize_name(name) and rs["Type"] == rtype
        ]
        if not matches:
            return None
        if len(matches) > 1 or "SetIdentifier" in matches[0] or "AliasTarget" in matches[0]:
            raise PermanentError(
                self.target,
                f"{name} {rtype} is an alias or uses a routing policy; "
                "drills switches only a simple record",
            )
        return matches[0]

    def _staleness(
        self, name: str, rtype: str, want: str, previous_serial: int | None
    ) -> tuple[list[RecordAnswer], dict[str, str]]:
        with self._lock:
            change_id = self._changes.get((normalize_name(name), rtype))
        if change_id is not None:
            info = aws.call(self.target, self._client.get_change, Id=change_id)["ChangeInfo"]
            if info["Status"] != "INSYNC":
                return [], {self.server: f"change {change_id} is {info['Status']}"}
        answers = self.read(name, rtype)
        why = stale_reason(answers[0], want)
        return answers, ({self.server: why} if why else {})

    # -- changes ------------------------------------------------------------------
    def update(self, name: str, rtype: str, value: str, ttl: int) -> ChangeResult:
        change = {
            "Action": "UPSERT",
            "ResourceRecordSet": {
                "Name": name,
                "Type": rtype,
                "TTL": ttl,
                "ResourceRecords": [{"Value": value}],
            },
        }
        reply = aws.call(
            self.target,
            self._client.change_resource_record_sets,
            HostedZoneId=self.zone_id,
            ChangeBatch={"Comment": "drills: DNS switch", "Changes": [change]},
        )
        change_id = str(reply["ChangeInfo"]["Id"])
        with self._lock:
            self._changes[(normalize_name(name), rtype)] = change_id
        log.info(
            "%s: %s %s set to %s (TTL %d), %s", self.target, name, rtype, value, ttl, change_id
        )
        return ChangeResult(
            self.target, name, rtype, value, ttl, sent_to=self.server, change_id=change_id
        )

    def delete(self, name: str, rtype: str) -> None:
        # Route 53 deletes a record set only when given it whole, as it stands.
        record = self._record_set(name, rtype)
        if record is None:
            return
        aws.call(
            self.target,
            self._client.change_resource_record_sets,
            HostedZoneId=self.zone_id,
            ChangeBatch={
                "Comment": "drills: practice name removed",
                "Changes": [{"Action": "DELETE", "ResourceRecordSet": record}],
            },
        )
        with self._lock:
            self._changes.pop((normalize_name(name), rtype), None)
        log.info("%s: %s %s removed", self.target, name, rtype)

    def check_control(self, name: str, rtype: str) -> None:
        """The zone exists and holds the name, the record reads, and a change is allowed.

        The change permission is probed with a batch Route 53 must reject after IAM
        allowed it: the DELETE of a record set under a random name that cannot exist,
        with a documentation-only value. A batch is atomic, so nothing changes;
        InvalidChangeBatch means "allowed, but nothing to delete", AccessDenied means
        the credentials could not switch the record.

        Limit: an IAM policy that grants only UPSERT, or only the record's own name
        (``route53:ChangeResourceRecordSetsActions`` / ``...NormalizedRecordNames``
        conditions), refuses this probe although the switch itself would pass; the
        check then fails on the safe side and says so.
        """
        zone = aws.call(self.target, self._client.get_hosted_zone, Id=self.zone_id)
        zone_name = normalize_name(zone["HostedZone"]["Name"])
        record = normalize_name(name)
        if record != zone_name and not record.endswith("." + zone_name):
            raise PermanentError(self.target, f"{name} is not inside hosted zone {zone_name}")
        self._record_set(name, rtype)  # proves read access, and refuses an alias record
        probe = {
            "Action": "DELETE",
            "ResourceRecordSet": {
                "Name": f"drills-control-probe-{secrets.token_hex(8)}.{zone_name}",
                "Type": rtype,
                "TTL": 1,
                "ResourceRecords": [{"Value": _PROBE_VALUES.get(rtype, "probe.invalid.")}],
            },
        }
        try:
            self._client.change_resource_record_sets(
                HostedZoneId=self.zone_id,
                ChangeBatch={
                    "Comment": "drills: permission probe, changes nothing",
                    "Changes": [probe],
                },
            )
        except ClientError as exc:
            if aws.error_code(exc) in _PROBE_REFUSALS:
                return  # allowed by IAM, refused because there was nothing to delete
            error = aws.translate(self.target, exc)
            if unreadable(error):  # no answer from Route 53 itself: it refused nothing
                raise error from exc
            raise PermanentError(
                self.target,
                f"the credentials may not change records in this zone "
                f"(a change probe was refused: {error.cause}); an IAM policy limited to "
                "UPSERT of this one name also refuses the probe",
            ) from exc
        except BotoCoreError as exc:
            raise aws.translate(self.target, exc) from exc
        # Only possible if a record of that random name existed: it was a leftover probe.
        log.warning("%s: the change probe deleted a leftover probe record", self.target)
