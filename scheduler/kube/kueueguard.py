"""Hold admission while a Kueue controller is alive (``toposched controller --kueue-lease``).

After the replace-Kueue migration (docs/install.md, "Adopting toposched where Kueue runs") a
Kueue controller can come back: an add-on update re-applies its Deployment. Two engines would
then reserve quota for the same Workloads. Kueue's controller-manager holds a leader Lease
(``c1f6bfd2.kueue.x-k8s.io`` by default, renewed every 2 s) before it starts any controller, so
a Lease that keeps changing means a Kueue is running; this guard is asked before every
reconcile pass and says "hold" while it does.

Liveness is judged as client-go's candidates judge a Lease: by when *this process* saw the
record change, on its own monotonic clock, not by the holder's ``renewTime`` (clocks differ).
A Lease first seen with a holder counts as live until it has stayed unchanged for its
duration, so a controller that restarts next to a running Kueue never writes in between.
Kueue with leader election off takes no Lease, and ``toposched adopt`` is what catches it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kubernetes.client.exceptions import ApiException

from scheduler.k8s.informer import LEASES, KubeApi

log = logging.getLogger(__name__)
DEFAULT_LEASE_DURATION_S = 15.0  # controller-runtime's default, Kueue's too


def parse_lease_ref(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` -> (namespace, name); ValueError naming the form otherwise."""
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"--kueue-lease {text!r}: expected NAMESPACE/NAME, e.g. kueue-system/c1f6bfd2.kueue.x-k8s.io")
    return namespace, name


class KueueGuard:
    """``holds()`` is True while Kueue's leader Lease looks alive (or cannot be read)."""

    def __init__(self, api: KubeApi, namespace: str, name: str,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.monotonic = monotonic
        self._record: tuple[str, str, str] | None = None
        self._changed_at = 0.0
        self._holding = False

    def holds(self) -> bool:
        holding = self._judge()
        if holding != self._holding:
            if holding:
                log.warning("Kueue's leader Lease %s/%s is alive: admission held until it stops changing (a Kueue "
                            "controller runs; scale it to 0, docs/install.md)", self.namespace, self.name)
            else:
                log.info("Kueue's leader Lease %s/%s is no longer renewed: admission resumes", self.namespace,
                         self.name)
            self._holding = holding
        return holding

    def _judge(self) -> bool:
        try:
            lease = self.api.get(LEASES, self.name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                self._record = None
                return False
            log.warning("cannot read Kueue's leader Lease %s/%s (%s %s): holding admission", self.namespace,
                        self.name, exc.status, exc.reason)
            return True  # fail closed: unknown is treated as a Kueue that may be running
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        if not holder:
            return False  # released (Kueue stopped with ReleaseOnCancel)
        record = (holder, str(spec.get("renewTime") or ""), str((lease.get("metadata") or {}).get("resourceVersion")))
        now = self.monotonic()
        if record != self._record:
            self._record, self._changed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or DEFAULT_LEASE_DURATION_S)
        return now - self._changed_at < duration
