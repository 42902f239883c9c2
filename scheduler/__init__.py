"""toposched: Kueue-compatible, topology-aware admission and placement for GPU clusters."""

__version__ = "0.1.0"
