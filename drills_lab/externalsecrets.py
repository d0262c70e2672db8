"""A controller that behaves like External Secrets Operator in one lab cluster: it syncs each
``ExternalSecret`` from the store it names (a ``ClusterSecretStore`` or ``SecretStore`` of
the AWS Secrets Manager provider, served by the lab's moto in the site's region) into its
target Secret, every ``refreshInterval``, and records the result as ESO does: a ``Ready``
condition (``SecretSynced``, or ``SecretSyncedError`` with the error) and ``refreshTime``.

A failing sync keeps the Secret it wrote last, as ESO does. The annotation
``lab.drills.dev/paused: "true"`` stops the controller from refreshing one ExternalSecret:
a stand-in for an operator that stopped reconciling it (a stale ``refreshTime``).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from drills.targets.external_secrets import DEFAULT_REFRESH, go_duration, target_name
from drills_lab import topology
from drills_lab.kubeapi.store import ResourceStore

log = logging.getLogger("drills_lab.externalsecrets")

PAUSED = "lab.drills.dev/paused"
TICK_S = 0.5


class SyncError(Exception):
    """Why one ExternalSecret could not be synced, in the words ESO would record."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _stamp(when: dt.datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


class LabExternalSecrets:
    """ESO's reconcile loop over one cluster's store; ``secrets_manager`` reads the site's
    region of the lab's Secrets Manager."""

    def __init__(self, store: ResourceStore, secrets_manager: Any, *, name: str) -> None:
        self.store = store
        self.sm = secrets_manager
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lab-eso-{name}", daemon=True)

    def start(self) -> None:
        self.sync_all()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.sync_all()
            except Exception:  # keep reconciling, as the operator does; the log says why
                log.exception("external-secrets sync failed")

    def sync_all(self) -> None:
        now = _now()
        for obj in self.store.list("externalsecrets", None):
            if self._due(obj, now):
                self.sync(obj, now)

    @staticmethod
    def _due(obj: dict[str, Any], now: dt.datetime) -> bool:
        meta = obj.get("metadata") or {}
        if (meta.get("annotations") or {}).get(PAUSED) == "true":
            return False
        status = obj.get("status") or {}
        if str(status.get("syncedResourceVersion", "")) != str(meta.get("generation", "")):
            return True  # a new or changed spec syncs at once
        interval = go_duration(
            str((obj.get("spec") or {}).get("refreshInterval") or DEFAULT_REFRESH)
        )
        if not interval:
            return False
        last = status.get("refreshTime")
        if not last:
            return True
        return (
            now - dt.datetime.fromisoformat(str(last).replace("Z", "+00:00"))
        ).total_seconds() >= interval

    def sync(self, obj: dict[str, Any], now: dt.datetime) -> None:
        meta = obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        try:
            data = self._fetch(obj)
        except SyncError as exc:
            self._status(namespace, name, meta, ready=False, message=str(exc), now=None)
            log.info("ExternalSecret %s/%s not synced: %s", namespace, name, exc)
            return
        self._write_secret(namespace, target_name(obj), data, meta)
        self._status(namespace, name, meta, ready=True, message="Secret was synced", now=now)

    def _fetch(self, obj: dict[str, Any]) -> dict[str, bytes]:
        spec = obj.get("spec") or {}
        self._store_of(obj)
        out: dict[str, bytes] = {}
        for i, item in enumerate(spec.get("data") or []):
            ref = item.get("remoteRef") or {}
            key = str(ref.get("key", ""))
            try:
                raw = self.sm.get_secret_value(SecretId=key)["SecretString"]
            except (ClientError, BotoCoreError) as exc:
                error = getattr(exc, "response", {}).get("Error", {}).get("Message") or str(exc)
                raise SyncError(
                    f"error processing spec.data[{i}] (key: {key}), err: {error}"
                ) from None
            prop = ref.get("property")
            if prop:
                try:
                    raw = str(json.loads(raw)[prop])
                except (ValueError, KeyError, TypeError):
                    raise SyncError(
                        f"error processing spec.data[{i}] (key: {key}), err: key {prop} does "
                        "not exist in secret"
                    ) from None
            out[str(item.get("secretKey"))] = raw.encode()
        return out

    def _store_of(self, obj: dict[str, Any]) -> dict[str, Any]:
        ref = (obj.get("spec") or {}).get("secretStoreRef") or {}
        kind = ref.get("kind") or "SecretStore"
        namespace = None if kind == "ClusterSecretStore" else obj["metadata"]["namespace"]
        plural = "clustersecretstores" if kind == "ClusterSecretStore" else "secretstores"
        found = self.store.get(plural, namespace, str(ref.get("name", "")))
        if found is None:
            raise SyncError(f'could not get {kind} "{ref.get("name")}": not found')
        return found

    def _write_secret(
        self, namespace: str, name: str, data: dict[str, bytes], owner: dict[str, Any]
    ) -> None:
        encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
        existing = self.store.get("secrets", namespace, name)
        if existing is None:
            body = {"metadata": {"namespace": namespace, "name": name,
                                 "labels": {"reconcile.external-secrets.io/managed": "true"}},
                    "type": "Opaque", "data": encoded}  # fmt: skip
            self.store.create("secrets", body)
            return

        def replace(o: dict[str, Any]) -> dict[str, Any]:
            o["data"] = encoded
            return o

        self.store.patch("secrets", namespace, name, replace)

    def _status(
        self,
        namespace: str,
        name: str,
        meta: dict[str, Any],
        *,
        ready: bool,
        message: str,
        now: dt.datetime | None,
    ) -> None:
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "SecretSynced" if ready else "SecretSyncedError",
            "message": message,
            "lastTransitionTime": _stamp(_now()),
        }

        def write(o: dict[str, Any]) -> dict[str, Any]:
            status = o.setdefault("status", {})
            status["conditions"] = [condition]
            status["syncedResourceVersion"] = str(meta.get("generation", ""))
            if now is not None:
                status["refreshTime"] = _stamp(now)
            return o

        self.store.patch("externalsecrets", namespace, name, write, subresource="status")


def external_secret(
    namespace: str, name: str, store: str, remote_key: str, keys: tuple[str, ...],
    refresh: str = "1h",
) -> dict[str, Any]:  # fmt: skip
    """An ExternalSecret as a user would apply it: each key a property of one remote secret."""
    return {
        "apiVersion": "external-secrets.io/v1beta1",
        "kind": "ExternalSecret",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "refreshInterval": refresh,
            "secretStoreRef": {"kind": "ClusterSecretStore", "name": store},
            "target": {"name": name, "creationPolicy": "Owner"},
            "data": [{"secretKey": k, "remoteRef": {"key": remote_key, "property": k}}
                     for k in keys],
        },
    }  # fmt: skip


def cluster_store(name: str, region: str) -> dict[str, Any]:
    return {
        "apiVersion": "external-secrets.io/v1beta1",
        "kind": "ClusterSecretStore",
        "metadata": {"name": name},
        "spec": {"provider": {"aws": {"service": "SecretsManager", "region": region}}},
    }


Values = Callable[[str, str], str]  # (remote key, property) -> the value every site shares


def seed_site(
    store: ResourceStore, secrets_manager: Any, site: str, region: str, values: Values,
    *, drift: bool,
) -> None:  # fmt: skip
    """A site's ClusterSecretStore, its ExternalSecrets, and the remote secrets they read in
    the site's region; with ``drift``, DR's region lacks one of them."""
    store.create("clustersecretstores", cluster_store(topology.SECRET_STORE, region))
    for es in topology.EXTERNAL_SECRETS:
        failing = (
            drift
            and site == "dr"
            and (es.namespace, es.name) == (topology.DRIFT_FAILING_EXTERNAL_SECRET)
        )
        if not failing:
            value = json.dumps({k: values(es.remote_key, k) for k in es.keys})
            secrets_manager.create_secret(Name=es.remote_key, SecretString=value)
        body = external_secret(es.namespace, es.name, topology.SECRET_STORE, es.remote_key, es.keys)
        store.create("externalsecrets", body)
