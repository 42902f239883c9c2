"""The Kubernetes plumbing every door shares (the controller, the extender, the webhook, the
CLI): the API client, list+watch informers and the resource constants, Lease election, the
clock, and the in-memory API the unit tests run against. No decision is made here; the
controller itself is ``scheduler/kube``."""
