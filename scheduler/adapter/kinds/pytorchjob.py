"""kubeflow.org/v1 PyTorchJob (Kueue's ``kubeflow.org/pytorchjob``): pod sets ``master`` and
``worker``, in that order (see :mod:`scheduler.adapter.kinds.kubeflow`)."""

from __future__ import annotations

from scheduler.adapter.kinds.kubeflow import kubeflow_kind

PYTORCHJOB = kubeflow_kind(version="v1", kind="PyTorchJob", specs_field="pytorchReplicaSpecs",
                           order=("Master", "Worker"))
