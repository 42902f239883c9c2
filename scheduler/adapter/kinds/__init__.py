"""The job-kind registry (Kueue's jobframework, in the spirit): one module per kind declaring
what every part of toposched needs to know about it (``base.JobKind``), the registry that lists
them (``registry.KINDS``), and the kind-agnostic readers built on the declarations
(``workloads``, ``podgroups``, ``ownership``). docs/design/job-kinds.md explains how to add one."""
