"""The kind-specific, pure parts of the kinds Kueue v0.17.0 integrates beyond toposched's first
five: Kubeflow TrainJob, KubeRay RayJob / RayCluster / RayService, the HyperPodPyTorchJob
(HyperPod training operator), plain Pods and pod groups, Deployment and StatefulSet, and the
topology ungater's choice of domain per pod.

One module per kind family, each exposing plain functions on object dicts, in the shape of
:mod:`scheduler.adapter.kinds` (the job-kind registry): ``pod_sets``
(Kueue's pod sets: names, counts, templates, topology requests with the rank label),
``is_suspended``, ``start_patch`` / ``stop_patch`` / ``restore_patch`` (JSON merge patches; the
caller computes each pod template's merge patch, e.g. with ``kube.jobs.template_start_patch``,
and passes them by pod-set name), ``finish_state``, ``is_active``, ``pods_ready``. Nothing here
does I/O. How Kueue does each kind, with source paths: docs/design/new-kinds.md. Not wired into
the controller or the webhook yet (the job-kind registry imports these).
"""
