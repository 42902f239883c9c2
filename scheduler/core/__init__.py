"""The pure decision-making core: plain data in, decisions out.

Rule of the house: nothing under ``scheduler.core`` imports from ``scheduler.kube``,
``scheduler.extender``, ``scheduler.api`` or ``admission``, and nothing here does I/O.
"""
