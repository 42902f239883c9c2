"""Kubernetes / Kueue object dicts -> core values, converted once.

The layer between the pure core (``scheduler.core``) and the shells that hold objects (the
controller's informer cache, the gRPC engine, the CLI's files and list calls, the webhook).
Nothing here does I/O except :mod:`scheduler.adapter.files`, which reads the files a command
names. Modules:

- :mod:`~scheduler.adapter.objects`: :class:`~scheduler.adapter.objects.ClusterObjects`, the
  raw objects of one moment, and small dict helpers (conditions, reservation).
- :mod:`~scheduler.adapter.cluster`: nodes, capacity-holding pods, TAS usage of admitted
  workloads, one topology tree per TAS flavor.
- :mod:`~scheduler.adapter.queues`: ClusterQueues, Cohorts, LocalQueues, ResourceFlavors,
  Topologies, priority classes, namespace labels.
- :mod:`~scheduler.adapter.workloads`: pending and admitted Workloads (TAS usage decoded once).
- :mod:`~scheduler.adapter.pending_queues`: the pending Workloads' per-LocalQueue queues, kept
  from one snapshot to the next (only changed Workloads move).
- :mod:`~scheduler.adapter.snapshot`: ``build_snapshot(objects, now)`` -> ``core.cycle.Snapshot``.
- :mod:`~scheduler.adapter.views`: ``EngineSnapshot``, raw objects with cached core views (gRPC,
  explain).
- :mod:`~scheduler.adapter.files`, :mod:`~scheduler.adapter.placement`,
  :mod:`~scheduler.adapter.topology_view`: read objects from YAML/JSON, build a tree and place,
  build the topology view — the library under both ``toposched`` commands and the gRPC servicer.
"""
