"""Leader election through a coordination.k8s.io/v1 Lease (the protocol client-go uses).

Only the leader runs admission cycles and writes results; followers keep their caches warm
so a fail-over costs one lease duration, not a relist. Updates use the Lease's
resourceVersion (optimistic concurrency), so two candidates can never both believe they
renewed the same term.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from kubernetes.client.exceptions import ApiException

from scheduler.kube.informer import LEASES, KubeApi
from scheduler.kube.status import utcnow

log = logging.getLogger(__name__)


def _micro(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


class LeaseElector:
    def __init__(self, api: KubeApi, name: str, namespace: str, identity: str, *,
                 lease_duration_s: int = 15, renew_deadline_s: float = 10, retry_period_s: float = 2,
                 clock: Callable[[], dt.datetime] = utcnow, monotonic: Callable[[], float] = time.monotonic) -> None:
        """``clock``: the wall time written into the Lease; ``monotonic``: measures the renew
        deadline (immune to wall-clock jumps)."""
        self.api = api
        self.clock = clock
        self.monotonic = monotonic
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration_s = lease_duration_s
        self.renew_deadline_s = renew_deadline_s
        self.retry_period_s = retry_period_s
        self.is_leader = threading.Event()
        self._stop = threading.Event()

    def _try_acquire_or_renew(self) -> bool:
        now = self.clock()
        try:
            lease = self.api.get(LEASES, self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_duration_s,
                         "acquireTime": _micro(now), "renewTime": _micro(now), "leaseTransitions": 0},
            }
            try:
                self.api.create(LEASES, body, self.namespace)
                return True
            except ApiException as exc2:
                if exc2.status == 409:
                    return False
                raise
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
        duration = int(spec.get("leaseDurationSeconds") or self.lease_duration_s)
        expired = renewed is None or (now - renewed).total_seconds() > duration
        if holder and holder != self.identity and not expired:
            return False
        new_spec = dict(spec)
        if holder != self.identity:
            new_spec["acquireTime"] = _micro(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        new_spec.update(holderIdentity=self.identity, renewTime=_micro(now), leaseDurationSeconds=self.lease_duration_s)
        lease["spec"] = new_spec
        try:
            self.api.replace(LEASES, lease)  # carries resourceVersion: a concurrent writer gets 409
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise

    def release(self) -> None:
        """Give the lease up on clean shutdown so a successor need not wait for expiry."""
        if not self.is_leader.is_set():
            return
        try:
            lease = self.api.get(LEASES, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                self.api.replace(LEASES, lease)
        except ApiException:
            pass
        self.is_leader.clear()

    def stop(self) -> None:
        self._stop.set()

    def run(self, on_started_leading: Callable[[], None], on_stopped_leading: Callable[[], None]) -> None:
        """Block: acquire, then renew every retry period; lose leadership if renewals fail for
        longer than the renew deadline (then call ``on_stopped_leading`` and campaign again)."""
        last_renew = 0.0
        while not self._stop.is_set():
            try:
                ok = self._try_acquire_or_renew()
            except ApiException as exc:
                log.warning("lease %s/%s: HTTP %s %s", self.namespace, self.name, exc.status, exc.reason)
                ok = False
            except Exception as exc:  # API server unreachable: counts as a failed renewal
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
                ok = False
            mono = self.monotonic()
            if ok:
                last_renew = mono
                if not self.is_leader.is_set():
                    log.info("became leader (lease %s/%s, identity %s)", self.namespace, self.name, self.identity)
                    self.is_leader.set()
                    on_started_leading()
            elif self.is_leader.is_set() and mono - last_renew > self.renew_deadline_s:
                log.warning("lost leadership (lease %s/%s)", self.namespace, self.name)
                self.is_leader.clear()
                on_stopped_leading()
            self._stop.wait(self.retry_period_s)
        self.release()
