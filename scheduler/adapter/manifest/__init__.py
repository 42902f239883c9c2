"""The checks of a manifest that need no cluster: Kubernetes' types of the fields read
(``shape``), Kueue's topology-annotation and PodSet-group rules (``annotations``,
``spreading``), label-key rules (``labelkeys``), each kind's own refusals and partial
admission (``checks``), as field errors (``fielderrors``). The webhook, ``toposched place`` and
gRPC ``Place`` read the same checks: one door never imports another's."""
