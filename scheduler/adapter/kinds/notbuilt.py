"""Kinds Kueue v0.17.0 integrates that toposched does not govern yet: named, so the webhook's
default deny and ``toposched place`` say "not built" instead of "unknown", and so the
integration that builds one has its seam (move the entry to a kind module and the registry's
:data:`~scheduler.adapter.kinds.registry.KINDS`). A queued object of one of these kinds is
refused by the default deny with the entry's note, never run outside the queue.
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
    KnownKind("kubeflow.org", "v1", "TFJob", "kubeflow.org/tfjob"),
    KnownKind("kubeflow.org", "v1", "XGBoostJob", "kubeflow.org/xgboostjob"),
    KnownKind("kubeflow.org", "v1", "PaddleJob", "kubeflow.org/paddlejob"),
    KnownKind("kubeflow.org", "v1", "JAXJob", "kubeflow.org/jaxjob"),
    KnownKind("workload.codeflare.dev", "v1beta2", "AppWrapper", "workload.codeflare.dev/appwrapper",
              "no AppWrapper peer runs here to build it against"),
    KnownKind("sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkoperator.k8s.io/sparkapplication",
              "no Spark operator peer runs here to build it against"),
)
