"""Is this cluster ready for toposched to take over from Kueue? (docs/install.md, "Adopting
toposched where Kueue runs").

The adoption path is a replacement, not a split: Kueue v0.17 has no switch that makes its
controller leave some Workloads alone (its job reconciler manages every Job carrying
``kueue.x-k8s.io/queue-name``, its scheduler every pending Workload of a ClusterQueue it knows;
``spec.managedBy`` on a Job only hands it to MultiKueue, and ``manageJobsWithoutQueueName`` /
``managedJobsNamespaceSelector`` only widen or narrow which *unlabelled* Jobs it takes). Two
engines on one Workload would each reserve quota and write ``status.admission``. So Kueue's
controller and webhooks stop, and toposched adopts every Workload as it is: admitted ones keep
their ``status.admission`` (the controller reads it as Kueue wrote it), pending ones are queued.

This module only judges plain objects (lists from the API server); the command lists them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.adapter.kinds.registry import KINDS
from scheduler.core.kueue_names import GATE_TOPOLOGY
from scheduler.core.workload import ANN_WORKLOAD, LABEL_PODSET

KUEUE_GROUP = "kueue.x-k8s.io"
# Kueue's TopologyUngater removes this gate once it has pinned a pod to its assigned domain;
# toposched's topology ungater does the same for a pod that names its Workload and pod set
# (Kueue's PodSetInfo puts both on it); one that names neither would stay Pending.
KUEUE_TOPOLOGY_GATE = GATE_TOPOLOGY
KUEUE_LEADER_LEASE = "c1f6bfd2.kueue.x-k8s.io"  # Kueue's default leaderElection.resourceName
# The kinds toposched's controller starts and stops (the job-kind registry's, in every spelling
# an externalFrameworks entry may use: AWS writes HyperPodPytorchJob, the CLI HyperPodPyTorchJob);
# a pending Workload of another kind (an AppWrapper, ...) could be admitted but never started.
ADOPTABLE_OWNER_KINDS = frozenset(name for k in KINDS for name in (k.kind, *k.aliases))

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Finding:
    blocker: bool
    text: str


@dataclass(frozen=True)
class AdoptionReport:
    admitted: int
    pending: int
    findings: tuple[Finding, ...]

    @property
    def ready(self) -> bool:
        return not any(f.blocker for f in self.findings)

    def lines(self) -> list[str]:
        out = [f"{'BLOCKER' if f.blocker else 'note'}: {f.text}" for f in self.findings]
        verdict = "ready: start toposched" if self.ready else "not ready: fix the blockers above, then run again"
        out.append(f"{self.admitted} admitted Workloads keep their admission, {self.pending} pending are queued by "
                   f"toposched; {verdict}")
        return out


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _condition_true(obj: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


def kueue_webhook_configurations(configurations: Sequence[Obj]) -> list[str]:
    """Configurations with a webhook on Kueue's own kinds: only Kueue's webhooks have one
    (toposched's intercepts the governed job kinds, never Kueue's own objects)."""
    found = []
    for conf in configurations:
        for hook in conf.get("webhooks") or ():
            if any(KUEUE_GROUP in (rule.get("apiGroups") or ()) for rule in hook.get("rules") or ()):
                found.append(f"{conf.get('kind', 'WebhookConfiguration')} {_name(conf)}")
                break
    return found


def lease_is_live(lease: Obj | None, now: dt.datetime) -> bool:
    """Held and renewed within its duration (the API server's clock against ours: a pre-flight
    check, so a few seconds of skew only delay the verdict)."""
    spec = (lease or {}).get("spec") or {}
    holder, renewed = spec.get("holderIdentity"), spec.get("renewTime")
    if not holder or not renewed:
        return False
    renewed_at = dt.datetime.fromisoformat(str(renewed).replace("Z", "+00:00"))
    return (now - renewed_at).total_seconds() < float(spec.get("leaseDurationSeconds") or 15)


def assess(*, workloads: Sequence[Obj], cluster_queues: Sequence[Obj], webhook_configurations: Sequence[Obj],
           pods: Sequence[Obj], kueue_deployments: Sequence[Obj], kueue_lease: Obj | None,
           now: dt.datetime) -> AdoptionReport:
    findings: list[Finding] = []
    running = [_name(d) for d in kueue_deployments if int((d.get("spec") or {}).get("replicas", 1) or 0) > 0]
    if running:
        findings.append(Finding(True, f"Kueue's controller Deployment {', '.join(running)} has replicas: scale it "
                                      "to 0 (kubectl -n <kueue namespace> scale deployment <name> --replicas=0)"))
    if lease_is_live(kueue_lease, now):
        holder = ((kueue_lease or {}).get("spec") or {}).get("holderIdentity")
        findings.append(Finding(True, f"Kueue's leader Lease {KUEUE_LEADER_LEASE} is renewed by {holder}: a Kueue "
                                      "controller still runs somewhere"))
    hooks = kueue_webhook_configurations(webhook_configurations)
    if hooks:
        findings.append(Finding(True, f"Kueue's webhook configurations still registered ({', '.join(hooks)}): "
                                      "delete them, or with no Kueue behind them every Workload and queue write "
                                      "fails"))
    gated = sorted(f"{(p.get('metadata') or {}).get('namespace')}/{_name(p)}" for p in pods
                   if any(g.get("name") == KUEUE_TOPOLOGY_GATE for g in (p.get("spec") or {}).get("schedulingGates")
                          or ()) and not _names_its_pod_set(p))
    if gated:
        findings.append(Finding(True, f"{len(gated)} pods carry Kueue's {KUEUE_TOPOLOGY_GATE} scheduling gate but "
                                      f"name no Workload and pod set (e.g. {gated[0]}; annotation {ANN_WORKLOAD}, "
                                      f"label {LABEL_PODSET}): toposched's topology ungater cannot tell their domain; "
                                      "start Kueue again until it has ungated them"))
    checked = sorted(_name(cq) for cq in cluster_queues if (cq.get("spec") or {}).get("admissionChecks")
                     or (cq.get("spec") or {}).get("admissionChecksStrategy"))
    if checked:
        findings.append(Finding(True, f"ClusterQueues with admission checks ({', '.join(checked)}): toposched does "
                                      "not run AdmissionChecks and would admit their Workloads without them"))
    known = {_name(cq) for cq in cluster_queues}
    admitted = pending = 0
    orphans: list[str] = []
    foreign: list[str] = []
    for wl in workloads:
        if _condition_true(wl, "Finished"):
            continue
        admission = (wl.get("status") or {}).get("admission")
        if admission and _condition_true(wl, "QuotaReserved"):
            admitted += 1
            if admission.get("clusterQueue") not in known:
                orphans.append(f"{(wl.get('metadata') or {}).get('namespace')}/{_name(wl)}")
        else:
            pending += 1
            kind = _owner_kind(wl)
            if kind not in ADOPTABLE_OWNER_KINDS:
                foreign.append(f"{(wl.get('metadata') or {}).get('namespace')}/{_name(wl)} ({kind or 'no owner'})")
    if orphans:
        findings.append(Finding(False, f"{len(orphans)} admitted Workloads name a ClusterQueue that no longer "
                                       f"exists (e.g. {orphans[0]}); they keep running and their usage is not "
                                       "counted against any queue"))
    others = foreign
    if others:
        findings.append(Finding(True, f"{len(others)} pending Workloads belong to kinds toposched does not start "
                                      f"(e.g. {others[0]}; toposched runs {', '.join(sorted(ADOPTABLE_OWNER_KINDS))}):"
                                      " let Kueue admit or delete them first"))
    return AdoptionReport(admitted, pending, tuple(findings))


def _names_its_pod_set(pod: Obj) -> bool:
    meta = pod.get("metadata") or {}
    return bool((meta.get("annotations") or {}).get(ANN_WORKLOAD) and (meta.get("labels") or {}).get(LABEL_PODSET))


def _owner_kind(wl: Obj) -> str:
    refs = (wl.get("metadata") or {}).get("ownerReferences") or ()
    return next((str(r.get("kind") or "") for r in refs if r.get("controller")), "")
