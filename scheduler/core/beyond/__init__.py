"""toposched's additions to Kueue's cycle (docs/beyond-kueue.md), each off unless asked for: the
bounded wait for a compact placement (``compactness``, ``compact_wait``), held domains
(``held_domains``, ``domain_holds``), preferred domains and the sticky preemption target
(``preferred_domains``, ``domain_target``), quota that follows healthy capacity
(``healthy_capacity``) and defragmentation (``defrag``)."""
