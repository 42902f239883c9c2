"""Kinds Kueue v0.17.0 integrates (or that HyperPod users submit) that toposched does not govern
yet: named, so the webhook's default deny and ``toposched place`` say "not built" instead of
"unknown", and so the integration that builds one has its seam (move the entry to a kind
module and the registry's :data:`~scheduler.adapter.kinds.registry.KINDS`).

``pod``, ``deployment`` and ``statefulset`` are Kueue's pod-level integrations (a pod webhook
with the ``kueue.x-k8s.io/admission`` scheduling gate); until they are built here, a pod, a
Deployment or a StatefulSet carrying ``kueue.x-k8s.io/queue-name`` is refused, never run
outside the queue.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownKind:
    group: str
    version: str
    kind: str
    framework: str  # Kueue's integrations.frameworks name; "" when Kueue has none
    note: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def spelled(self) -> str:
        return f"{self.api_version} {self.kind}"


NOT_BUILT: tuple[KnownKind, ...] = (
    KnownKind("", "v1", "Pod", "pod", "Kueue's pod integration: plain pods and pod groups"),
    KnownKind("apps", "v1", "Deployment", "deployment", "Kueue's deployment integration (a pod webhook)"),
    KnownKind("apps", "v1", "StatefulSet", "statefulset", "Kueue's statefulset integration (a pod webhook)"),
    KnownKind("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainer.kubeflow.org/trainjob",
              "Kubeflow Trainer v2"),
    KnownKind("ray.io", "v1", "RayJob", "ray.io/rayjob", "KubeRay"),
    KnownKind("ray.io", "v1", "RayCluster", "ray.io/raycluster", "KubeRay"),
    KnownKind("ray.io", "v1", "RayService", "ray.io/rayservice", "KubeRay"),
    KnownKind("sagemaker.amazonaws.com", "v1", "HyperPodPyTorchJob", "",
              "the HyperPod training operator's job; AWS documents it as an external framework"),
    KnownKind("kubeflow.org", "v1", "TFJob", "kubeflow.org/tfjob"),
    KnownKind("kubeflow.org", "v1", "XGBoostJob", "kubeflow.org/xgboostjob"),
    KnownKind("kubeflow.org", "v1", "PaddleJob", "kubeflow.org/paddlejob"),
    KnownKind("kubeflow.org", "v1", "JAXJob", "kubeflow.org/jaxjob"),
    KnownKind("workload.codeflare.dev", "v1beta2", "AppWrapper", "workload.codeflare.dev/appwrapper"),
    KnownKind("sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkoperator.k8s.io/sparkapplication"),
)
