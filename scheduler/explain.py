"""Why is this job pending? One answer for ``toposched explain`` and the gRPC ``Explain``.

:func:`explain` takes an ``adapter.views.EngineSnapshot`` (the raw objects; the CLI fills it
from one list call per resource, the gRPC server from the controller's caches), builds the
controller's own core snapshot with ``scheduler.adapter.snapshot.build_snapshot``, runs one
admission cycle with the workload alone at the head of its queue, and adds the numbers
behind the verdict:

- quota: per (flavor, resource) requested, used, nominal, borrowing limit, available now and
  how much is short; whether the ClusterQueue borrows and what the other ClusterQueues of
  its cohort use;
- topology: per TAS pod set the largest domain at the requested level (required/preferred,
  else the lowest level) and how many of its pods it can take now and with no admitted
  workloads;
- health: how many nodes ``node_health`` excludes, by reason;
- queue: position in the ClusterQueue (LocalQueue usage when Admission Fair Sharing orders it,
  then priority, then queue time);
- fair sharing (when the Configuration enables it): the weighted share of every ClusterQueue
  of the cohort tree now and with its head admitted, and which heads the fair-sharing
  tournament would admit before this one;
- the QuotaReserved condition the controller last wrote;
- waitForPodsReady: the PodsReady condition, the requeue count and backoff left, a hold by
  ``Requeued=False`` and a deactivation (:func:`_lifecycle`).

Pure: no client calls here. The result is a JSON-able dict; :func:`to_text` words it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from scheduler.adapter.explain_targets import Target, resolve, summarize
from scheduler.adapter.snapshot import build_snapshot
from scheduler.adapter.views import EngineSnapshot, holds_reservation
from scheduler.core.beyond.compactness import remaining_s
from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET, DomainTarget, parse_target
from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.health import node_health
from scheduler.core.kueue import afs
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit, Pending, Preempt
from scheduler.core.kueue.fairsharing import Contender, fair_order, node_weights, share_rows
from scheduler.core.kueue.flavorassigner import assign_flavors
from scheduler.core.kueue.podsready import PODS_READY
from scheduler.core.kueue.queueing import OrderKey, PendingWorkload, order_key, resolve_priority
from scheduler.core.kueue.quota import QuotaState
from scheduler.core.kueue.snapshot import Snapshot, quota_in_use
from scheduler.core.resources import format_quantity, with_pod_slot
from scheduler.core.topology import DRAINED_REASON, is_drained


class NotFound(LookupError):
    """No Job or Workload of that name in the namespace."""


def _conditions(workload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or ()}


def explain(snap: EngineSnapshot, namespace: str, name: str, *, solver: str = "auto",
            time_budget_s: float = 0.1, now: dt.datetime | None = None,
            config: KueueConfig = KUEUE_DEFAULTS) -> dict[str, Any]:
    target = resolve(snap, namespace, name)
    if target is None:
        raise NotFound(f"no Job or Workload {name!r} in namespace {namespace!r}")
    if target.members is not None:
        return _explain_members(snap, target, namespace, name, solver, time_budget_s, now, config)
    return _explain_one(snap, target.kind or "Job", namespace, name, target.workload, solver, time_budget_s, now,
                        config)


def _explain_members(snap: EngineSnapshot, target: Target, namespace: str, name: str, solver: str,
                     time_budget_s: float, now: dt.datetime | None, config: KueueConfig) -> dict[str, Any]:
    """A Deployment, StatefulSet, LeaderWorkerSet or pod group: the counts first, then the
    explanation of the first Workload not admitted (its queue, quota, topology)."""
    summary = summarize(target)
    out: dict[str, Any] = {"namespace": namespace, "name": name, "kind": target.kind, "workload": "",
                           "clusterQueue": "", "admitted": summary.admitted, "reasons": list(summary.reasons),
                           "members": [dict(r) for r in summary.rows], "unit": target.unit}
    admitted = next((m.workload for m in target.members or () if m.admitted and m.workload is not None), None)
    if admitted is not None:
        out["clusterQueue"] = ((admitted.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
    pending = summary.pending
    if pending is None or pending.workload is None:
        return out
    one = _explain_one(snap, target.kind, namespace, pending.name, pending.workload, solver, time_budget_s, now,
                       config)
    out["pendingMember"] = {"workload": pending.name, "pods": sorted(str(p["metadata"]["name"]) for p in pending.pods)}
    for key, value in one.items():
        if key == "reasons":
            out["reasons"].extend(value)
        elif key not in ("namespace", "name", "admitted"):
            out[key] = value
    return out


def _explain_one(snap: EngineSnapshot, kind: str, namespace: str, name: str, workload: Mapping[str, Any] | None,
                 solver: str, time_budget_s: float, now: dt.datetime | None, config: KueueConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": namespace, "name": name, "workload": "", "clusterQueue": "",
                           "admitted": False, "reasons": []}
    reasons: list[dict[str, str]] = out["reasons"]
    if workload is None:
        reasons.append({"reason": "NoWorkload",
                        "message": f"no Workload for this {kind} yet: the controller creates one per {kind} labelled "
                                   "kueue.x-k8s.io/queue-name (is the label set, is the controller running?)"})
        return out
    out["workload"] = workload["metadata"]["name"]
    conds = _conditions(workload)
    recorded = conds.get("QuotaReserved")
    if recorded:
        out["condition"] = {k: recorded.get(k, "") for k in ("type", "status", "reason", "message",
                                                             "lastTransitionTime")}
    admission = (workload.get("status") or {}).get("admission") or {}
    out["clusterQueue"] = admission.get("clusterQueue", "")
    lifecycle = _lifecycle(workload, conds, now or dt.datetime.now(dt.UTC))
    if lifecycle:
        out["lifecycle"] = lifecycle
    finished = conds.get("Finished")
    if finished and finished.get("status") == "True":
        reasons.append({"reason": "Finished", "message": finished.get("message", "") or "the Workload is finished"})
        return out
    if holds_reservation(workload):
        out["admitted"] = True
        return out
    _explain_pending(snap, workload, out, solver, time_budget_s, now or dt.datetime.now(dt.UTC), config)
    if recorded and recorded.get("status") == "False" and recorded.get("message") and not any(
            r["message"] == recorded.get("message") for r in reasons):
        reasons.append({"reason": recorded.get("reason", ""),
                        "message": f"last recorded by the controller: {recorded['message']}"})
    return out


def _lifecycle(workload: Mapping[str, Any], conds: Mapping[str, Mapping[str, Any]], now: dt.datetime) -> dict[str, Any]:
    """PodsReady, requeue backoff and deactivation state (waitForPodsReady), as recorded."""
    out: dict[str, Any] = {}
    ready = conds.get(PODS_READY)
    if ready:
        out["podsReady"] = {k: ready.get(k, "") for k in ("status", "reason", "message", "lastTransitionTime")}
    state = (workload.get("status") or {}).get("requeueState") or {}
    if state:
        out["requeueCount"] = int(state.get("count") or 0)
        if state.get("requeueAt"):
            at = dt.datetime.fromisoformat(str(state["requeueAt"]).replace("Z", "+00:00"))
            out["requeueAt"] = state["requeueAt"]
            out["backoffLeftSeconds"] = max(0, round((at - now).total_seconds()))
    requeued = conds.get("Requeued")
    if requeued and requeued.get("status") == "False":
        out["held"] = {"reason": requeued.get("reason", ""), "message": requeued.get("message", "")}
    if (workload.get("spec") or {}).get("active") is False:
        evicted = conds.get("Evicted") or {}
        out["deactivated"] = {"reason": evicted.get("reason", ""), "message": evicted.get("message", "")}
    return out


def _lifecycle_text(life: Mapping[str, Any]) -> list[str]:
    lines = []
    ready = life.get("podsReady")
    if ready:
        lines.append(f"PodsReady={ready['status']} reason {ready['reason']}: {ready['message']} "
                     f"(since {ready['lastTransitionTime'] or '?'}).")
    if "requeueCount" in life:
        left = (f"; backoff ends {life['requeueAt']} ({life['backoffLeftSeconds']} s left)"
                if life.get("requeueAt") else "")
        lines.append(f"Requeued {life['requeueCount']} time(s) after an eviction{left}.")
    if life.get("held"):
        held = life["held"]
        lines.append(f"Held out of the queue: Requeued=False reason {held['reason']}: {held['message']}.")
    if life.get("deactivated"):
        d = life["deactivated"]
        lines.append(f"Deactivated (spec.active=false): {d['reason'] or '-'}: {d['message'] or '-'}.")
    return lines


def _explain_pending(snap: EngineSnapshot, workload: Mapping[str, Any], out: dict[str, Any], solver: str,
                     time_budget_s: float, now: dt.datetime, config: KueueConfig) -> None:
    full = build_snapshot(snap.objects, now, solver=solver, time_budget_s=time_budget_s,
                          health_policy=snap.health_policy, config=config)
    meta = workload["metadata"]
    key = f"{meta['namespace']}/{meta['name']}"
    reasons: list[dict[str, str]] = out["reasons"]
    mine = [p for p in full.pending if p.key == key]
    if not mine:
        reasons.append({"reason": "NotQueued",
                        "message": "the Workload is not queued (spec.active is false or it is being deleted)"})
        return
    pw = mine[0]
    lq = full.local_queues.get(f"{pw.spec.namespace}/{pw.spec.queue_name}")
    cq_name = lq.cluster_queue if lq else ""
    out["localQueue"] = pw.spec.queue_name
    out["clusterQueue"] = out["clusterQueue"] or cq_name
    decisions = run_cycle(dataclasses.replace(full, pending=(pw,), inadmissible=frozenset()))
    victims = []
    for d in decisions:
        if isinstance(d, Pending) and d.workload == key:
            out["clusterQueue"] = out["clusterQueue"] or d.cluster_queue
            reasons.append(_pending_reason(d, full.now, out))
            target = parse_target({ANN_PREEMPTION_TARGET: d.preemption_target})
            if target is not None:
                out["preemptionTarget"] = _target(target, pw.spec.annotations)
        elif isinstance(d, Preempt) and d.preemptor == key:
            victims.append(f"{d.workload} ({d.reason})")
        elif isinstance(d, Admit) and d.workload == key:
            reasons.append({"reason": "Admissible",
                            "message": f"fits now in ClusterQueue {d.cluster_queue} (quota and topology); admitted "
                                       "at the next cycle that reaches it in its queue"})
    if victims:
        reasons.append({"reason": "Preemption", "message": f"needs the preemption of {', '.join(victims)}"})
        if "preemptionTarget" in out:
            out["preemptionTarget"]["victims"] = victims
    if not reasons and pw.held:
        reasons.append({"reason": "Held", "message": "Requeued=False: out of the queue until its backoff ends or its "
                                                     "queue restarts (see the lifecycle lines)"})
    elif not reasons and pw.requeue_at is not None and pw.requeue_at > full.now:
        reasons.append({"reason": "Backoff", "message": "waiting for status.requeueState.requeueAt"})
    if not reasons:
        reasons.append({"reason": "Pending", "message": "the admission cycle made no decision for it"})
    cq = full.cluster_queues.get(cq_name)
    if cq is None:
        return  # no LocalQueue or ClusterQueue to rank it in: the reason above says which is missing
    # ---- queue position
    prio = resolve_priority(pw.spec, full.workload_priority_classes, full.priority_classes, pw.priority)
    mode = cq.admission_mode

    def lq_of(o: PendingWorkload) -> str:
        return f"{o.spec.namespace}/{o.spec.queue_name}"

    me = order_key(prio, pw.timestamp, pw.key, afs.order_usage(config, full.lq_usage, mode, lq_of(pw)))
    lq_cq = {k: v.cluster_queue for k, v in full.local_queues.items()}
    same = [o for o in full.pending if cq_name and lq_cq.get(lq_of(o)) == cq_name]
    ahead = sum(1 for o in same if o.key != key and order_key(
        resolve_priority(o.spec, full.workload_priority_classes, full.priority_classes, o.priority),
        o.timestamp, o.key, afs.order_usage(config, full.lq_usage, mode, lq_of(o))) < me)
    out["queue"] = {"clusterQueue": cq_name, "priority": prio, "position": ahead + 1, "ahead": ahead,
                    "pending": len(same), "strategy": cq.queueing_strategy}
    if afs.orders_by_usage(config, mode):
        out["queue"]["admissionFairSharing"] = {
            "localQueue": lq_of(pw), "usage": afs.local_queue_usage(full.lq_usage, lq_of(pw), config),
            "others": {lq: afs.local_queue_usage(full.lq_usage, lq, config)
                       for lq in sorted({lq_of(o) for o in same} - {lq_of(pw)})}}
    # ---- quota
    out["quota"] = _quota(quota_in_use(full), cq, pw.spec, full.cluster_queues)
    if config.fair_sharing.enabled:
        _explain_fair_sharing(full, cq.name, pw, out)
    # ---- topology and health
    out["topology"] = _topology(full, cq, pw.spec)
    out["health"] = _health(snap, full, cq)


def _head(full: Snapshot, quota: QuotaState, cq_name: str, pw: PendingWorkload,
          levels: Mapping[str, tuple[str, ...]]) -> Contender:
    prio = resolve_priority(pw.spec, full.workload_priority_classes, full.priority_classes, pw.priority)
    usage = assign_flavors(pw.spec, full.cluster_queues[cq_name], quota, full.flavors, levels, fair_sharing=True,
                           ignore_undeclared=full.config.ignore_undeclared_resources).usage
    return Contender(pw.key, cq_name, usage, prio, pw.timestamp)


def _cohort_heads(full: Snapshot, quota: QuotaState, cq_name: str, pw: PendingWorkload) -> dict[str, Contender]:
    """The head of every ClusterQueue in ``cq_name``'s cohort tree, ``pw`` as its own queue's."""
    levels = {name: tree.levels for name, tree in full.trees.items()}
    queued: dict[str, list[tuple[OrderKey, PendingWorkload]]] = {}
    for o in full.pending:
        lq = full.local_queues.get(f"{o.spec.namespace}/{o.spec.queue_name}")
        if lq is None or lq.cluster_queue not in full.cluster_queues or lq.cluster_queue == cq_name:
            continue
        prio = resolve_priority(o.spec, full.workload_priority_classes, full.priority_classes, o.priority)
        queued.setdefault(lq.cluster_queue, []).append((order_key(prio, o.timestamp, o.key), o))
    heads = {cq_name: _head(full, quota, cq_name, pw, levels)}
    for other in quota.cluster_queues_in_tree(cq_name):
        if other in queued:
            heads[other] = _head(full, quota, other, min(queued[other], key=lambda x: x[0])[1], levels)
    return heads


def _share(value: float | None) -> str:
    if value is None:
        return "-"
    return "infinite" if value == float("inf") else f"{value:.1f}"


def _explain_fair_sharing(full: Snapshot, cq_name: str, pw: PendingWorkload, out: dict[str, Any]) -> None:
    """The shares of the cohort tree's ClusterQueues and the heads fair sharing puts first."""
    quota = quota_in_use(full)
    if not quota.has_cohort(cq_name):
        return
    weights = node_weights(full.cluster_queues, full.cohorts)
    heads = _cohort_heads(full, quota, cq_name, pw)
    order = fair_order(quota, weights, sorted(heads.values(), key=lambda c: c.key), full.config.feature_gates)
    ahead = order[:[c.key for c in order].index(pw.key)]
    members = [n for n in quota.cluster_queues_in_tree(cq_name) if n in full.cluster_queues]
    rows = share_rows(quota, weights, members, heads)
    out["fairSharing"] = {
        "clusterQueues": [{"clusterQueue": r.cluster_queue, "weight": r.weight, "share": _share(r.share),
                           "dominantResource": r.dominant_resource, "head": r.head,
                           "shareWithHead": _share(r.share_with_head)} for r in rows],
        "ahead": [{"workload": c.key, "clusterQueue": c.cluster_queue} for c in ahead]}
    if ahead:
        mine = next(r for r in rows if r.cluster_queue == cq_name)
        others = {r.cluster_queue: r for r in rows}
        behind = ", ".join(f"{c.cluster_queue} (share {_share(others[c.cluster_queue].share_with_head)} with "
                           f"{c.key})" for c in ahead)
        out["reasons"].append({"reason": "FairSharing", "message": (
            f"waits behind its team's fair share: fair sharing admits first the heads of {behind}; ClusterQueue "
            f"{cq_name} would have share {_share(mine.share_with_head)} with this workload (now "
            f"{_share(mine.share)}, weight {mine.weight:g})")})


def _target(target: DomainTarget, annotations: Mapping[str, str]) -> dict[str, Any]:
    """The domain the preemptions free (domain-clearing preemption), and whether it is the one
    recorded on the Workload by an earlier cycle (sticky) or chosen now."""
    return {"podSet": target.pod_set, "flavor": target.flavor, "level": target.level, "domain": target.name,
            "selector": dict(target.selector), "sticky": parse_target(annotations) == target, "victims": []}


def _pending_reason(d: Pending, now: float, out: dict[str, Any]) -> dict[str, str]:
    """The cycle's reason; for a bounded wait for a compact placement (core/beyond/compactness.py) also
    the time left, and ``out["compactWait"]`` with the deadline."""
    if d.retry_at is None:
        return {"reason": d.reason, "message": d.message}
    left = remaining_s(d.retry_at, now)
    out["compactWait"] = {"deadline": dt.datetime.fromtimestamp(d.retry_at, dt.UTC).isoformat(),
                          "remainingSeconds": round(left)}
    return {"reason": d.reason, "message": f"{d.message} ({left:.0f}s of the wait left)"}


def _requested(spec: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for ps in spec.pod_sets:
        for res, v in ps.requests.items():
            total[res] = total.get(res, 0) + v * ps.count
    return total


def _quota(quota: Any, cq: Any, spec: Any, cqs: Mapping[str, Any]) -> dict[str, Any]:
    requested = _requested(spec)
    rows = []
    for group in cq.resource_groups:
        for res in group.covered_resources:
            if not requested.get(res):
                continue
            for fq in group.flavors:
                q = fq.resources.get(res)
                if q is None:
                    continue
                fr = (fq.name, res)
                avail = quota.available(cq.name, fr)
                need = requested[res]
                rows.append({
                    "flavor": fq.name, "resource": res, "requested": format_quantity(need, res),
                    "used": format_quantity(quota.used(cq.name, fr), res),
                    "nominal": format_quantity(q.nominal, res),
                    "borrowingLimit": None if q.borrowing_limit is None else format_quantity(q.borrowing_limit, res),
                    "available": format_quantity(max(avail, 0), res),
                    "maxEver": format_quantity(quota.potential_available(cq.name, fr), res),
                    "short": format_quantity(max(0, need - avail), res),
                    "shortValue": max(0, need - avail),
                    "borrowing": quota.borrowing(cq.name, fr),
                })
    uncovered = sorted(r for r in requested if requested[r] and not cq.covers(r))
    cohort = quota.cohort_name(cq.name)
    members = []
    if cohort:
        for other in quota.cluster_queues_in_tree(cq.name):
            if other not in cqs:
                continue
            usage = []
            for row in rows:
                fr = (row["flavor"], row["resource"])
                usage.append({"flavor": fr[0], "resource": fr[1],
                              "used": format_quantity(quota.used(other, fr), fr[1]),
                              "nominal": format_quantity(quota.nominal(other, fr), fr[1]),
                              "borrowing": quota.borrowing(other, fr)})
            members.append({"clusterQueue": other, "usage": usage})
    return {"clusterQueue": cq.name, "cohort": cohort or "", "borrowing": any(r["borrowing"] for r in rows),
            "resources": rows, "uncovered": uncovered, "cohortMembers": members}


def _topology(full: Any, cq: Any, spec: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    flavors = cq.flavor_names() if cq is not None else []
    tas = [f for f in flavors if f in full.trees]
    if not tas:
        return out
    flavor = tas[0]
    tree = full.trees[flavor]
    empty = tree.clone()
    for w in full.admitted:
        for u in w.tas:
            if u.flavor == flavor:
                empty.remove_usage(u.placement, u.per_pod)
    for ps in spec.pod_sets:
        req = ps.topology
        mode = "required" if req and req.required else "preferred" if req and req.preferred else "unconstrained"
        level = (req.required or req.preferred) if req else None
        level = level or tree.levels[0]  # unconstrained: the widest level (where it could go at all)
        entry: dict[str, Any] = {"podSet": ps.name, "flavor": flavor, "topology": tree.name, "mode": mode,
                                 "level": level, "pods": ps.count}
        if not tree.has_level(level):
            entry["error"] = f"level {level} is not in Topology {tree.name} (levels: {', '.join(tree.levels)})"
            out.append(entry)
            continue
        li = tree.level_index(level)
        per_pod = with_pod_slot(ps.requests)
        for label, t in (("now", tree), ("empty", empty)):
            fit = t.leaf_fit(per_pod, ps.node_selector, ps.tolerations)
            anc = t.ancestors_array(li)
            sums: dict[int, int] = {}
            for leaf in range(t.n_leaves):
                sums[int(anc[leaf])] = sums.get(int(anc[leaf]), 0) + int(fit.counts[leaf])
            best = max(sorted(sums), key=lambda d: sums[d], default=None)
            entry[label] = {"largestDomain": "/".join(t.paths[li][best]) if best is not None else "",
                            "podsFit": sums.get(best, 0) if best is not None else 0,
                            "domainsThatFit": sum(1 for v in sums.values() if v >= ps.count),
                            "domains": t.domain_count(li), "podsFitInAll": int(fit.counts.sum())}
            if label == "now":
                entry["exclusions"] = dict(fit.exclusions)
        entry["nodesLeftOut"] = dict(tree.build_exclusions)
        out.append(entry)
    return out


def _health(snap: EngineSnapshot, full: Any, cq: Any) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if cq is not None:
        for f in cq.flavor_names():
            spec = full.flavors.get(f)
            if spec is not None:
                labels.update(spec.node_labels)
    nodes = [n for n in snap.nodes if all(n.labels.get(k) == v for k, v in labels.items())]
    by_reason: dict[str, int] = {}
    examples: dict[str, list[str]] = {}
    for n in nodes:
        h = node_health(n, snap.health_policy)
        reason = h.reason if not h.healthy else (DRAINED_REASON if is_drained(n) else "")
        if reason:
            by_reason[reason] = by_reason.get(reason, 0) + 1
            examples.setdefault(reason, []).append(n.name)
    return {"nodes": len(nodes), "excluded": sum(by_reason.values()),
            "byReason": dict(sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))),
            "examples": {k: sorted(v)[:3] for k, v in examples.items()},
            "flavorNodeLabels": labels}


def _members_text(result: Mapping[str, Any], who: str) -> list[str]:
    """The head of a target with members: its kind, then which member the rest is about."""
    cq = f" in ClusterQueue {result['clusterQueue']}" if result.get("admitted") and result.get("clusterQueue") else ""
    state = f"admitted{cq}: nothing is pending" if result.get("admitted") else "not all admitted"
    lines = [f"{who} ({result.get('kind') or '?'}) is {state}."]
    pending = result.get("pendingMember")
    if pending:
        pods = ", ".join(pending["pods"]) or "no pods yet"
        lines.append(f"Explained below: {result.get('unit') or 'member'} {pending['workload']} (pods: {pods}), not "
                     "admitted" + (f" (ClusterQueue {result['clusterQueue']})" if result.get("clusterQueue") else "")
                     + ".")
    return lines


def to_text(result: Mapping[str, Any]) -> str:
    """Plain words, most important first."""
    lines = []
    who = f"{result['namespace']}/{result['name']}"
    wl = f" (Workload {result['workload']})" if result.get("workload") and result["workload"] != result["name"] else ""
    life = _lifecycle_text(result.get("lifecycle") or {})
    if "members" in result:
        lines.extend(_members_text(result, who))
    elif result.get("admitted"):
        head = f"{who}{wl} is admitted in ClusterQueue {result.get('clusterQueue') or '?'}: nothing is pending.\n"
        return head + "".join(line + "\n" for line in life)
    else:
        lines.append(f"{who}{wl} is not admitted" + (f" (ClusterQueue {result['clusterQueue']})"
                                                      if result.get("clusterQueue") else "") + ".")
    for r in result.get("reasons", []):
        lines.append(f"  {r['reason']}: {r['message']}")
    if result.get("admitted"):
        return "\n".join(lines) + "\n"
    pt = result.get("preemptionTarget")
    if pt:
        how = "kept from an earlier cycle" if pt["sticky"] else "chosen now"
        lines.append(f"Preemption target: {pt['level']} domain {pt['domain']} on flavor {pt['flavor']} ({how}); "
                     f"victims: {', '.join(pt['victims']) or 'already being evicted'}.")
    q = result.get("queue")
    if q:
        lines.append(f"Queue: position {q['position']} of {q['pending']} pending in {q['clusterQueue']} "
                     f"({q['strategy']}, priority {q['priority']}; {q['ahead']} ahead of it).")
        lq_usage = q.get("admissionFairSharing")
        if lq_usage:
            others = ", ".join(f"{lq} {u:g}" for lq, u in lq_usage["others"].items()) or "none pending"
            lines.append(f"  Admission fair sharing orders this ClusterQueue by LocalQueue usage first: "
                         f"{lq_usage['localQueue']} {lq_usage['usage']:g} (lower goes first; others: {others}).")
    quota = result.get("quota")
    if quota:
        state = "borrowing" if quota["borrowing"] else "not borrowing"
        co = f", cohort {quota['cohort']}" if quota["cohort"] else ", no cohort"
        lines.append(f"Quota in ClusterQueue {quota['clusterQueue']} ({state}{co}):")
        for r in quota["resources"]:
            limit = "no borrowing limit" if r["borrowingLimit"] is None else f"borrowing limit {r['borrowingLimit']}"
            verdict = f"short by {r['short']}" if r["shortValue"] else "enough"
            lines.append(f"  {r['resource']} on flavor {r['flavor']}: requests {r['requested']}, available "
                         f"{r['available']} (used {r['used']} of nominal {r['nominal']}, {limit}; at most "
                         f"{r['maxEver']} ever) -> {verdict}")
        for res in quota["uncovered"]:
            lines.append(f"  {res}: not covered by any resource group of the ClusterQueue")
        for m in quota["cohortMembers"]:
            if m["clusterQueue"] == quota["clusterQueue"]:
                continue
            use = ", ".join(f"{u['resource']} {u['used']}/{u['nominal']}{' (borrowing)' if u['borrowing'] else ''}"
                            for u in m["usage"])
            lines.append(f"  cohort member {m['clusterQueue']}: {use or 'no usage of these resources'}")
    fs = result.get("fairSharing")
    if fs:
        lines.append("Fair sharing (weighted share now -> with the ClusterQueue's head admitted):")
        for r in fs["clusterQueues"]:
            head = f" -> {r['shareWithHead']} with {r['head']}" if r["head"] else ""
            lines.append(f"  {r['clusterQueue']} (weight {r['weight']:g}): {r['share']}{head}")
    for t in result.get("topology", []):
        if "error" in t:
            lines.append(f"Topology (pod set {t['podSet']}): {t['error']}")
            continue
        lvl = t["level"].rsplit("/", 1)[-1]
        now, empty = t["now"], t["empty"]
        lines.append(f"Topology (pod set {t['podSet']}, {t['pods']} pods, {t['mode']} {t['level']}, flavor "
                     f"{t['flavor']}): largest {lvl} domain {now['largestDomain'] or '-'} takes {now['podsFit']} "
                     f"now ({now['domainsThatFit']} of {now['domains']} domains take all {t['pods']}); on an "
                     f"empty cluster the largest takes {empty['podsFit']}"
                     + (" -> can never fit at this level" if t["mode"] == "required" and empty["podsFit"] < t["pods"]
                        else "") + ".")
    h = result.get("health")
    if h:
        if h["excluded"]:
            why = "; ".join(f"{n} x {reason}" for reason, n in h["byReason"].items())
            lines.append(f"Health: {h['excluded']} of {h['nodes']} nodes excluded ({why}).")
        else:
            lines.append(f"Health: all {h['nodes']} nodes healthy.")
    lines.extend(life)
    c = result.get("condition")
    if c:
        lines.append(f"Last condition: QuotaReserved={c.get('status')} reason {c.get('reason') or '-'}: "
                     f"{c.get('message') or '-'} ({c.get('lastTransitionTime') or 'no time'}).")
    return "\n".join(lines) + "\n"
