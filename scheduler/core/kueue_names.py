"""Kueue's label and annotation names that the core, the controller, the extender and the
webhook all read or write: one definition each (Kueue v0.17.0 ``pkg/controller/constants`` and
``pkg/controller/jobs/pod/constants``)."""

from __future__ import annotations

# On a Workload (and a pod group): the UID of the job it stands for.
LABEL_JOB_UID = "kueue.x-k8s.io/job-uid"
# On a pod of a pod group: the prebuilt Workload it belongs to (Kueue's IsTAS also reads it).
LABEL_PREBUILT_WORKLOAD = "kueue.x-k8s.io/prebuilt-workload-name"
# On a pod of a pod group: the kind of parent (LeaderWorkerSet) that suspends it.
ANN_POD_SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
# On a pod template: where this pod set's rank numbering starts (LWS leader-worker groups).
ANN_POD_INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"
# Kueue's pod-group integrations (pkg/controller/constants, jobs/pod/constants): on the pods of
# a group, and on the group's prebuilt Workload.
LABEL_MANAGED = "kueue.x-k8s.io/managed"
LABEL_POD_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
ANN_POD_GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
ANN_POD_GROUP_SERVING = "kueue.x-k8s.io/pod-group-serving"
ANN_IS_GROUP_WORKLOAD = "kueue.x-k8s.io/is-group-workload"
ANN_JOB_OWNER_GVK = "kueue.x-k8s.io/job-owner-gvk"
ANN_JOB_OWNER_NAME = "kueue.x-k8s.io/job-owner-name"
ANN_COMPONENT_INDEX = "kueue.x-k8s.io/component-workload-index"
# Kueue's pod integration (pkg/controller/jobs/pod/constants, apis/kueue/v1beta2) and TAS.
# Who holds a job's admission (Kueue's AdmissionGatedBy gate): comma-separated domain-prefixed
# names; the Workload waits until the list is empty.
ANN_ADMISSION_GATED_BY = "kueue.x-k8s.io/admission-gated-by"
GATE_ADMISSION = "kueue.x-k8s.io/admission"  # held until the pod's Workload is admitted
GATE_TOPOLOGY = "kueue.x-k8s.io/topology"  # held until the topology ungater names its domain
GATE_ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
MANAGED_VALUE = "true"
FINALIZER_MANAGED = "kueue.x-k8s.io/managed"
ANN_POD_GROUP_FAST_ADMISSION = "kueue.x-k8s.io/pod-group-fast-admission"
ANN_RETRIABLE_IN_GROUP = "kueue.x-k8s.io/retriable-in-group"
LABEL_POD_GROUP_POD_INDEX = "kueue.x-k8s.io/pod-group-pod-index"
ANN_POD_GROUP_POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index-label"
CONDITION_TERMINATION_TARGET = "TerminationTarget"
