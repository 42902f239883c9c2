"""kubeflow.org/v2beta1 MPIJob (Kueue's ``kubeflow.org/mpijob``): pod sets ``launcher`` and
``worker``, in that order (Kueue's orderedReplicaTypes; see
:mod:`scheduler.adapter.kinds.kubeflow`). The mpi-operator creates the launcher as a batch/v1
Job the MPIJob controls: that Job is governed through the MPIJob, never queued on its own."""

from __future__ import annotations

from dataclasses import replace

from scheduler.adapter.kinds.kubeflow import kubeflow_kind

MPIJOB = replace(kubeflow_kind(version="v2beta1", kind="MPIJob", specs_field="mpiReplicaSpecs",
                               order=("Launcher", "Worker")), children=("batch/job",))
