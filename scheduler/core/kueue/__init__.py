"""Kueue's admission cycle, step by step as Kueue's ``pkg/scheduler`` takes it: the snapshot,
the queues and their heads (``queueing``, ``fairsharing``, ``afs``), nomination (``nominate``:
flavor assignment, TAS placement on ``topologies``, preemption), the cycle's entries
(``entries``), ordering and admission (``cycle``), and the decisions it returns. toposched's
additions (``scheduler.core.beyond``) are reached only from the named steps listed in
``tests/unit/core/test_rooms.py``."""
