"""Keys only toposched's controller writes, and how the controller recognises its own values.

The controller records a few decisions on the Workloads themselves, so that the next pass, a
restarted controller and a new leader continue them (:data:`CONTROLLER_OWNED`). Anyone who may
update a Workload could write the same keys (Kueue's batch-admin role and many clusters let
tenants), so they are defended twice (docs/security.md):

1. the webhook refuses them from any identity but the controller's (``admission/owned.py``);
2. the controller honours the two that move *other* teams' workloads — the sticky preemption
   target (which victims are taken) and the domain a compact wait holds (capacity kept from
   everyone queued behind it) — only when it wrote them itself (:class:`Signer`), and a held
   domain only while its holder is queued and waiting (:func:`trusted_pending`). The webhook
   may be misconfigured, bypassed or down; these checks hold regardless.

How the controller knows it wrote a value: an HMAC-SHA256 over the Workload's uid, the key and
the value, with a key only the controller holds, stored inside the value's JSON object
(``"sig"``; the readers ignore unknown fields). Binding the uid means a value cannot be copied
to another Workload; binding the key means a target cannot be replayed as a held domain.
``managedFields`` would not do: the field manager's name is chosen by the client.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET
from scheduler.core.beyond.held_domains import ANN_RESERVED_DOMAIN
from scheduler.core.beyond.preferred_domains import ANN_PREVIOUS_DOMAINS
from scheduler.core.kueue.queueing import LocalQueueSpec, PendingWorkload
from scheduler.core.kueue.quota import STOP_NONE, ClusterQueueSpec
from scheduler.core.workload import WorkloadSpec

# Node-failure retries of HyperPod auto-resume (kube/nodefailures.py): how many were used, and
# which reservation was last counted (so one failure is counted once).
ANN_RETRIES = "toposched.dev/node-failure-retries"
ANN_RETRY_KEY = "toposched.dev/node-failure-counted"

# Workload annotation -> what the controller records in it (the webhook's refusal says why).
CONTROLLER_OWNED: Mapping[str, str] = {
    ANN_PREEMPTION_TARGET: "the domain the controller preempts other workloads for",
    ANN_RESERVED_DOMAIN: "the domain a compact wait holds against every workload queued behind it",
    ANN_PREVIOUS_DOMAINS: "the domains the workload held before its eviction",
    ANN_RETRIES: "the node-failure retries of HyperPod auto-resume already used",
    ANN_RETRY_KEY: "the reservation whose node-failure retry was last counted",
}
# The owned keys whose values steer other teams' workloads: signed, and verified on every read.
SIGNED: tuple[str, ...] = (ANN_PREEMPTION_TARGET, ANN_RESERVED_DOMAIN)
SIGNATURE_FIELD = "sig"
_CONTEXT = b"toposched-owned-annotation-v1"


def _canonical(data: Mapping[str, object]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Signer:
    """Signs and verifies the controller's values of :data:`SIGNED` keys with ``key``."""

    key: bytes

    @classmethod
    def per_process(cls) -> Signer:
        """A key of this process only: values it signed are not recognised after a restart (they
        are decided again; nothing is lost but the stickiness)."""
        return cls(secrets.token_bytes(32))

    @property
    def key_id(self) -> str:
        """A short public name of the key (logs, memo stamps); reveals nothing of it."""
        return hashlib.sha256(_CONTEXT + self.key).hexdigest()[:12]

    def _mac(self, uid: str, annotation: str, data: Mapping[str, object]) -> str:
        message = b"\n".join((_CONTEXT, uid.encode(), annotation.encode(), _canonical(data)))
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def sign(self, uid: str, annotation: str, value: str) -> str:
        """``value`` (a JSON object, as the core encodes targets) with its signature added.
        Deterministic: the same inputs give the same text, so an unchanged value is not rewritten."""
        data = json.loads(value)
        if not isinstance(data, dict):
            raise ValueError(f"{annotation}: only JSON objects are signed, got {value!r}")
        data.pop(SIGNATURE_FIELD, None)
        return json.dumps({**data, SIGNATURE_FIELD: self._mac(uid, annotation, data)}, sort_keys=True)

    def verify(self, uid: str, annotation: str, stored: str) -> bool:
        """Whether ``stored`` was signed by this key for this Workload uid and key."""
        try:
            data = json.loads(stored)
        except ValueError:
            return False
        if not isinstance(data, dict) or not uid:
            return False
        signature = data.pop(SIGNATURE_FIELD, None)
        return isinstance(signature, str) and hmac.compare_digest(signature, self._mac(uid, annotation, data))


class _HasSpec(Protocol):
    @property
    def spec(self) -> WorkloadSpec: ...


W = TypeVar("W", bound=_HasSpec)


def _without(item: W, keys: Sequence[str]) -> W:
    annotations = {k: v for k, v in item.spec.annotations.items() if k not in keys}
    return replace(item, spec=replace(item.spec, annotations=annotations))  # type: ignore[type-var]


def without_annotations(items: Sequence[W], keys: Sequence[str]) -> tuple[W, ...]:
    """``items`` with ``keys`` removed from their annotations (only those carrying one are copied).
    The snapshot drops ``kueue.x-k8s.io/priority-boost`` this way while Kueue's ``PriorityBoost``
    gate is off: Kueue then ignores it, and anyone who may update a Workload could write it."""
    if not keys:
        return tuple(items)
    out = []
    for item in items:  # plain loops: every pending Workload passes here every pass
        annotations = item.spec.annotations
        if annotations:
            for key in keys:
                if key in annotations:
                    item = _without(item, keys)
                    break
        out.append(item)
    return tuple(out)


@dataclass(frozen=True)
class QueueFacts:
    """What decides whether a pending workload is queued and waiting: the snapshot's
    LocalQueues ("ns/name") and ClusterQueues, the namespaces' labels, and the moment."""

    local_queues: Mapping[str, LocalQueueSpec]
    cluster_queues: Mapping[str, ClusterQueueSpec]
    namespace_labels: Mapping[str, Mapping[str, str]]
    now: float


def waiting_in_queue(pw: PendingWorkload, facts: QueueFacts) -> bool:
    """Queued and waiting (reserve-compact's holders): its LocalQueue and ClusterQueue exist and
    are not stopped, the ClusterQueue admits its namespace and is not being deleted, and it is
    not held out of the queue (``Requeued=False``) or in a requeue backoff. (Finished, inactive,
    deleting and reserved Workloads are never pending in the first place.)"""
    lq = facts.local_queues.get(f"{pw.spec.namespace}/{pw.spec.queue_name}")
    cq = facts.cluster_queues.get(lq.cluster_queue) if lq is not None else None
    if lq is None or cq is None or lq.stop_policy != STOP_NONE or cq.stop_policy != STOP_NONE:
        return False
    if cq.terminating or pw.held or (pw.requeue_at is not None and pw.requeue_at > facts.now):
        return False
    labels = pw.namespace_labels or facts.namespace_labels.get(pw.spec.namespace, {})
    return cq.namespace_selector.matches(labels)


def untrusted_keys(pw: PendingWorkload, signer: Signer | None, facts: QueueFacts) -> list[str]:
    """The signed keys of ``pw`` the cycle must not see: not signed by ``signer`` for this
    Workload (``None``: signatures are not checked, e.g. ``toposched explain``, which has no
    key), and a held domain whose holder is not queued and waiting."""
    annotations = pw.spec.annotations
    out = []
    for key in SIGNED:
        stored = annotations.get(key)
        if stored is None:
            continue
        if signer is not None and not signer.verify(pw.spec.uid, key, stored):
            out.append(key)
        elif key == ANN_RESERVED_DOMAIN and not waiting_in_queue(pw, facts):
            out.append(key)
    return out


def trusted_pending(pending: Sequence[PendingWorkload], signer: Signer | None,
                    facts: QueueFacts) -> tuple[PendingWorkload, ...]:
    """``pending`` with every owned value the controller did not write (or may not honour)
    removed from what the cycle sees. Only the few workloads that carry such a key are copied."""
    out = []
    for pw in pending:
        annotations = pw.spec.annotations
        if annotations and (ANN_PREEMPTION_TARGET in annotations or ANN_RESERVED_DOMAIN in annotations):
            dropped = untrusted_keys(pw, signer, facts)
            if dropped:
                pw = _without(pw, dropped)
        out.append(pw)
    return tuple(out)
